/* TCP helpers over loopback: listen/dial/accept, a 1 MiB round trip between
 * two threads, IPv6, dial retries and every deadline. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "sock_all.h"
#include "util/error.h"
#include "util/sock.h"

#define MIB (1u << 20)

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
	size_t i;

	for (i = 0; i < n; i++) {
		seed = seed * 1103515245u + 12345u;
		p[i] = (uint8_t)(seed >> 16);
	}
}

/* Accept one peer within timeout_ms: the library only ever accepts
 * without blocking (a pass polls its listeners), so the waiting is ours. */
static int accept_within(int lfd, int timeout_ms, int *fd, char *peer, size_t peer_len)
{
	struct pollfd pfd = { .fd = lfd, .events = POLLIN };
	int rc;

	while ((rc = tp__sock_accept_nb(lfd, fd, peer, peer_len)) == TCPX_P2P_EAGAIN)
		if (poll(&pfd, 1, timeout_ms) <= 0)
			return TCPX_P2P_ETIMEDOUT;
	return rc;
}

struct echo_server {
	int lfd;
	int rc;
	char peer[64];
	uint8_t *buf;
};

/* Accept one peer, read 1 MiB, send it back with every byte inverted. */
static void *echo_thread(void *p)
{
	struct echo_server *s = p;
	int fd = -1;
	size_t i;

	s->rc = accept_within(s->lfd, 5000, &fd, s->peer, sizeof(s->peer));
	if (s->rc)
		return NULL;
	s->rc = sock_recv_all(fd, s->buf, MIB, 5000);
	if (s->rc == 0) {
		for (i = 0; i < MIB; i++)
			s->buf[i] ^= 0xff;
		s->rc = sock_send_all(fd, s->buf, MIB, 5000);
	}
	tp__sock_close(fd);
	return NULL;
}

static void roundtrip(const char *listen_addr, const char *dial_addr)
{
	struct echo_server s = { .lfd = -1 };
	uint8_t *out = malloc(MIB), *back = malloc(MIB);
	pthread_t th;
	uint16_t port = 0;
	int fd = -1;
	size_t i;

	assert_non_null(out);
	assert_non_null(back);
	s.buf = malloc(MIB);
	assert_non_null(s.buf);
	fill(out, MIB, 42);

	assert_int_equal(tp__sock_listen(listen_addr, 0, &s.lfd, &port), 0);
	assert_true(port != 0);
	assert_int_equal(pthread_create(&th, NULL, echo_thread, &s), 0);
	if (tp__sock_dial(dial_addr, port, 5000, &fd))
		fail_msg("dial %s:%u: %s", dial_addr, port, tcpx_p2p_last_error());
	assert_int_equal(sock_send_all(fd, out, MIB, 5000), 0);
	assert_int_equal(sock_recv_all(fd, back, MIB, 5000), 0);
	pthread_join(th, NULL);
	assert_int_equal(s.rc, 0);
	for (i = 0; i < MIB; i++)
		if ((back[i] ^ out[i]) != 0xff)
			fail_msg("byte %zu: sent 0x%02x, got back 0x%02x", i, out[i], back[i]);
	/* The echo side closed: the next read sees an orderly EOF. */
	assert_int_equal(sock_recv_all(fd, back, 1, 2000), TCPX_P2P_ECLOSED);
	assert_non_null(strstr(tcpx_p2p_last_error(), "peer closed"));
	/* The accepting side names its peer; IPv4 stays IPv4 on a dual-stack listener. */
	if (!strcmp(dial_addr, "localhost"))
		assert_true(strchr(s.peer, ':') != NULL);
	else if (strchr(dial_addr, ':'))
		assert_true(strncmp(s.peer, "[::1]:", 6) == 0);
	else
		assert_true(strncmp(s.peer, "127.0.0.1:", 10) == 0);

	tp__sock_close(fd);
	tp__sock_close(s.lfd);
	free(s.buf);
	free(out);
	free(back);
}

