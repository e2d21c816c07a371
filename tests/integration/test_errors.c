/* Bad input and failures: a clear code, nothing lost, nothing hangs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pair.h"

static void test_bad_config(void **state)
{
	tcpx_p2p_session *s = NULL;
	tcpx_p2p_config cfg;

	tcpx_p2p_config_init(&cfg);
	cfg.num_channels = 0;
	assert_int_equal(tcpx_p2p_session_create(&cfg, &s), TCPX_P2P_EINVAL);
	assert_null(s);
	assert_non_null(strstr(tcpx_p2p_last_error(), "channels"));
	tcpx_p2p_config_init(&cfg);
	cfg.chunk_bytes = (4u << 20) + 1;
	assert_int_equal(tcpx_p2p_session_create(&cfg, &s), TCPX_P2P_EINVAL);
	tcpx_p2p_config_init(&cfg);
	cfg.gpu = 0;
	/* CI machines have no GPU: then the session refuses gpu 0 clearly. */
	if (tcpx_p2p_session_create(&cfg, &s) == 0)
		assert_int_equal(tcpx_p2p_session_destroy(s), 0);
	else
		assert_non_null(strstr(tcpx_p2p_last_error(), "gpu"));
	assert_int_equal(tcpx_p2p_session_create(NULL, NULL), TCPX_P2P_EINVAL);
}

static void test_missing_plugin(void **state)
{
	tcpx_p2p_session *s = NULL;
	tcpx_p2p_config cfg;

	tcpx_p2p_config_init(&cfg);
	cfg.plugin_path = "/nonexistent/libnccl-net-nothere.so";
	assert_int_equal(tcpx_p2p_session_create(&cfg, &s), TCPX_P2P_ENOPLUGIN);
	assert_null(s);
	assert_non_null(strstr(tcpx_p2p_last_error(), "/nonexistent/libnccl-net-nothere.so"));
}

struct mismatch {
	tcpx_p2p_session *s[2];
	tcpx_p2p_listener *l[2];
};

/* Blobs of peers configured differently are refused before any comm is
 * made; the detail says what differs. */
static void test_mismatched_peers(void **state)
{
	struct mismatch m;
	tcpx_p2p_config cfg[2];
	tcpx_p2p_conn *c = NULL;
	const void *blob;
	size_t len;
	unsigned char bad[8192];
	int i;

	for (i = 0; i < 2; i++) {
		tcpx_p2p_config_init(&cfg[i]);
		cfg[i].num_channels = i + 1;
		assert_int_equal(tcpx_p2p_session_create(&cfg[i], &m.s[i]), 0);
		assert_int_equal(tcpx_p2p_listen(m.s[i], &m.l[i]), 0);
	}
	assert_int_equal(tcpx_p2p_listener_blob(m.l[1], &blob, &len), 0);
	assert_int_equal(tcpx_p2p_connect(m.l[0], blob, len, 1000, &c), TCPX_P2P_EPROTO);
	assert_non_null(strstr(tcpx_p2p_last_error(), "channels"));
	assert_null(c);
	/* malformed: truncated, bad magic */
	assert_int_equal(tcpx_p2p_connect(m.l[0], blob, 10, 1000, &c), TCPX_P2P_EPROTO);
	assert_int_equal(tcpx_p2p_listener_blob(m.l[0], &blob, &len), 0);
	memcpy(bad, blob, len);
	bad[0] ^= 0xff;
	assert_int_equal(tcpx_p2p_connect(m.l[1], bad, len, 1000, &c), TCPX_P2P_EPROTO);
	assert_non_null(strstr(tcpx_p2p_last_error(), "magic"));
	for (i = 0; i < 2; i++) {
		assert_int_equal(tcpx_p2p_session_destroy(m.s[i]), TCPX_P2P_EBUSY);
		assert_int_equal(tcpx_p2p_listener_destroy(m.l[i]), 0);
		assert_int_equal(tcpx_p2p_session_destroy(m.s[i]), 0);
	}
}

struct dial_side {
	tcpx_p2p_session *s;
	uint16_t port;
	tcpx_p2p_conn *c;
	int rc;
	char why[1024];
};

static void *dial_main(void *arg)
{
	struct dial_side *d = arg;

	d->rc = tcpx_p2p_dial(d->s, "127.0.0.1", d->port, 10000, &d->c);
	snprintf(d->why, sizeof(d->why), "%s", tcpx_p2p_last_error());
	return NULL;
}

/* Over the rendezvous only the server sees the dialer's blob: it refuses
 * with EPROTO naming the setting and closes, and the dialer gets ECLOSED
 * whose detail names the settings that must match (docs/reliability.md). */
