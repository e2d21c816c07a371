/* TCP helpers with deadlines (the rendezvous's frames over them:
 * core/setup/rdv_frame.c).  Sockets stay blocking for their users; each step here is non-blocking
 * (MSG_DONTWAIT, or O_NONBLOCK around connect) and waits in poll() for at
 * most what is left of a deadline computed once per call. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/error.h"
#include "util/log.h"
#include "util/sock.h"
#include "util/time.h"

#define TP_DIAL_BACKOFF_MIN_MS 10
#define TP_DIAL_BACKOFF_MAX_MS 500
_Static_assert(TP_SOCK_ADDR_LEN >= INET6_ADDRSTRLEN + 8, "room for [ip6]:port");

/* 0 when fd is ready for events, ETIMEDOUT, or ENET (errno kept). */
static int tp_wait_fd(int fd, short events, tp_deadline deadline)
{
	struct pollfd pfd = { .fd = fd, .events = events };
	int n;

	for (;;) {
		n = poll(&pfd, 1, tp__deadline_left_ms(deadline));
		if (n > 0)
			return 0;
		if (n == 0)
			return TCPX_P2P_ETIMEDOUT;
		if (errno != EINTR)
			return TCPX_P2P_ENET;
	}
}

static void tp_format_addr(const struct sockaddr *sa, char *buf, size_t len)
{
	char ip[INET6_ADDRSTRLEN] = "?";
	unsigned port = 0;

	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in4 = (const struct sockaddr_in *)sa;

		inet_ntop(AF_INET, &in4->sin_addr, ip, sizeof(ip));
		port = ntohs(in4->sin_port);
		snprintf(buf, len, "%s:%u", ip, port);
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;

		port = ntohs(in6->sin6_port);
		/* IPv4 peers of a dual-stack listener read better as IPv4. */
		if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
			inet_ntop(AF_INET, &in6->sin6_addr.s6_addr[12], ip, sizeof(ip));
			snprintf(buf, len, "%s:%u", ip, port);
		} else {
			inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof(ip));
			snprintf(buf, len, "[%s]:%u", ip, port);
		}
	} else if (sa->sa_family == AF_UNIX) {
		snprintf(buf, len, "a local socket");
	} else {
		snprintf(buf, len, "(address family %d)", sa->sa_family);
	}
}

void tp__sock_peer_name(int fd, char *buf, size_t len)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);

	if (getpeername(fd, (struct sockaddr *)&ss, &sl))
		snprintf(buf, len, "fd %d (peer unknown)", fd);
	else
		tp_format_addr((struct sockaddr *)&ss, buf, len);
}

static int tp_errno_code(int err)
{
	switch (err) {
	case ECONNRESET:
	case EPIPE:
	case ENOTCONN:
		return TCPX_P2P_ECLOSED;
	case ETIMEDOUT:
		return TCPX_P2P_ETIMEDOUT;
	default:
		return TCPX_P2P_ENET;
	}
}

static void tp_set_nodelay(int fd)
{
	int one = 1;

	/* Bootstrap frames are small and latency-bound; failure is harmless. */
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static int tp_set_nonblock(int fd, int on)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0)
		return -1;
	fl = on ? (fl | O_NONBLOCK) : (fl & ~O_NONBLOCK);
	return fcntl(fd, F_SETFL, fl);
}

static int tp_listen_one(const struct addrinfo *ai, int v6only, int *out_fd)
{
	int one = 1;
	int fd;

	fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
		    ai->ai_protocol);
	if (fd < 0)
		return -1;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)))
		goto close_fd;
	if (ai->ai_family == AF_INET6 &&
	    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof(v6only)))
		goto close_fd;
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, SOMAXCONN))
		goto close_fd;
	*out_fd = fd;
	return 0;

close_fd:
	{
		int err = errno;

		close(fd);
		errno = err;
	}
	return -1;
}