static void test_roundtrip_ipv4(void **state)
{
	roundtrip("127.0.0.1", "127.0.0.1");
}

static void test_roundtrip_any(void **state)
{
	roundtrip(NULL, "127.0.0.1");
	roundtrip(NULL, "localhost");
}

static int have_ipv6_loopback(void)
{
	struct sockaddr_in6 a = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT };
	int fd = socket(AF_INET6, SOCK_STREAM, 0), ok;

	if (fd < 0)
		return 0;
	ok = bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
	close(fd);
	return ok;
}

static void test_roundtrip_ipv6(void **state)
{
	if (!have_ipv6_loopback())
		skip();
	roundtrip("::1", "::1");
}

/* A port nobody listens on (bound and closed again at once). */
static uint16_t closed_port(void)
{
	uint16_t port = 0;
	int lfd;

	assert_int_equal(tp__sock_listen("127.0.0.1", 0, &lfd, &port), 0);
	tp__sock_close(lfd);
	return port;
}

static void test_dial_closed_port_times_out(void **state)
{
	uint16_t port = closed_port();
	char want[64];
	double t0, dt;
	int fd = -1;

	t0 = now_s();
	assert_int_equal(tp__sock_dial("127.0.0.1", port, 400, &fd), TCPX_P2P_ETIMEDOUT);
	dt = now_s() - t0;
	assert_int_equal(fd, -1);
	assert_true(dt >= 0.39); /* not before its deadline */
	snprintf(want, sizeof(want), "dial 127.0.0.1:%u", port);
	assert_non_null(strstr(tcpx_p2p_last_error(), want));
	assert_non_null(strstr(tcpx_p2p_last_error(), "Connection refused"));
	/* 10+20+40+80+160 ms of backoff fit in 400 ms: several tries. */
	assert_null(strstr(tcpx_p2p_last_error(), "(1 tries"));
}

/* unit_sock links with -Wl,--wrap=connect: connects to watched_port are
 * counted, so a test can order itself after the library's dial attempts
 * instead of guessing how long they take. */
int __real_connect(int fd, const struct sockaddr *sa, socklen_t len);
int __wrap_connect(int fd, const struct sockaddr *sa, socklen_t len);

static uint16_t watched_port;
static int watched_connects;

int __wrap_connect(int fd, const struct sockaddr *sa, socklen_t len)
{
	uint16_t port = 0;

	if (sa->sa_family == AF_INET)
		port = ntohs(((const struct sockaddr_in *)sa)->sin_port);
	else if (sa->sa_family == AF_INET6)
		port = ntohs(((const struct sockaddr_in6 *)sa)->sin6_port);
	if (port && port == __atomic_load_n(&watched_port, __ATOMIC_ACQUIRE))
		__atomic_add_fetch(&watched_connects, 1, __ATOMIC_ACQ_REL);
	return __real_connect(fd, sa, len);
}

struct late_listener {
	uint16_t port;
	int rc;
};

/* Listens only once the dialer has begun its second try: its first has
 * then certainly met a closed port. */
static void *late_listen_thread(void *p)
{
	struct late_listener *l = p;
	int lfd = -1, fd = -1;
	uint8_t b = 0;

	while (__atomic_load_n(&watched_connects, __ATOMIC_ACQUIRE) < 2)
		usleep(1000);
	l->rc = tp__sock_listen("127.0.0.1", l->port, &lfd, NULL);
	if (l->rc)
		return NULL;
	l->rc = accept_within(lfd, 5000, &fd, NULL, 0);
	if (l->rc == 0)
		l->rc = sock_recv_all(fd, &b, 1, 5000);
	if (l->rc == 0 && b != 0xa5)
		l->rc = TCPX_P2P_EINTERNAL;
	tp__sock_close(fd);
	tp__sock_close(lfd);
	return NULL;
}

/* The dialer starts before the peer listens, retries, and gets through.
 * The dial's deadline is generous: the listener waits for the dialer's
 * second try, however long a loaded machine takes to get there. */