static void mismatch_over_rendezvous(const tcpx_p2p_config cfg[2], const char *setting)
{
	struct dial_side d = { 0 };
	tcpx_p2p_session *s;
	tcpx_p2p_server *srv;
	tcpx_p2p_conn *c = NULL;
	pthread_t th;
	char why[1024];
	int rc;

	assert_int_equal(tcpx_p2p_session_create(&cfg[0], &s), 0);
	assert_int_equal(tcpx_p2p_session_create(&cfg[1], &d.s), 0);
	assert_int_equal(tcpx_p2p_server_create(s, "127.0.0.1", 0, &srv), 0);
	assert_int_equal(tcpx_p2p_server_port(srv, &d.port), 0);
	assert_int_equal(pthread_create(&th, NULL, dial_main, &d), 0);
	rc = tcpx_p2p_server_accept(srv, 10000, &c);
	snprintf(why, sizeof(why), "%s", tcpx_p2p_last_error());
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(rc, TCPX_P2P_EPROTO);
	assert_non_null(strstr(why, setting));
	assert_null(c);
	assert_int_equal(d.rc, TCPX_P2P_ECLOSED);
	assert_non_null(strstr(d.why, setting));
	assert_non_null(strstr(d.why, "TCPX_P2P_AUTH_TOKEN")); /* neither side has one */
	assert_null(d.c);
	assert_int_equal(tcpx_p2p_server_destroy(srv), 0);
	assert_int_equal(tcpx_p2p_session_destroy(s), 0);
	assert_int_equal(tcpx_p2p_session_destroy(d.s), 0);
}

static void test_mismatch_over_rendezvous(void **state)
{
	tcpx_p2p_config cfg[2];
	int i;

	for (i = 0; i < 2; i++) {
		tcpx_p2p_config_init(&cfg[i]);
		cfg[i].num_channels = i + 1;
	}
	mismatch_over_rendezvous(cfg, "TCPX_P2P_NUM_CHANNELS");
	for (i = 0; i < 2; i++) {
		tcpx_p2p_config_init(&cfg[i]);
		cfg[i].chunk_bytes = (size_t)(i + 1) << 20;
	}
	mismatch_over_rendezvous(cfg, "TCPX_P2P_CHUNK_BYTES");
	for (i = 0; i < 2; i++) {
		tcpx_p2p_config_init(&cfg[i]);
		cfg[i].chunks_per_channel = 1 + 3 * i;
	}
	mismatch_over_rendezvous(cfg, "TCPX_P2P_CHUNKS_PER_CHANNEL");
}

