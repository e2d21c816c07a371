/* The interfaces a TCPX plugin expects from a devmem-TCP kernel and from
 * the receive-datapath manager (RxDM), as the GPUDirect-TCPX plugin uses
 * them.  These are the facts the simulator reproduces; docs/testing.md
 * describes them for users.
 *
 * Receive: recvmsg(fd, MSG_SOCK_DEVMEM) answers with SOL_SOCKET control
 * messages, one per fragment: SCM_DEVMEM_OFFSET when the bytes were written
 * into the bounce buffer (frag_offset is the byte offset inside it),
 * SCM_DEVMEM_HEADER when they were copied into the caller's iovec instead.
 * Each fragment carries a token; the application returns pages with
 * setsockopt(SOL_SOCKET, SO_DEVMEM_DONTNEED, {start, count}[]).
 *
 * Send: sendmsg(MSG_ZEROCOPY) with a SOL_SOCKET / SCM_DEVMEM_OFFSET control
 * message {int gpu_mem_fd, int offset}: the payload is read from the GPU
 * memory behind gpu_mem_fd (the iovec gives only the length).  gpu_mem_fd
 * comes from ioctl(dmabuf_fd, DMA_BUF_CREATE_PAGES) on a dma-buf of the
 * registered range.  Completions arrive on MSG_ERRQUEUE as zerocopy ranges.
 *
 * RxDM: unix stream sockets under a prefix directory; each request and
 * answer is a 2-byte big-endian length and a serialized UnixSocketProto;
 * a file descriptor travels alone, by SCM_RIGHTS with one dummy byte. */
#ifndef TCPXSIM_DEVMEM_H
#define TCPXSIM_DEVMEM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/ioctl.h>

#define DEVMEM_MSG_SOCK_DEVMEM 0x2000000
#define DEVMEM_SO_DONTNEED 97
#define DEVMEM_SCM_HEADER 98
#define DEVMEM_SCM_OFFSET 99
#define DEVMEM_PAGE 4096u

struct devmem_frag { /* the payload of one SCM_DEVMEM_* message */
	uint32_t frag_offset;
	uint32_t frag_size;
	uint32_t frag_token;
};

struct devmem_token_range { /* one element of SO_DEVMEM_DONTNEED's array */
	uint32_t start;
	uint32_t count;
};

struct devmem_create_pages { /* DMA_BUF_CREATE_PAGES's argument */
	uint64_t pci_bdf[3];
	int32_t dma_buf_fd;
	int32_t create_page_pool;
};
#define DEVMEM_DMA_BUF_CREATE_PAGES _IOW('b', 2, struct devmem_create_pages)

/* get_gpu_metadata_<pci>'s answer, as raw bytes. */
struct rxdm_gpu_metadata {
	int fd;
	size_t size;
	size_t align;
};

/* The RxDM's socket names, under the prefix directory. */
#define RXDM_GPU_FD "get_gpu_fd_"
#define RXDM_GPU_METADATA "get_gpu_metadata_"
#define RXDM_RULE_INSTALL "rx_rule_manager"
#define RXDM_RULE_UNINSTALL "rx_rule_uninstall"
#define RXDM_APP_REGISTRY "rxdm_application_registry"
#define RXDM_OK "Ok."

#endif