static void test_dial_retries_until_listening(void **state)
{
	struct late_listener l = { .port = closed_port() };
	uint8_t b = 0xa5;
	pthread_t th;
	int fd = -1;

	__atomic_store_n(&watched_connects, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&watched_port, l.port, __ATOMIC_RELEASE);
	assert_int_equal(pthread_create(&th, NULL, late_listen_thread, &l), 0);
	if (tp__sock_dial("127.0.0.1", l.port, 60000, &fd))
		fail_msg("dial: %s", tcpx_p2p_last_error());
	assert_true(__atomic_load_n(&watched_connects, __ATOMIC_ACQUIRE) >= 2);
	assert_int_equal(sock_send_all(fd, &b, 1, 1000), 0);
	pthread_join(th, NULL);
	__atomic_store_n(&watched_port, 0, __ATOMIC_RELEASE);
	assert_int_equal(l.rc, 0);
	tp__sock_close(fd);
}

/* No peer queued: EAGAIN at once (the listener never blocks a pass). */
static void test_accept_none_queued(void **state)
{
	uint16_t port;
	int lfd, fd = -1;

	assert_int_equal(tp__sock_listen("127.0.0.1", 0, &lfd, &port), 0);
	assert_int_equal(tp__sock_accept_nb(lfd, &fd, NULL, 0), TCPX_P2P_EAGAIN);
	assert_int_equal(fd, -1);
	tp__sock_close(lfd);
}

static void test_bad_args(void **state)
{
	uint16_t port;
	int fd = -1, lfd;

	assert_int_equal(tp__sock_dial(NULL, 80, 100, &fd), TCPX_P2P_EINVAL);
	assert_int_equal(tp__sock_dial("127.0.0.1", 0, 100, &fd), TCPX_P2P_EINVAL);
	assert_int_equal(tp__sock_dial("", 80, 100, &fd), TCPX_P2P_EINVAL);
	assert_int_equal(tp__sock_dial("127.0.0.1", 80, 100, NULL), TCPX_P2P_EINVAL);
	assert_int_equal(tp__sock_listen("127.0.0.1", 0, NULL, &port), TCPX_P2P_EINVAL);
	assert_int_equal(tp__sock_listen("999.1.1.1", 0, &lfd, &port), TCPX_P2P_EINVAL);
	assert_non_null(strstr(tcpx_p2p_last_error(), "999.1.1.1"));
	/* An address this host does not have. */
	assert_int_equal(tp__sock_listen("192.0.2.1", 0, &lfd, &port), TCPX_P2P_EINVAL);
	assert_int_equal(tp__sock_accept_nb(-1, &fd, NULL, 0), TCPX_P2P_ENET);
	assert_int_equal(tp__sock_accept_nb(-1, NULL, NULL, 0), TCPX_P2P_EINVAL);
	assert_int_equal(fd, -1);
}

static void test_listen_port_in_use(void **state)
{
	uint16_t port, port2;
	int lfd, lfd2 = -1;

	assert_int_equal(tp__sock_listen("127.0.0.1", 0, &lfd, &port), 0);
	assert_int_equal(tp__sock_listen("127.0.0.1", port, &lfd2, &port2), TCPX_P2P_ENET);
	assert_non_null(strstr(tcpx_p2p_last_error(), "Address already in use"));
	assert_int_equal(lfd2, -1);
	tp__sock_close(lfd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_roundtrip_ipv4),
		cmocka_unit_test(test_roundtrip_any),
		cmocka_unit_test(test_roundtrip_ipv6),
		cmocka_unit_test(test_dial_closed_port_times_out),
		cmocka_unit_test(test_dial_retries_until_listening),
		cmocka_unit_test(test_accept_none_queued),
		cmocka_unit_test(test_bad_args),
		cmocka_unit_test(test_listen_port_in_use),
	};

	return cmocka_run_group_tests(tests, NULL, NULL) ? 1 : 0;
}
