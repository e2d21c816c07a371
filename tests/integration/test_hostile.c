/* Hostile peers and failed set-ups (docs/reliability.md): crafted handles
 * never reach the plugin, a connection to oneself is refused, and failed
 * connects leave no descriptors behind. */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <time.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/resource.h>
#include <sys/time.h>

#include <cmocka.h>

#include "abi/handle_layout.h"
#include "abi/nccl_net.h"
#include "pair.h"

/* sizeof(struct tp_blob_hdr), src/core/setup/listener.c: the handles follow it. */
#define BLOB_HDR 100 /* sizeof(struct tp_blob_hdr), src/core/setup/blob.h */
/* struct emu_handle, plugins/emu/emu.h: the listen address. */
#define EMU_ADDR_OFF 16

struct two {
	tcpx_p2p_session *s[2];
	tcpx_p2p_listener *l[2];
};

static void two_open(struct two *t)
{
	int i;

	for (i = 0; i < 2; i++) {
		assert_int_equal(tcpx_p2p_session_create(NULL, &t->s[i]), 0);
		assert_int_equal(tcpx_p2p_listen(t->s[i], &t->l[i]), 0);
	}
}

static void two_close(struct two *t)
{
	int i;

	for (i = 0; i < 2; i++) {
		if (t->l[i])
			assert_int_equal(tcpx_p2p_listener_destroy(t->l[i]), 0);
		assert_int_equal(tcpx_p2p_session_destroy(t->s[i]), 0);
	}
}

static unsigned char *blob_copy(tcpx_p2p_listener *l, size_t *len)
{
	const void *blob;
	unsigned char *copy;

	assert_int_equal(tcpx_p2p_listener_blob(l, &blob, len), 0);
	copy = malloc(*len);
	assert_non_null(copy);
	memcpy(copy, blob, *len);
	return copy;
}

/* The HELLO of issue #8: an emulator handle whose connect progress names
 * 0x4141414141414141.  Refused before the plugin sees it (and the emulator
 * would refuse it too: emu_contract's test_forged_handle). */
static void test_crafted_handle(void **state)
{
	const uint64_t wild = 0x4141414141414141ull;
	const uint32_t stage = 1;
	struct two t;
	tcpx_p2p_conn *c = NULL;
	unsigned char *bad;
	size_t len;

	two_open(&t);
	bad = blob_copy(t.l[1], &len);
	memcpy(bad + BLOB_HDR + TP_EMU_HANDLE_STAGE_OFF, &stage, sizeof(stage));
	memcpy(bad + BLOB_HDR + TP_EMU_HANDLE_PROGRESS_OFF + 8, &wild, sizeof(wild));
	assert_int_equal(tcpx_p2p_connect(t.l[0], bad, len, 1000, &c), TCPX_P2P_EPROTO);
	assert_null(c);
	assert_non_null(strstr(tcpx_p2p_last_error(), "in-progress connect state"));
	free(bad);
	two_close(&t);
}

static void test_connect_to_self(void **state)
{
	struct two t;
	tcpx_p2p_conn *c = NULL;
	unsigned char *own;
	size_t len;

	two_open(&t);
	own = blob_copy(t.l[0], &len);
	assert_int_equal(tcpx_p2p_connect(t.l[0], own, len, 1000, &c), TCPX_P2P_EPROTO);
	assert_non_null(strstr(tcpx_p2p_last_error(), "oneself"));
	assert_null(c);
	free(own);
	two_close(&t);
}

/* A peer's plugin name reaches the error detail as printable ASCII. */
static void test_peer_string_sanitised(void **state)
{
	const char evil[] = "\x1b[2J\nWARN forged line";
	struct two t;
	tcpx_p2p_conn *c = NULL;
	unsigned char *bad;
	size_t len;

	two_open(&t);
	bad = blob_copy(t.l[1], &len);
	memset(bad + 16, 0, 32);
	memcpy(bad + 16, evil, sizeof(evil) - 1); /* struct tp_blob_hdr plugin */
	assert_int_equal(tcpx_p2p_connect(t.l[0], bad, len, 1000, &c), TCPX_P2P_EPROTO);
	assert_non_null(strstr(tcpx_p2p_last_error(), "\"?[2J?WARN forged line\""));
	assert_null(strchr(tcpx_p2p_last_error(), '\x1b'));
	assert_null(strchr(tcpx_p2p_last_error(), '\n'));
	free(bad);
	two_close(&t);
}

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	assert_non_null(d);
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n - 1; /* the directory's own */
}

