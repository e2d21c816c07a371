/* The calls a TCPX plugin makes of a devmem-TCP kernel, interposed: each
 * goes to the simulator's receive path (recv.c), send path (send.c) or
 * registrations (region.c) when it is a devmem call, and on to libc (or
 * CUDA) when it is not.  The table in docs/testing.md ("The TCPX
 * simulator") says what each answers. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "devmem.h"
#include "real.h"
#include "recv.h"
#include "region.h"
#include "send.h"
#include "sock.h"

int cuMemGetHandleForAddressRange(void *handle, unsigned long long dptr, size_t size, int type,
				  unsigned long long flags);

ssize_t recvmsg(int fd, struct msghdr *m, int flags)
{
	if (flags & MSG_ERRQUEUE)
		return sim_errqueue(fd, m, flags);
	if (flags & DEVMEM_MSG_SOCK_DEVMEM)
		return sim_devmem_recv(fd, m, flags);
	if (sim_plain_read_refused(fd))
		return -1;
	return REAL(recvmsg)(fd, m, flags);
}

ssize_t recv(int fd, void *buf, size_t len, int flags)
{
	if (sim_plain_read_refused(fd))
		return -1;
	return REAL(recv)(fd, buf, len, flags);
}

ssize_t sendmsg(int fd, const struct msghdr *m, int flags)
{
	const struct cmsghdr *c = sim_devmem_cmsg(m);
	if (c)
		return sim_devmem_send(fd, m, c, flags);
	if (!(flags & MSG_ZEROCOPY))
		return REAL(sendmsg)(fd, m, flags);
	return sim_zc_sent(fd, flags, REAL(sendmsg)(fd, m, flags & ~MSG_ZEROCOPY));
}

ssize_t send(int fd, const void *buf, size_t len, int flags)
{
	if (!(flags & MSG_ZEROCOPY))
		return REAL(send)(fd, buf, len, flags);
	return sim_zc_sent(fd, flags, REAL(send)(fd, buf, len, flags & ~MSG_ZEROCOPY));
}

int setsockopt(int fd, int level, int name, const void *val, socklen_t len)
{
	if (level == SOL_SOCKET && name == DEVMEM_SO_DONTNEED)
		return sim_dontneed(fd, val, len);
	int rc = REAL(setsockopt)(fd, level, name, val, len);
	if (rc == 0 && level == SOL_SOCKET && name == SO_ZEROCOPY && val && len >= sizeof(int))
		sim_zc_enable(fd, *(const int *)val != 0);
	return rc;
}

int ioctl(int fd, unsigned long req, ...)
{
	va_list ap;
	va_start(ap, req);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	if (req == DEVMEM_DMA_BUF_CREATE_PAGES) {
		int rc = sim_region_create_pages(fd);
		if (rc != -2)
			return rc;
	}
	return REAL(ioctl)(fd, req, arg);
}

int close(int fd)
{
	sim_sock_forget(fd);
	sim_region_forget(fd);
	return REAL(close)(fd);
}

/* A NIC without a PCI device (lo) still needs an address: the plugin takes
 * the last component of /sys/class/net/IF/device's real path. */
char *realpath(const char *path, char *resolved)
{
	char *r = REAL(realpath)(path, resolved);
	const char *pre = "/sys/class/net/", *suf = "/device";
	size_t n = path ? strlen(path) : 0;
	if (r || n <= strlen(pre) + strlen(suf) || strncmp(path, pre, strlen(pre)) ||
	    strcmp(path + n - strlen(suf), suf))
		return r;
	const char *fake = "/sys/devices/tcpxsim/0000:fe:00.0";
	if (resolved) {
		snprintf(resolved, PATH_MAX, "%s", fake);
		return resolved;
	}
	return strdup(fake);
}

/* cuMemGetHandleForAddressRange(DMA_BUF_FD): the sender's registration.
 * The "dma-buf" is an eventfd the simulator maps to the range. */
int cuMemGetHandleForAddressRange(void *handle, unsigned long long dptr, size_t size, int type,
				  unsigned long long flags)
{
	const int dma_buf_fd = 0x1; /* CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD */
	if (type != dma_buf_fd) {
		if (!REAL(mem_handle))
			return 801; /* CUDA_ERROR_NOT_SUPPORTED */
		return sim_real.mem_handle(handle, dptr, size, type, flags);
	}
	int fd = handle && size ? sim_region_dmabuf(dptr, size) : -1;
	if (handle)
		*(int *)handle = fd;
	return fd >= 0 ? 0 : 1; /* CUDA_ERROR_INVALID_VALUE */
}