static void test_bad_arguments_and_busy(void **state)
{
	struct tp_pair p;
	unsigned char *buf = malloc(1 << 20);
	tcpx_p2p_mr *mr, *mr1;
	tcpx_p2p_xfer *xs = NULL, *xr = NULL;
	int done = 1;

	assert_non_null(buf);
	assert_int_equal(tp_pair_open(&p, NULL, 0), 0);
	assert_int_equal(tcpx_p2p_mr_register(p.s[0], NULL, 10, TCPX_P2P_MEM_HOST, &mr),
			 TCPX_P2P_EINVAL);
	assert_int_equal(tcpx_p2p_mr_register(p.s[0], buf, 0, TCPX_P2P_MEM_HOST, &mr),
			 TCPX_P2P_EINVAL);
	assert_int_equal(tcpx_p2p_mr_register(p.s[0], buf, 10, 99, &mr), TCPX_P2P_EINVAL);
	assert_int_equal(tcpx_p2p_mr_register(p.s[0], buf, 1 << 20, TCPX_P2P_MEM_CUDA, &mr),
			 TCPX_P2P_EINVAL); /* host-only session */
	assert_int_equal(tcpx_p2p_mr_register_ex(p.s[0], buf, 10, TCPX_P2P_MEM_HOST,
						 &(tcpx_p2p_mr_params){ .struct_size = 4 }, &mr),
			 TCPX_P2P_EINVAL);
	assert_int_equal(tcpx_p2p_mr_register_ex(p.s[0], buf, 10, TCPX_P2P_MEM_HOST,
						 &(tcpx_p2p_mr_params){ sizeof(tcpx_p2p_mr_params),
									  1u << 7 },
						 &mr),
			 TCPX_P2P_EINVAL);
	assert_int_equal(tcpx_p2p_mr_register_ex(p.s[0], buf, 1 << 20, TCPX_P2P_MEM_HOST, NULL,
						 &mr),
			 0);
	/* Pinning is for a session's GPU: on a host-only one it is ignored. */
	assert_int_equal(tcpx_p2p_mr_register_ex(p.s[1], buf, 1 << 20, TCPX_P2P_MEM_HOST,
						 &(tcpx_p2p_mr_params){ sizeof(tcpx_p2p_mr_params),
									  TCPX_P2P_MR_PIN },
						 &mr1),
			 0);
	assert_int_equal(tcpx_p2p_send(p.c[0], mr, 1, 1 << 20, &xs), TCPX_P2P_EINVAL);
	assert_int_equal(tcpx_p2p_send(p.c[0], mr, (size_t)-1, 2, &xs), TCPX_P2P_EINVAL);
	assert_int_equal(tcpx_p2p_send(p.c[0], mr1, 0, 1, &xs), TCPX_P2P_EINVAL);
	assert_null(xs);

	/* A receive with no matching send yet: wait times out, nothing is
	 * lost, and the xfer, its region and the conn are busy. */
	tp_fill(buf, 1 << 19, 9);
	assert_int_equal(tcpx_p2p_recv(p.c[1], mr1, 1 << 19, 1 << 19, &xr), 0);
	assert_int_equal(tcpx_p2p_wait(xr, 50), TCPX_P2P_ETIMEDOUT);
	assert_int_equal(tcpx_p2p_xfer_release(xr), TCPX_P2P_EBUSY);
	assert_int_equal(tcpx_p2p_mr_deregister(mr1), TCPX_P2P_EBUSY);
	assert_int_equal(tcpx_p2p_test(xr, &done), 0);
	assert_int_equal(done, 0);
	/* The send arrives late, from the first half of the same buffer. */
	assert_int_equal(tcpx_p2p_send(p.c[0], mr, 0, 1 << 19, &xs), 0);
	/* Both sessions live in this one thread: drive both (the plugin moves
	 * a sender's bytes only while its side is progressed). */
	assert_int_equal(tp_complete_all((tcpx_p2p_xfer *[]){ xs, xr }, 2), 0);
	assert_int_equal(tp_check(buf + (1 << 19), 1 << 19, 9), (size_t)-1);
	assert_int_equal(tcpx_p2p_session_destroy(p.s[0]), TCPX_P2P_EBUSY);
	assert_int_equal(tcpx_p2p_mr_deregister(mr), 0);
	assert_int_equal(tcpx_p2p_mr_deregister(mr1), 0);
	tp_pair_close(&p);
	free(buf);
}

/* The peer goes away with a receive pending: the receive fails with an
 * error instead of hanging, and later calls report the same error. */
static void test_peer_gone(void **state)
{
	struct tp_pair p;
	unsigned char *buf = malloc(1 << 20);
	tcpx_p2p_mr *mr;
	tcpx_p2p_xfer *xr, *x2 = NULL;
	int rc;

	assert_non_null(buf);
	assert_int_equal(tp_pair_open(&p, NULL, 0), 0);
	assert_int_equal(tcpx_p2p_mr_register(p.s[0], buf, 1 << 20, TCPX_P2P_MEM_HOST, &mr), 0);
	assert_int_equal(tcpx_p2p_recv(p.c[0], mr, 0, 1 << 20, &xr), 0);
	assert_int_equal(tcpx_p2p_conn_destroy(p.c[1]), 0);
	p.c[1] = NULL;
	rc = tcpx_p2p_wait(xr, 20000);
	assert_true(rc != 0 && rc != TCPX_P2P_ETIMEDOUT);
	assert_int_equal(tcpx_p2p_recv(p.c[0], mr, 0, 1, &x2), rc);
	assert_null(x2);
	assert_int_equal(tcpx_p2p_progress(p.c[0]), rc);
	assert_int_equal(tcpx_p2p_xfer_release(xr), 0);
	/* The plugin may still write into the region until the comms close. */
	assert_int_equal(tcpx_p2p_mr_deregister(mr), TCPX_P2P_EBUSY);
	assert_int_equal(tcpx_p2p_conn_destroy(p.c[0]), 0);
	p.c[0] = NULL;
	assert_int_equal(tcpx_p2p_mr_deregister(mr), 0);
	tp_pair_close(&p);
	free(buf);
}

static void *peer_barrier(void *arg)
{
	return (void *)(intptr_t)tcpx_p2p_conn_barrier(arg, 10000);
}

/* A barrier that timed out (the peer was late) can be called again and
 * still pairs with the peer's; the count stays in step afterwards. */
static void test_barrier_retry(void **state)
{
	struct tp_pair p;
	pthread_t th;
	void *ret;
	int i;

	assert_int_equal(tp_pair_open(&p, NULL, 0), 0);
	assert_int_equal(tcpx_p2p_conn_barrier(p.c[0], 50), TCPX_P2P_ETIMEDOUT);
	assert_int_equal(tcpx_p2p_conn_barrier(p.c[0], 50), TCPX_P2P_ETIMEDOUT);
	for (i = 0; i < 3; i++) {
		assert_int_equal(pthread_create(&th, NULL, peer_barrier, p.c[1]), 0);
		assert_int_equal(tcpx_p2p_conn_barrier(p.c[0], 10000), 0);
		assert_int_equal(pthread_join(th, &ret), 0);
		assert_int_equal((intptr_t)ret, 0);
	}
	tp_pair_close(&p);
}

