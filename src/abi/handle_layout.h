/*
 * Where plugins keep in-progress connect state inside the 128-byte connect
 * handle (docs/tcpx.md, plugin contract rule 14).  NCCL-socket-derived
 * plugins let connect() store a pointer in the handle on its first call and
 * dereference it on the next ones, so a handle that arrives from a peer
 * with those bytes set would have the plugin follow a pointer chosen by the
 * peer.  A freshly listened handle always has them zero; the library
 * refuses a peer handle where they are not (src/net/handle.c) and
 * tests/unit/test_handle_layout.c checks the offsets against structs
 * declared as the plugins declare theirs.  x86-64 only.
 *
 * GPUDirect-TCPX (google/nccl-plugin-gpudirecttcpx, src/common.h):
 *   struct tcpxHandle {
 *     union socketAddress connect_addr;   0  (sockaddr/_in/_in6: 28 bytes)
 *     int port_start, port_count;        28, 32
 *     int num_socks;                     36
 *     int num_threads;                   40
 *     bool redirect_ctrl;                44
 *     union socketAddress ctrl_addr;     48
 *     void *connect_args;                80  <- connect's heap state
 *   };                                   88 bytes
 *
 * NCCL's socket transport ("Socket", NCCL 2.19+ net_socket.cc):
 *   struct ncclNetSocketHandle {
 *     union ncclSocketAddress connectAddr;  0  (28 bytes)
 *     uint64_t magic;                      32
 *     int nSocks, nThreads;                40, 44
 *     struct { int state; uint8_t iteration;
 *              struct ncclSocket *sock;
 *              struct ncclNetSocketComm *comm; } stage;  48: 48, 52, 56, 64
 *   };                                     72 bytes
 *
 * The bundled emulator ("TCPXEmu", plugins/emu/emu.h struct emu_handle):
 *   stage (u32) at 4, and calls, slot, key (u32, u32, u64) at 32..47: an
 *   index into the emulator's own table plus a random key, never a pointer.
 */
#ifndef TP_ABI_HANDLE_LAYOUT_H
#define TP_ABI_HANDLE_LAYOUT_H

/*
 * Socket and thread counts the plugins copy from the peer's handle into the
 * comm and then index fixed arrays with: TCPX's fd_data[MAX_SOCKETS = 8]
 * (num_socks at 36, num_threads at 40), NCCL Socket's socks[64]
 * (nSocks at 40, nThreads at 44; at most 16 threads).  A peer's handle
 * with a count outside these bounds is refused (src/net/handle.c).
 */
#define TP_TCPX_HANDLE_NUM_SOCKS_OFF 36
#define TP_TCPX_HANDLE_NUM_THREADS_OFF 40
#define TP_TCPX_MAX_SOCKS 8
#define TP_NCCL_SOCKET_HANDLE_NSOCKS_OFF 40
#define TP_NCCL_SOCKET_HANDLE_NTHREADS_OFF 44
#define TP_NCCL_SOCKET_MAX_SOCKS 64
#define TP_NCCL_SOCKET_MAX_THREADS 16

#define TP_TCPX_HANDLE_CONNECT_ARGS_OFF 80
#define TP_TCPX_HANDLE_CONNECT_ARGS_LEN 8
#define TP_TCPX_HANDLE_SIZE 88

#define TP_NCCL_SOCKET_HANDLE_STAGE_OFF 48
#define TP_NCCL_SOCKET_HANDLE_STAGE_LEN 24
#define TP_NCCL_SOCKET_HANDLE_SIZE 72

#define TP_EMU_HANDLE_STAGE_OFF 4
#define TP_EMU_HANDLE_STAGE_LEN 4
#define TP_EMU_HANDLE_PROGRESS_OFF 32
#define TP_EMU_HANDLE_PROGRESS_LEN 16

#endif
