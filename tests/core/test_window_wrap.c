/* A long-lived connection wraps its 32-bit window counters: seed them just
 * below 2^32 and check that transfers still complete with every byte right.
 * Links the library's objects directly to reach the counters. */
#include <pthread.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/conn.h"
#include "core/pipeline/window.h"
#include "pair.h"

/* A multiple of 16, so that window slot k % 16 still names the meta-ring
 * slot of the plugin's own count (which starts at 0). */
#define TP_WRAP_START (UINT32_MAX - 31u)

/* Under the conn's lock: the keepalive thread's passes read the counters of
 * a live connection.  No chunk has moved yet, but a bounce comm may have
 * receives posted ahead (stream.c): every counter of a comm moves by the
 * same multiple of 16, so each request keeps its slot and a pass before or
 * after the seed sees a consistent window. */
static void seed(struct tcpx_p2p_conn *c)
{
	int i;

	pthread_mutex_lock(&c->lock);
	for (i = 0; i < 2 * c->nchan; i++) {
		struct tp_comm *cm = i < c->nchan ? &c->send[i] : &c->recv[i - c->nchan];

		assert_int_equal(cm->win.retired, 0);
		cm->win.posted += TP_WRAP_START;
		cm->win.tested += TP_WRAP_START;
		cm->win.unpacked += TP_WRAP_START;
		cm->win.retired += TP_WRAP_START;
		cm->issued += TP_WRAP_START;
		cm->bound += TP_WRAP_START;
	}
	pthread_mutex_unlock(&c->lock);
}

static void test_wrap(void **state)
{
	const size_t len = 40u << 20; /* 80 chunks of 512 KiB: past the wrap */
	tcpx_p2p_config cfg;
	struct tp_pair p;
	unsigned char *buf[2];
	tcpx_p2p_mr *mr[2];
	tcpx_p2p_xfer *x[2];
	bool wrapped;
	int i;

	/* 512 KiB chunks on 2 channels: 40 per comm per round, past the wrap */
	assert_int_equal(tcpx_p2p_config_init(&cfg), 0);
	cfg.chunk_bytes = 512u << 10;
	cfg.num_channels = 2;
	assert_int_equal(tp_pair_open(&p, &cfg, 0), 0);
	for (i = 0; i < 2; i++) {
		seed(p.c[i]);
		buf[i] = malloc(len);
		assert_non_null(buf[i]);
		assert_int_equal(tcpx_p2p_mr_register(p.s[i], buf[i], len, TCPX_P2P_MEM_HOST,
						      &mr[i]), 0);
	}
	for (int round = 0; round < 2; round++) {
		tp_fill(buf[0], len, 5 + (uint64_t)round);
		memset(buf[1], 0, len);
		assert_int_equal(tcpx_p2p_recv(p.c[1], mr[1], 0, len, &x[0]), 0);
		assert_int_equal(tcpx_p2p_send(p.c[0], mr[0], 0, len, &x[1]), 0);
		assert_int_equal(tp_complete_all(x, 2), 0);
		assert_int_equal(tp_check(buf[1], len, 5 + (uint64_t)round), (size_t)-1);
	}
	/* the counters really went past 2^32 (read under the lock, as seeded) */
	pthread_mutex_lock(&p.c[1]->lock);
	wrapped = p.c[1]->recv[0].win.retired < TP_WRAP_START;
	pthread_mutex_unlock(&p.c[1]->lock);
	assert_true(wrapped);
	for (i = 0; i < 2; i++) {
		assert_int_equal(tcpx_p2p_mr_deregister(mr[i]), 0);
		free(buf[i]);
	}
	tp_pair_close(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = { cmocka_unit_test(test_wrap) };

	return cmocka_run_group_tests(tests, NULL, NULL);
}
