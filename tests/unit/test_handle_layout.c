/* The in-progress connect fields of known plugin handles
 * (src/abi/handle_layout.h): the offsets match structs declared the way the
 * plugins declare theirs, and tp__net_handle_scrub finds and clears exactly
 * those bytes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "abi/handle_layout.h"
#include "emu.h"
#include "net/net.h"

/* google/nccl-plugin-gpudirecttcpx src/misc/socket_utils.h, src/common.h */
union tcpx_socket_address {
	struct sockaddr sa;
	struct sockaddr_in sin;
	struct sockaddr_in6 sin6;
};

struct tcpx_handle {
	union tcpx_socket_address connect_addr;
	int port_start, port_count;
	int num_socks;
	int num_threads;
	bool redirect_ctrl;
	union tcpx_socket_address ctrl_addr;
	void *connect_args;
};

/* NCCL src/transport/net_socket.cc (2.19+) */
struct nccl_socket_stage {
	int state;
	uint8_t iteration;
	void *sock;
	void *comm;
};

struct nccl_socket_handle {
	union tcpx_socket_address connect_addr;
	uint64_t magic;
	int nsocks, nthreads;
	struct nccl_socket_stage stage;
};

static void test_offsets(void **state)
{
	assert_int_equal(offsetof(struct tcpx_handle, connect_args),
			 TP_TCPX_HANDLE_CONNECT_ARGS_OFF);
	assert_int_equal(sizeof(void *), TP_TCPX_HANDLE_CONNECT_ARGS_LEN);
	assert_int_equal(sizeof(struct tcpx_handle), TP_TCPX_HANDLE_SIZE);
	assert_int_equal(offsetof(struct nccl_socket_handle, stage),
			 TP_NCCL_SOCKET_HANDLE_STAGE_OFF);
	assert_int_equal(sizeof(struct nccl_socket_stage), TP_NCCL_SOCKET_HANDLE_STAGE_LEN);
	assert_int_equal(sizeof(struct nccl_socket_handle), TP_NCCL_SOCKET_HANDLE_SIZE);
	assert_int_equal(offsetof(struct emu_handle, stage), TP_EMU_HANDLE_STAGE_OFF);
	assert_int_equal(offsetof(struct emu_handle, calls), TP_EMU_HANDLE_PROGRESS_OFF);
	assert_int_equal(sizeof(struct emu_handle),
			 TP_EMU_HANDLE_PROGRESS_OFF + TP_EMU_HANDLE_PROGRESS_LEN);
	assert_true(TP_TCPX_HANDLE_SIZE <= NCCL_NET_HANDLE_MAXSIZE);
	assert_int_equal(offsetof(struct tcpx_handle, num_socks), TP_TCPX_HANDLE_NUM_SOCKS_OFF);
	assert_int_equal(offsetof(struct tcpx_handle, num_threads), TP_TCPX_HANDLE_NUM_THREADS_OFF);
	assert_int_equal(offsetof(struct nccl_socket_handle, nsocks),
			 TP_NCCL_SOCKET_HANDLE_NSOCKS_OFF);
	assert_int_equal(offsetof(struct nccl_socket_handle, nthreads),
			 TP_NCCL_SOCKET_HANDLE_NTHREADS_OFF);
}

static void test_tcpx(void **state)
{
	unsigned char h[NCCL_NET_HANDLE_MAXSIZE];
	struct tcpx_handle t;
	int off;

	memset(&t, 0, sizeof(t));
	t.num_socks = 4;
	t.num_threads = 1;
	t.connect_args = (void *)(uintptr_t)0x4141414141414141ull;
	memset(h, 0x5a, sizeof(h));
	memcpy(h, &t, sizeof(t));
	assert_int_equal(tp__net_handle_scrub("GPUDirectTCPX_v7", h, &off), 1);
	assert_int_equal(off, TP_TCPX_HANDLE_CONNECT_ARGS_OFF);
	memcpy(&t, h, sizeof(t));
	assert_null(t.connect_args);
	assert_int_equal(t.num_socks, 4);
	assert_int_equal(h[TP_TCPX_HANDLE_SIZE], 0x5a); /* beyond the struct: untouched */
	/* A fresh handle (connect_args NULL) is clean. */
	assert_int_equal(tp__net_handle_scrub("GPUDirectTCPX_v7", h, &off), 1);
	assert_int_equal(off, -1);
}

