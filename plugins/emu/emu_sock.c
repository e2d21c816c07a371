/*
 * Socket helpers.  Helper threads use blocking I/O (close wakes them with
 * shutdown()), connect/accept progress uses non-blocking sockets.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <sys/socket.h>

#include "emu.h"

int tp__emu_sock_set_nonblock(int fd, int on)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0)
		return -1;
	fl = on ? (fl | O_NONBLOCK) : (fl & ~O_NONBLOCK);
	return fcntl(fd, F_SETFL, fl);
}

int tp__emu_sock_tune(int fd)
{
	int one = 1;

	/* Latency of small headers matters more than packet count here. */
	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)))
		return -1;
	/* A peer that vanished without a FIN still fails pending requests. */
	(void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
	return 0;
}

int tp__emu_send_full(int fd, const void *buf, size_t n)
{
	const char *p = buf;

	while (n) {
		ssize_t r = send(fd, p, n, MSG_NOSIGNAL);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

int tp__emu_recv_full(int fd, void *buf, size_t n)
{
	char *p = buf;

	while (n) {
		ssize_t r = recv(fd, p, n, MSG_WAITALL);

		if (r == 0) {
			errno = ECONNRESET;
			return -1;
		}
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

/* Scatter receive into bounce fragments; iov is consumed.  Past IOV_MAX
 * entries recvmsg fails, so longer lists go in pieces. */
int tp__emu_recv_iov(int fd, struct iovec *iov, int cnt)
{
	while (cnt) {
		struct msghdr msg = {
			.msg_iov = iov, .msg_iovlen = (size_t)(cnt < IOV_MAX ? cnt : IOV_MAX),
		};
		ssize_t r = recvmsg(fd, &msg, MSG_WAITALL);

		if (r == 0) {
			errno = ECONNRESET;
			return -1;
		}
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		while (cnt && (size_t)r >= iov->iov_len) {
			r -= (ssize_t)iov->iov_len;
			iov++;
			cnt--;
		}
		if (cnt) {
			iov->iov_base = (char *)iov->iov_base + r;
			iov->iov_len -= (size_t)r;
		}
	}
	return 0;
}

static int ifname_matches(const char *name, const char *list)
{
	char buf[256];
	char *save = NULL;

	snprintf(buf, sizeof(buf), "%s", list);
	for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (tok[0] == '=') {
			if (!strcmp(name, tok + 1))
				return 1;
		} else if (tok[0] != '^' && !strncmp(name, tok, strlen(tok))) {
			return 1;
		}
	}
	return 0;
}

/* TCPX_EMU_ADDR, else NCCL_SOCKET_IFNAME's first IPv4 address, else loopback. */
int tp__emu_addr_resolve(struct in_addr *addr)
{
	const char *explicit = getenv("TCPX_EMU_ADDR");
	const char *ifname = getenv("NCCL_SOCKET_IFNAME");
	struct ifaddrs *ifs, *it;
	int found = 0;

	if (explicit && *explicit) {
		if (inet_pton(AF_INET, explicit, addr) == 1)
			return 0;
		EMU_WARN("TCPX_EMU_ADDR=%s is not an IPv4 address", explicit);
		return -1;
	}
	if (!ifname || !*ifname) {
		addr->s_addr = htonl(INADDR_LOOPBACK);
		return 0;
	}
	if (getifaddrs(&ifs)) {
		EMU_WARN("getifaddrs failed: %s", strerror(errno));
		return -1;
	}
	for (it = ifs; it && !found; it = it->ifa_next) {
		if (!it->ifa_addr || it->ifa_addr->sa_family != AF_INET)
			continue;
		if (!ifname_matches(it->ifa_name, ifname))
			continue;
		*addr = ((struct sockaddr_in *)(void *)it->ifa_addr)->sin_addr;
		found = 1;
	}
	freeifaddrs(ifs);
	if (!found)
		EMU_WARN("no IPv4 address on an interface matching NCCL_SOCKET_IFNAME=%s", ifname);
	return found ? 0 : -1;
}