/* Transfers that completed are still the caller's after their conn is
 * destroyed: test, wait and release see a finished transfer, not the
 * freed conn (an ASan build proves it). */
static void test_release_after_destroy(void **state)
{
	const size_t n = 1 << 20;
	unsigned char *a = malloc(n), *b = malloc(n);
	tcpx_p2p_mr *ma, *mb;
	tcpx_p2p_xfer *x[2], *keep[2];
	struct tp_pair p;
	int done = 0;

	assert_non_null(a);
	assert_non_null(b);
	tp_fill(a, n, 3);
	assert_int_equal(tp_pair_open(&p, NULL, 0), 0);
	assert_int_equal(tcpx_p2p_mr_register(p.s[0], a, n, TCPX_P2P_MEM_HOST, &ma), 0);
	assert_int_equal(tcpx_p2p_mr_register(p.s[1], b, n, TCPX_P2P_MEM_HOST, &mb), 0);
	assert_int_equal(tcpx_p2p_recv(p.c[1], mb, 0, n, &x[1]), 0);
	assert_int_equal(tcpx_p2p_send(p.c[0], ma, 0, n, &x[0]), 0);
	keep[0] = x[0];
	keep[1] = x[1];
	for (int left = 2; left;) { /* complete both without releasing them */
		left = 0;
		for (int i = 0; i < 2; i++) {
			assert_int_equal(tcpx_p2p_test(keep[i], &done), 0);
			left += !done;
		}
	}
	assert_int_equal(tp_check(b, n, 3), (size_t)-1);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(tcpx_p2p_conn_destroy(p.c[i]), 0);
		p.c[i] = NULL;
	}
	for (int i = 0; i < 2; i++) {
		assert_int_equal(tcpx_p2p_test(keep[i], &done), 0);
		assert_int_equal(done, 1);
		assert_int_equal(tcpx_p2p_wait(keep[i], 0), 0);
		assert_int_equal(tcpx_p2p_xfer_release(keep[i]), 0);
	}
	assert_int_equal(tcpx_p2p_mr_deregister(ma), 0);
	assert_int_equal(tcpx_p2p_mr_deregister(mb), 0);
	tp_pair_close(&p);
	free(a);
	free(b);
}

/* Destroying a connection with transfers pending aborts them: they fail
 * with ECLOSED and can still be tested and released afterwards. */
static void test_destroy_aborts_pending(void **state)
{
	struct tp_pair p;
	unsigned char *buf = malloc(1 << 20);
	tcpx_p2p_mr *mr;
	tcpx_p2p_xfer *xr, *xs;
	int done = 0;

	assert_non_null(buf);
	assert_int_equal(tp_pair_open(&p, NULL, 0), 0);
	assert_int_equal(tcpx_p2p_mr_register(p.s[1], buf, 1 << 20, TCPX_P2P_MEM_HOST, &mr), 0);
	assert_int_equal(tcpx_p2p_recv(p.c[1], mr, 0, 1 << 20, &xr), 0);
	assert_int_equal(tcpx_p2p_recv(p.c[1], mr, 0, 1 << 19, &xs), 0);
	assert_int_equal(tcpx_p2p_xfer_release(xr), TCPX_P2P_EBUSY);
	assert_int_equal(tcpx_p2p_conn_destroy(p.c[1]), 0);
	p.c[1] = NULL;
	assert_int_equal(tcpx_p2p_test(xr, &done), TCPX_P2P_ECLOSED);
	assert_int_equal(tcpx_p2p_wait(xs, 1000), TCPX_P2P_ECLOSED);
	assert_int_equal(tcpx_p2p_xfer_release(xr), 0);
	assert_int_equal(tcpx_p2p_mr_deregister(mr), 0);
	assert_int_equal(tcpx_p2p_xfer_release(xs), 0);
	tp_pair_close(&p);
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bad_config),
		cmocka_unit_test(test_missing_plugin),
		cmocka_unit_test(test_mismatched_peers),
		cmocka_unit_test(test_mismatch_over_rendezvous),
		cmocka_unit_test(test_bad_arguments_and_busy),
		cmocka_unit_test(test_peer_gone),
		cmocka_unit_test(test_destroy_aborts_pending),
		cmocka_unit_test(test_release_after_destroy),
		cmocka_unit_test(test_barrier_retry),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