static void test_emu(void **state)
{
	unsigned char h[NCCL_NET_HANDLE_MAXSIZE];
	struct emu_handle e;
	int off;

	memset(h, 0, sizeof(h));
	memset(&e, 0, sizeof(e));
	e.magic = EMU_MAGIC;
	e.nonce = 77;
	e.key = 0x4141414141414141ull;
	memcpy(h, &e, sizeof(e));
	assert_int_equal(tp__net_handle_scrub("TCPXEmu_v7", h, &off), 1);
	assert_int_equal(off, (int)offsetof(struct emu_handle, key));
	memcpy(&e, h, sizeof(e));
	assert_int_equal(e.key, 0);
	assert_int_equal(e.nonce, 77);
	assert_int_equal(e.magic, EMU_MAGIC);
	e.stage = EMU_STAGE_CONNECTING;
	memcpy(h, &e, sizeof(e));
	assert_int_equal(tp__net_handle_scrub("TCPXEmu_v7", h, &off), 1);
	assert_int_equal(off, TP_EMU_HANDLE_STAGE_OFF);
}

static void test_nccl_socket(void **state)
{
	unsigned char h[NCCL_NET_HANDLE_MAXSIZE];
	struct nccl_socket_handle n;
	int off;

	memset(&n, 0, sizeof(n));
	n.magic = 0x1234;
	n.stage.comm = (void *)(uintptr_t)0x4141414141414141ull;
	memset(h, 0, sizeof(h));
	memcpy(h, &n, sizeof(n));
	assert_int_equal(tp__net_handle_scrub("Socket", h, &off), 1);
	assert_int_equal(off, (int)offsetof(struct nccl_socket_handle, stage.comm));
	memcpy(&n, h, sizeof(n));
	assert_null(n.stage.comm);
	assert_int_equal(n.magic, 0x1234);
}

/* Counts the plugins index fixed arrays with (TCPX fd_data[8], Socket
 * socks[64]) are bounded before connect sees them. */
static void test_counts(void **state)
{
	unsigned char h[NCCL_NET_HANDLE_MAXSIZE];
	struct tcpx_handle t;
	struct nccl_socket_handle n;
	int off;

	memset(&t, 0, sizeof(t));
	t.num_socks = 4;
	t.num_threads = 1;
	memset(h, 0, sizeof(h));
	memcpy(h, &t, sizeof(t));
	assert_int_equal(tp__net_handle_counts("GPUDirectTCPX_v7", h, &off), 0);
	assert_int_equal(off, -1);
	t.num_socks = 200;
	memcpy(h, &t, sizeof(t));
	assert_int_equal(tp__net_handle_counts("GPUDirectTCPX_v7", h, &off), -1);
	assert_int_equal(off, (int)offsetof(struct tcpx_handle, num_socks));
	t.num_socks = 4;
	t.num_threads = 5;
	memcpy(h, &t, sizeof(t));
	assert_int_equal(tp__net_handle_counts("GPUDirectTCPX_v7", h, &off), -1);
	assert_int_equal(off, (int)offsetof(struct tcpx_handle, num_threads));
	t.num_threads = 0;
	memcpy(h, &t, sizeof(t));
	assert_int_equal(tp__net_handle_counts("GPUDirectTCPX_v7", h, &off), -1);

	memset(&n, 0, sizeof(n));
	n.nsocks = 8;
	n.nthreads = 2;
	memset(h, 0, sizeof(h));
	memcpy(h, &n, sizeof(n));
	assert_int_equal(tp__net_handle_counts("Socket", h, &off), 0);
	n.nsocks = 65;
	memcpy(h, &n, sizeof(n));
	assert_int_equal(tp__net_handle_counts("Socket", h, &off), -1);
	assert_int_equal(off, (int)offsetof(struct nccl_socket_handle, nsocks));
	n.nsocks = 8;
	n.nthreads = -1;
	memcpy(h, &n, sizeof(n));
	assert_int_equal(tp__net_handle_counts("Socket", h, &off), -1);
	assert_int_equal(off, (int)offsetof(struct nccl_socket_handle, nthreads));

	memset(h, 0x41, sizeof(h));
	assert_int_equal(tp__net_handle_counts("TCPXEmu_v7", h, &off), 0);
	assert_int_equal(tp__net_handle_counts("SomeVendorNet_v8", h, &off), 0);
}

static void test_unknown(void **state)
{
	unsigned char h[NCCL_NET_HANDLE_MAXSIZE], orig[NCCL_NET_HANDLE_MAXSIZE];
	int off;

	memset(h, 0x41, sizeof(h));
	memcpy(orig, h, sizeof(h));
	assert_int_equal(tp__net_handle_scrub("SomeVendorNet_v8", h, &off), 0);
	assert_int_equal(off, -1);
	assert_memory_equal(h, orig, sizeof(h));
	assert_int_equal(tp__net_handle_scrub(NULL, h, &off), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_offsets),	   cmocka_unit_test(test_tcpx),
		cmocka_unit_test(test_emu),	   cmocka_unit_test(test_nccl_socket),
		cmocka_unit_test(test_unknown),    cmocka_unit_test(test_counts),
	};

	return cmocka_run_group_tests(tests, NULL, NULL) ? 1 : 0;
}