int tp__sock_listen(const char *addr, uint16_t port, int *fd, uint16_t *bound_port)
{
	/* For "any address" try a dual-stack IPv6 socket first, then IPv4 for
	 * hosts without IPv6. */
	static const int any_families[] = { AF_INET6, AF_INET };
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE | AI_NUMERICSERV };
	struct addrinfo *res, *ai;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char portstr[8];
	int err = 0, gai, lfd = -1;
	size_t f;

	if (!fd)
		return tp__error(TCPX_P2P_EINVAL, "listen: fd is NULL");
	snprintf(portstr, sizeof(portstr), "%u", port);

	for (f = 0; lfd < 0 && f < (addr ? 1 : 2); f++) {
		hints.ai_family = addr ? AF_UNSPEC : any_families[f];
		gai = getaddrinfo(addr, portstr, &hints, &res);
		if (gai) {
			if (addr)
				return tp__error(TCPX_P2P_EINVAL, "listen on %s:%u: %s", addr,
						 port, gai_strerror(gai));
			continue;
		}
		for (ai = res; ai && lfd < 0; ai = ai->ai_next)
			if (tp_listen_one(ai, addr != NULL, &lfd))
				err = errno;
		freeaddrinfo(res);
	}
	if (lfd < 0)
		return tp__error(err == EADDRNOTAVAIL ? TCPX_P2P_EINVAL : TCPX_P2P_ENET,
				 "listen on %s:%u: %s", addr ? addr : "*", port,
				 strerror(err ? err : EAFNOSUPPORT));

	if (getsockname(lfd, (struct sockaddr *)&ss, &sl)) {
		err = errno;
		close(lfd);
		return tp__error(TCPX_P2P_ENET, "listen on %s:%u: getsockname: %s",
				 addr ? addr : "*", port, strerror(err));
	}
	if (bound_port)
		*bound_port = ntohs(ss.ss_family == AF_INET6 ?
					    ((struct sockaddr_in6 *)&ss)->sin6_port :
					    ((struct sockaddr_in *)&ss)->sin_port);
	*fd = lfd;
	return 0;
}

int tp__sock_accept_nb(int lfd, int *fd, char *peer, size_t peer_len)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	int cfd, rc;

	if (!fd)
		return tp__error(TCPX_P2P_EINVAL, "accept: NULL fd");
	for (;;) {
		sl = sizeof(ss);
		cfd = accept4(lfd, (struct sockaddr *)&ss, &sl, SOCK_CLOEXEC);
		if (cfd >= 0)
			break;
		/* A peer that gave up between poll and accept is no error of ours. */
		if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return TCPX_P2P_EAGAIN;
		return tp__error(TCPX_P2P_ENET, "accept on fd %d: %s", lfd, strerror(errno));
	}
	/* The listening socket is non-blocking; its children must not be. */
	if (tp_set_nonblock(cfd, 0)) {
		rc = tp__error(TCPX_P2P_ENET, "accept: fcntl: %s", strerror(errno));
		close(cfd);
		return rc;
	}
	tp_set_nodelay(cfd);
	if (peer && peer_len)
		tp_format_addr((struct sockaddr *)&ss, peer, peer_len);
	*fd = cfd;
	return 0;
}

static int tp_retryable_connect_errno(int err)
{
	return err == ECONNREFUSED || err == ENETUNREACH || err == ETIMEDOUT ||
	       err == EHOSTUNREACH || err == EAGAIN;
}

/* One attempt on one address: 0 and *out_fd, or -1 with errno set. */
static int tp_connect_one(const struct addrinfo *ai, tp_deadline deadline, int *out_fd)
{
	socklen_t sl = sizeof(int);
	int fd, err = 0;

	fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
		    ai->ai_protocol);
	if (fd < 0)
		return -1;
	if (connect(fd, ai->ai_addr, ai->ai_addrlen)) {
		if (errno != EINPROGRESS && errno != EINTR) {
			err = errno;
			goto close_fd;
		}
		switch (tp_wait_fd(fd, POLLOUT, deadline)) {
		case 0:
			break;
		case TCPX_P2P_ETIMEDOUT:
			err = ETIMEDOUT;
			goto close_fd;
		default:
			err = errno;
			goto close_fd;
		}
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &sl))
			err = errno;
		if (err)
			goto close_fd;
	}
	if (tp_set_nonblock(fd, 0)) {
		err = errno;
		goto close_fd;
	}
	tp_set_nodelay(fd);
	*out_fd = fd;
	return 0;

close_fd:
	close(fd);
	errno = err;
	return -1;
}