/* A listening socket whose accept queue is full: connects to it stay in
 * SYN_SENT, so the plugin's connects stay pending until we give up. */
static void blackhole(int *lfd, int *filler, uint16_t *port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	*lfd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(*lfd >= 0);
	assert_int_equal(bind(*lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(*lfd, 0), 0);
	assert_int_equal(getsockname(*lfd, (struct sockaddr *)&sa, &sl), 0);
	*port = sa.sin_port;
	*filler = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(*filler >= 0);
	assert_int_equal(connect(*filler, (struct sockaddr *)&sa, sizeof(sa)), 0);
	usleep(50 * 1000);
}

/* Connects that time out with plugin connects pending, again and again:
 * the library closes what it holds, the emulator releases the abandoned
 * connects (TCPX_EMU_CONNECT_ABANDON_MS = 300 here, not 30 s) at its next listen,
 * and the process ends with the descriptors it started with. */
static void test_failed_connects_leak_nothing(void **state)
{
	int i, ch, lfd, filler, before, during;
	tcpx_p2p_session *s[2];
	tcpx_p2p_listener *l[2];
	tcpx_p2p_conn *c = NULL;
	unsigned char *blob;
	uint16_t port;
	size_t len;

	/* The emulator reads it for every new listen and connect. */
	setenv("TCPX_EMU_CONNECT_ABANDON_MS", "300", 1);
	for (i = 0; i < 2; i++)
		assert_int_equal(tcpx_p2p_session_create(NULL, &s[i]), 0);
	blackhole(&lfd, &filler, &port);
	before = count_fds();
	for (i = 0; i < 10; i++) {
		assert_int_equal(tcpx_p2p_listen(s[0], &l[0]), 0);
		assert_int_equal(tcpx_p2p_listen(s[1], &l[1]), 0);
		blob = blob_copy(l[1], &len);
		for (ch = 0; BLOB_HDR + (size_t)(ch + 1) * NCCL_NET_HANDLE_MAXSIZE <= len; ch++)
			memcpy(blob + BLOB_HDR + (size_t)ch * NCCL_NET_HANDLE_MAXSIZE +
				       EMU_ADDR_OFF + 2,
			       &port, sizeof(port));
		assert_int_equal(tcpx_p2p_connect(l[0], blob, len, 100, &c), TCPX_P2P_ETIMEDOUT);
		assert_null(c);
		free(blob);
		assert_int_equal(tcpx_p2p_listener_destroy(l[0]), 0);
		assert_int_equal(tcpx_p2p_listener_destroy(l[1]), 0);
	}
	during = count_fds();
	/* The pending connects hold their sockets until they are abandoned. */
	assert_true(during > before);
	usleep(400 * 1000);
	assert_int_equal(tcpx_p2p_listen(s[0], &l[0]), 0);
	assert_int_equal(tcpx_p2p_listener_destroy(l[0]), 0);
	assert_int_equal(count_fds(), before);
	close(filler);
	close(lfd);
	for (i = 0; i < 2; i++)
		assert_int_equal(tcpx_p2p_session_destroy(s[i]), 0);
}

static int64_t ms_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int dial_raw(uint16_t port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

struct dialer {
	tcpx_p2p_session *s;
	uint16_t port;
	tcpx_p2p_conn *c;
	int rc;
};

static void *dial_thread(void *arg)
{
	struct dialer *d = arg;

	d->rc = tcpx_p2p_dial(d->s, "127.0.0.1", d->port, TP_TEST_TIMEOUT_MS, &d->c);
	return NULL;
}

/* 200 connections that never say a word, then a real peer: it is served
 * while the silent ones still wait, not after they time out.  Their
 * handshake deadline is a day, so a server that took them in turn would
 * never reach the real peer; and the newest of them is still open once it
 * has been served (the server keeps the newest 64 waiting, dropping the
 * oldest). */
static void test_silent_sockets_block_nobody(void **state)
{
	enum { NSILENT = 200 };
	tcpx_p2p_session *s[2];
	tcpx_p2p_server *srv;
	tcpx_p2p_conn *c = NULL;
	tcpx_p2p_config cfg;
	struct dialer d = { 0 };
	int silent[NSILENT], i;
	pthread_t th;
	char byte;

	assert_int_equal(tcpx_p2p_config_init(&cfg), 0);
	cfg.handshake_ms = 86400000;
	assert_int_equal(tcpx_p2p_session_create(&cfg, &s[0]), 0);
	assert_int_equal(tcpx_p2p_session_create(NULL, &s[1]), 0);
	assert_int_equal(tcpx_p2p_server_create(s[0], "127.0.0.1", 0, &srv), 0);
	assert_int_equal(tcpx_p2p_server_port(srv, &d.port), 0);
	for (i = 0; i < NSILENT; i++)
		silent[i] = dial_raw(d.port);
	d.s = s[1];
	assert_int_equal(pthread_create(&th, NULL, dial_thread, &d), 0);
	assert_int_equal(tcpx_p2p_server_accept(srv, TP_TEST_TIMEOUT_MS, &c), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(d.rc, 0);
	assert_int_equal(recv(silent[NSILENT - 1], &byte, 1, MSG_DONTWAIT), -1);
	assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
	assert_int_equal(tcpx_p2p_conn_destroy(c), 0);
	assert_int_equal(tcpx_p2p_conn_destroy(d.c), 0);
	for (i = 0; i < NSILENT; i++)
		close(silent[i]);
	assert_int_equal(tcpx_p2p_server_destroy(srv), 0);
	for (i = 0; i < 2; i++)
		assert_int_equal(tcpx_p2p_session_destroy(s[i]), 0);
}

struct accepter {
	tcpx_p2p_server *srv;
	tcpx_p2p_conn *c;
	int rc;
};

static void *accept_thread(void *arg)
{
	struct accepter *a = arg;

	a->rc = tcpx_p2p_server_accept(a->srv, TP_TEST_TIMEOUT_MS, &a->c);
	return NULL;
}

/* Two threads accepting on one server while two peers dial it. */
static void test_concurrent_accept(void **state)
{
	tcpx_p2p_session *s[2];
	tcpx_p2p_server *srv;
	struct accepter a[2] = { { 0 } };
	struct dialer d[2] = { { 0 } };
	pthread_t ta[2], td[2];
	uint16_t port;
	int i;

	for (i = 0; i < 2; i++)
		assert_int_equal(tcpx_p2p_session_create(NULL, &s[i]), 0);
	assert_int_equal(tcpx_p2p_server_create(s[0], "127.0.0.1", 0, &srv), 0);
	assert_int_equal(tcpx_p2p_server_port(srv, &port), 0);
	for (i = 0; i < 2; i++) {
		a[i].srv = srv;
		d[i].s = s[1];
		d[i].port = port;
		assert_int_equal(pthread_create(&ta[i], NULL, accept_thread, &a[i]), 0);
		assert_int_equal(pthread_create(&td[i], NULL, dial_thread, &d[i]), 0);
	}
	for (i = 0; i < 2; i++) {
		assert_int_equal(pthread_join(ta[i], NULL), 0);
		assert_int_equal(pthread_join(td[i], NULL), 0);
	}
	for (i = 0; i < 2; i++) {
		assert_int_equal(a[i].rc, 0);
		assert_int_equal(d[i].rc, 0);
		assert_int_equal(tcpx_p2p_conn_destroy(a[i].c), 0);
		assert_int_equal(tcpx_p2p_conn_destroy(d[i].c), 0);
	}
	assert_int_equal(tcpx_p2p_server_destroy(srv), 0);
	for (i = 0; i < 2; i++)
		assert_int_equal(tcpx_p2p_session_destroy(s[i]), 0);
}

/* TCPX_P2P_HANDSHAKE_MS: a silent connection is dropped after it, while
 * server_accept keeps waiting for its own, longer deadline. */
static void test_handshake_deadline(void **state)
{
	struct timeval tv = { .tv_sec = 5 };
	tcpx_p2p_session *s;
	tcpx_p2p_server *srv;
	tcpx_p2p_conn *c = NULL;
	tcpx_p2p_config cfg;
	uint16_t port;
	char byte;
	int fd;
	int64_t t0;

	assert_int_equal(tcpx_p2p_config_init(&cfg), 0);
	cfg.handshake_ms = 200;
	assert_int_equal(tcpx_p2p_session_create(&cfg, &s), 0);
	assert_int_equal(tcpx_p2p_server_create(s, "127.0.0.1", 0, &srv), 0);
	assert_int_equal(tcpx_p2p_server_port(srv, &port), 0);
	fd = dial_raw(port);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	t0 = ms_now();
	assert_int_equal(tcpx_p2p_server_accept(srv, 1000, &c), TCPX_P2P_ETIMEDOUT);
	assert_true(ms_now() - t0 >= 1000);
	assert_null(c);
	assert_non_null(strstr(tcpx_p2p_last_error(), "1 silent connection(s) dropped"));
	assert_int_equal(recv(fd, &byte, 1, 0), 0); /* closed by the server */
	close(fd);
	assert_int_equal(tcpx_p2p_server_destroy(srv), 0);
	assert_int_equal(tcpx_p2p_session_destroy(s), 0);
}

/*
 * Two peers dial one server that accepts with a single thread, and each
 * handshake's set-up takes longer than TCPX_P2P_HANDSHAKE_MS (the accept
 * waits 600 ms as flow steering would, the handshake limit is 200 ms): the
 * second peer, which sent its frames at once, waits its turn and is served,
 * not dropped as silent.
 */
static void test_spoke_in_time_waits_its_turn(void **state)
{
	tcpx_p2p_session *s[2];
	tcpx_p2p_server *srv;
	tcpx_p2p_config cfg;
	struct dialer d[2] = { { 0 } };
	tcpx_p2p_conn *c[2] = { NULL, NULL };
	pthread_t td[2];
	uint16_t port;
	int i;

	setenv("TCPX_EMU_ACCEPT_WAIT_US", "600000", 1);
	assert_int_equal(tcpx_p2p_config_init(&cfg), 0);
	cfg.handshake_ms = 200;
	assert_int_equal(tcpx_p2p_session_create(&cfg, &s[0]), 0);
	assert_int_equal(tcpx_p2p_session_create(NULL, &s[1]), 0);
	assert_int_equal(tcpx_p2p_server_create(s[0], "127.0.0.1", 0, &srv), 0);
	assert_int_equal(tcpx_p2p_server_port(srv, &port), 0);
	for (i = 0; i < 2; i++) {
		d[i].s = s[1];
		d[i].port = port;
		assert_int_equal(pthread_create(&td[i], NULL, dial_thread, &d[i]), 0);
	}
	for (i = 0; i < 2; i++)
		assert_int_equal(tcpx_p2p_server_accept(srv, TP_TEST_TIMEOUT_MS, &c[i]), 0);
	for (i = 0; i < 2; i++) {
		assert_int_equal(pthread_join(td[i], NULL), 0);
		assert_int_equal(d[i].rc, 0);
		assert_int_equal(tcpx_p2p_conn_destroy(c[i]), 0);
		assert_int_equal(tcpx_p2p_conn_destroy(d[i].c), 0);
	}
	unsetenv("TCPX_EMU_ACCEPT_WAIT_US");
	assert_int_equal(tcpx_p2p_server_destroy(srv), 0);
	for (i = 0; i < 2; i++)
		assert_int_equal(tcpx_p2p_session_destroy(s[i]), 0);
}

/* A send longer than its receive (the matching rule of docs/api.md broken):
 * the receiver sees the sender's announced total before posting anything,
 * so both sides fail with EPROTO, nothing lands in the receive buffer and
 * the connection goes on. */
static void test_length_mismatch(void **state)
{
	const size_t n = 1 << 20;
	unsigned char *a = malloc(n), *b = malloc(n);
	tcpx_p2p_mr *ma, *mb;
	tcpx_p2p_xfer *x[2];
	struct tp_pair p;
	int rs = TCPX_P2P_ETIMEDOUT, rr = TCPX_P2P_ETIMEDOUT;

	assert_non_null(a);
	assert_non_null(b);
	memset(b, 0x77, n);
	tp_fill(a, n, 9);
	assert_int_equal(tp_pair_open(&p, NULL, 0), 0);
	assert_int_equal(tcpx_p2p_mr_register(p.s[0], a, n, TCPX_P2P_MEM_HOST, &ma), 0);
	assert_int_equal(tcpx_p2p_mr_register(p.s[1], b, n, TCPX_P2P_MEM_HOST, &mb), 0);
	assert_int_equal(tcpx_p2p_send(p.c[0], ma, 0, 300000, &x[0]), 0);
	assert_int_equal(tcpx_p2p_recv(p.c[1], mb, 0, 200000, &x[1]), 0);
	/* Drive both sessions until both sides failed, naming the totals (the
	 * receiver fails first, then drains the 300000 bytes it discards). */
	while (rs == TCPX_P2P_ETIMEDOUT || rr == TCPX_P2P_ETIMEDOUT) {
		assert_int_equal(tcpx_p2p_session_progress(p.s[0]), 0);
		assert_int_equal(tcpx_p2p_session_progress(p.s[1]), 0);
		if (rs == TCPX_P2P_ETIMEDOUT)
			rs = tcpx_p2p_wait(x[0], 0);
		if (rr == TCPX_P2P_ETIMEDOUT)
			rr = tcpx_p2p_wait(x[1], 0);
	}
	assert_int_equal(rs, TCPX_P2P_EPROTO);
	assert_int_equal(rr, TCPX_P2P_EPROTO);
	assert_non_null(strstr(tcpx_p2p_last_error(), "totals must match"));
	for (size_t i = 0; i < n; i++) /* the receiver's memory untouched */
		if (b[i] != 0x77)
			fail_msg("byte %zu of the receive buffer was written", i);
	assert_int_equal(tcpx_p2p_xfer_release(x[0]), 0);
	assert_int_equal(tcpx_p2p_xfer_release(x[1]), 0);
	/* The connection stays usable: the next pair matches and lands. */
	assert_int_equal(tcpx_p2p_recv(p.c[1], mb, 0, n, &x[1]), 0);
	assert_int_equal(tcpx_p2p_send(p.c[0], ma, 0, n, &x[0]), 0);
	assert_int_equal(tp_complete_all(x, 2), 0); /* and releases them */
	assert_int_equal(tp_check(b, n, 9), (size_t)-1);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(tcpx_p2p_conn_destroy(p.c[i]), 0);
		p.c[i] = NULL;
	}
	assert_int_equal(tcpx_p2p_mr_deregister(ma), 0);
	assert_int_equal(tcpx_p2p_mr_deregister(mb), 0);
	tp_pair_close(&p);
	free(a);
	free(b);
}

/* Out of descriptors: dial, listen and the rendezvous server fail with a
 * clear error (the server does not spin on a listening socket it cannot
 * accept from), and work again once descriptors are free. */
static void test_fd_exhaustion(void **state)
{
	static int dups[4096];
	struct rlimit old, low;
	tcpx_p2p_session *s;
	tcpx_p2p_server *srv;
	tcpx_p2p_listener *l = NULL;
	tcpx_p2p_conn *c = NULL;
	uint16_t port;
	int fd, n, nd = 0;

	assert_int_equal(tcpx_p2p_session_create(NULL, &s), 0);
	assert_int_equal(tcpx_p2p_server_create(s, "127.0.0.1", 0, &srv), 0);
	assert_int_equal(tcpx_p2p_server_port(srv, &port), 0);
	fd = dial_raw(port);
	n = count_fds();
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
	low = old;
	low.rlim_cur = (rlim_t)n + 3; /* the highest descriptor in use is below this */
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
	while (nd < 4096 && (dups[nd] = dup(0)) >= 0) /* every free descriptor */
		nd++;
	/* ENET, not ETIMEDOUT: it failed on the descriptor, not at its deadline. */
	assert_int_equal(tcpx_p2p_server_accept(srv, 2000, &c), TCPX_P2P_ENET);
	assert_non_null(strstr(tcpx_p2p_last_error(), "Too many open files"));
	assert_int_not_equal(tcpx_p2p_dial(s, "127.0.0.1", port, 500, &c), 0);
	assert_null(c);
	assert_int_not_equal(tcpx_p2p_listen(s, &l), 0);
	assert_null(l);
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
	while (nd)
		close(dups[--nd]);
	close(fd);
	assert_int_equal(tcpx_p2p_listen(s, &l), 0);
	assert_int_equal(tcpx_p2p_listener_destroy(l), 0);
	assert_int_equal(tcpx_p2p_server_destroy(srv), 0);
	assert_int_equal(tcpx_p2p_session_destroy(s), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_crafted_handle),
		cmocka_unit_test(test_connect_to_self),
		cmocka_unit_test(test_peer_string_sanitised),
		cmocka_unit_test(test_failed_connects_leak_nothing),
		cmocka_unit_test(test_silent_sockets_block_nobody),
		cmocka_unit_test(test_concurrent_accept),
		cmocka_unit_test(test_handshake_deadline),
		cmocka_unit_test(test_spoke_in_time_waits_its_turn),
		cmocka_unit_test(test_length_mismatch),
		cmocka_unit_test(test_fd_exhaustion),
	};

	return cmocka_run_group_tests(tests, NULL, NULL) ? 1 : 0;
}
