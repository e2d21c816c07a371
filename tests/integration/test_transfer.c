/* End-to-end transfers over the emulator on loopback, host memory; every
 * byte is checked.  Channels, windows and emulator modes come from the
 * environment of each CTest registration (tests/integration/CMakeLists.txt). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pair.h"

static size_t g_max_size = 64u << 20;

struct fixture {
	struct tp_pair p;
	unsigned char *buf[2];
	size_t cap;
	tcpx_p2p_mr *mr[2];
};

static int open_with(void **state, const tcpx_p2p_config *cfg, int use_blobs, size_t cap)
{
	struct fixture *f = calloc(1, sizeof(*f));
	int i;

	if (!f)
		return -1;
	if (tp_pair_open(&f->p, cfg, use_blobs)) {
		free(f);
		return -1;
	}
	f->cap = cap;
	for (i = 0; i < 2; i++) {
		f->buf[i] = malloc(cap);
		if (!f->buf[i] ||
		    tcpx_p2p_mr_register(f->p.s[i], f->buf[i], cap, TCPX_P2P_MEM_HOST, &f->mr[i]))
			return -1;
	}
	*state = f;
	return 0;
}

static int setup(void **state)
{
	return open_with(state, NULL, 0, g_max_size + 8192);
}

static int setup_blobs(void **state)
{
	return open_with(state, NULL, 1, 16u << 20);
}

static int setup_window1(void **state)
{
	tcpx_p2p_config cfg;

	tcpx_p2p_config_init(&cfg);
	cfg.send_window = 1;
	cfg.recv_window = 1;
	return open_with(state, &cfg, 0, 16u << 20);
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	int i;

	for (i = 0; i < 2; i++) {
		if (f->mr[i])
			assert_int_equal(tcpx_p2p_mr_deregister(f->mr[i]), 0);
	}
	tp_pair_close(&f->p);
	for (i = 0; i < 2; i++)
		free(f->buf[i]);
	free(f);
	return 0;
}


/* Send len bytes from side `from` at soff to the other side at roff. */
static void transfer(struct fixture *f, int from, size_t soff, size_t roff, size_t len,
		     uint64_t seed)
{
	tcpx_p2p_xfer *x[2];
	int to = 1 - from;

	tp_fill(f->buf[from] + soff, len, seed);
	memset(f->buf[to], 0xee, roff + len + 64 <= f->cap ? roff + len + 64 : f->cap);
	assert_int_equal(tcpx_p2p_recv(f->p.c[to], f->mr[to], roff, len, &x[0]), 0);
	assert_int_equal(tcpx_p2p_send(f->p.c[from], f->mr[from], soff, len, &x[1]), 0);
	assert_int_equal(tp_complete_all(x, 2), 0);
	assert_int_equal(tp_check(f->buf[to] + roff, len, seed), (size_t)-1);
	if (roff)
		assert_int_equal(f->buf[to][roff - 1], 0xee);
	if (roff + len < f->cap)
		assert_int_equal(f->buf[to][roff + len], 0xee);
}

static void test_sizes(void **state)
{
	struct fixture *f = *state;
	tcpx_p2p_config cfg;
	size_t sizes[] = { 0, 1, 7, 4095, 4096, 4097, 0, 0, 0, 0, 8u << 20 | 5, 64u << 20,
			   256u << 20 };
	size_t i;

	tcpx_p2p_config_init(&cfg);
	sizes[6] = cfg.chunk_bytes - 1;
	sizes[7] = cfg.chunk_bytes;
	sizes[8] = cfg.chunk_bytes + 1;
	sizes[9] = 3 * cfg.chunk_bytes + 7;
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		if (sizes[i] > g_max_size)
			continue;
		transfer(f, (int)(i & 1), 0, 0, sizes[i], 100 + i);
	}
}

static void test_offsets(void **state)
{
	struct fixture *f = *state;

	transfer(f, 0, 13, 4099, (3u << 20) + 11, 7);
	transfer(f, 1, 4096, 1, 1000, 8);
}

/* Many transfers of mixed sizes posted before any completes. */
static void test_many_in_flight(void **state)
{
	struct fixture *f = *state;
	enum { N = 96 };
	tcpx_p2p_xfer *x[2 * N];
	size_t off[N + 1], len[N];
	unsigned r = 12345;
	int i;

	off[0] = 0;
	for (i = 0; i < N; i++) {
		r = r * 1103515245u + 12345u;
		len[i] = i % 7 == 0 ? 0 : (r >> 8) % (1u << 18);
		off[i + 1] = off[i] + len[i];
	}
	assert_true(off[N] <= f->cap);
	memset(f->buf[1], 0, off[N]);
	for (i = 0; i < N; i++) {
		tp_fill(f->buf[0] + off[i], len[i], 1000 + (uint64_t)i);
		assert_int_equal(tcpx_p2p_recv(f->p.c[1], f->mr[1], off[i], len[i], &x[i]), 0);
	}
	for (i = 0; i < N; i++)
		assert_int_equal(tcpx_p2p_send(f->p.c[0], f->mr[0], off[i], len[i], &x[N + i]), 0);
	assert_int_equal(tp_complete_all(x, 2 * N), 0);
	for (i = 0; i < N; i++)
		assert_int_equal(tp_check(f->buf[1] + off[i], len[i], 1000 + (uint64_t)i),
				 (size_t)-1);
}

/* Both directions at once, driven with test() from one thread. */
static void test_bidirectional(void **state)
{
	struct fixture *f = *state;
	size_t half = f->cap / 2 > (24u << 20) ? 24u << 20 : f->cap / 2 - 4096;
	tcpx_p2p_xfer *x[4];

	tp_fill(f->buf[0], half, 31);
	tp_fill(f->buf[1] + half, half, 32);
	assert_int_equal(tcpx_p2p_recv(f->p.c[1], f->mr[1], 0, half, &x[0]), 0);
	assert_int_equal(tcpx_p2p_recv(f->p.c[0], f->mr[0], half, half, &x[1]), 0);
	assert_int_equal(tcpx_p2p_send(f->p.c[0], f->mr[0], 0, half, &x[2]), 0);
	assert_int_equal(tcpx_p2p_send(f->p.c[1], f->mr[1], half, half, &x[3]), 0);
	assert_int_equal(tp_complete_all(x, 4), 0);
	assert_int_equal(tp_check(f->buf[1], half, 31), (size_t)-1);
	assert_int_equal(tp_check(f->buf[0] + half, half, 32), (size_t)-1);
}

static void small_transfers(struct fixture *f)
{
	transfer(f, 0, 0, 0, (5u << 20) + 3, 51);
	transfer(f, 1, 0, 0, 1, 52);
	transfer(f, 0, 0, 0, 0, 53);
}

static void test_blob_exchange(void **state)
{
	small_transfers(*state);
}

static void test_window_one(void **state)
{
	small_transfers(*state);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_sizes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_offsets, setup, teardown),
		cmocka_unit_test_setup_teardown(test_many_in_flight, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bidirectional, setup, teardown),
		cmocka_unit_test_setup_teardown(test_blob_exchange, setup_blobs, teardown),
		cmocka_unit_test_setup_teardown(test_window_one, setup_window1, teardown),
	};

	if (argc > 1)
		g_max_size = strtoull(argv[1], NULL, 0) << 20;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