int tp__sock_dial(const char *host, uint16_t port, int timeout_ms, int *fd)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_NUMERICSERV | AI_ADDRCONFIG };
	tp_deadline deadline = tp__deadline_ms(timeout_ms);
	int backoff = TP_DIAL_BACKOFF_MIN_MS;
	struct addrinfo *res, *ai;
	char portstr[8];
	int gai, err = 0, cfd = -1, rc = 0;
	unsigned tries = 0;

	if (!host || !*host || !port || !fd)
		return tp__error(TCPX_P2P_EINVAL, "dial: bad host \"%s\" or port %u",
				 host ? host : "(null)", port);
	snprintf(portstr, sizeof(portstr), "%u", port);
	gai = getaddrinfo(host, portstr, &hints, &res);
	if (gai == EAI_ADDRFAMILY || gai == EAI_NONAME) {
		/* AI_ADDRCONFIG hides ::1 on hosts whose only IPv6 is loopback. */
		hints.ai_flags &= ~AI_ADDRCONFIG;
		gai = getaddrinfo(host, portstr, &hints, &res);
	}
	if (gai)
		return tp__error(gai == EAI_AGAIN ? TCPX_P2P_ENET : TCPX_P2P_EINVAL,
				 "dial %s:%u: %s", host, port, gai_strerror(gai));

	for (;;) {
		int left, hard_err = 0, retry = 0;

		tries++;
		/* Try every address; one that may come up later keeps us going. */
		for (ai = res; ai && cfd < 0; ai = ai->ai_next) {
			if (tp_connect_one(ai, deadline, &cfd) == 0)
				break;
			if (tp_retryable_connect_errno(errno)) {
				err = errno;
				retry = 1;
			} else {
				hard_err = errno;
			}
		}
		if (cfd >= 0)
			break;
		if (!retry) {
			rc = tp__error(TCPX_P2P_ENET, "dial %s:%u: %s", host, port,
				       strerror(hard_err));
			break;
		}
		left = tp__deadline_left_ms(deadline);
		if (left == 0) {
			rc = tp__error(TCPX_P2P_ETIMEDOUT,
				       "dial %s:%u: no connection within %d ms "
				       "(%u tries, last: %s)",
				       host, port, timeout_ms, tries, strerror(err));
			break;
		}
		/* A peer that is not listening yet: wait and try again. */
		poll(NULL, 0, left >= 0 && left < backoff ? left : backoff);
		backoff = backoff * 2 > TP_DIAL_BACKOFF_MAX_MS ? TP_DIAL_BACKOFF_MAX_MS :
								 backoff * 2;
	}
	freeaddrinfo(res);
	if (rc)
		return rc;
	if (tries > 1)
		TP_DEBUG("sock", "dial %s:%u: connected after %u tries", host, port, tries);
	*fd = cfd;
	return 0;
}

/* Move all len bytes of buf to (send) or from the socket by the deadline;
 * the socket is nonblocking, so each call waits in poll() for more room
 * or more bytes. */
static int tp_move_until(int fd, char *buf, size_t len, tp_deadline deadline, bool send_dir)
{
	const char *what = send_dir ? "send to" : "recv from";
	char peer[TP_SOCK_ADDR_LEN];
	size_t done = 0;
	ssize_t n;
	int rc;

	while (done < len) {
		n = send_dir ? send(fd, buf + done, len - done, MSG_NOSIGNAL | MSG_DONTWAIT)
			     : recv(fd, buf + done, len - done, MSG_DONTWAIT);
		if (n > 0 || (n == 0 && send_dir)) {
			done += (size_t)n;
			continue;
		}
		if (n == 0) {
			tp__sock_peer_name(fd, peer, sizeof(peer));
			return tp__error(TCPX_P2P_ECLOSED,
					 "recv from %s: peer closed after %zu of %zu bytes", peer,
					 done, len);
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK) {
			int err = errno;

			tp__sock_peer_name(fd, peer, sizeof(peer));
			return tp__error(tp_errno_code(err), "%s %s after %zu of %zu bytes: %s",
					 what, peer, done, len, strerror(err));
		}
		rc = tp_wait_fd(fd, send_dir ? POLLOUT : POLLIN, deadline);
		if (rc) {
			int err = errno;

			tp__sock_peer_name(fd, peer, sizeof(peer));
			return tp__error(rc, "%s %s: %s after %zu of %zu bytes", what, peer,
					 rc == TCPX_P2P_ETIMEDOUT ? "timed out" : strerror(err),
					 done, len);
		}
	}
	return 0;
}

int tp__sock_send_by(int fd, const void *buf, size_t len, tp_deadline deadline)
{
	return tp_move_until(fd, (char *)buf, len, deadline, true);
}

int tp__sock_recv_by(int fd, void *buf, size_t len, tp_deadline deadline)
{
	return tp_move_until(fd, buf, len, deadline, false);
}

void tp__sock_close(int fd)
{
	/* Linux releases the descriptor even when close() reports EINTR, so
	 * retrying could close someone else's. */
	if (fd >= 0)
		close(fd);
}
