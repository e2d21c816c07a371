/* The library's guards for what the real TCPX plugin does not forgive:
 * chunks that could need more than 2048 fragments per receive (TCPX exits
 * the process), a device handle without a bounce buffer, and accepts that
 * take as long as flow steering.  argv[1]
 * picks the group; the emulator mode comes from the registration's
 * environment (tests/integration/CMakeLists.txt). */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "accept_probe.h"
#include "pair.h"

static int session_with(size_t chunk, int mss)
{
	tcpx_p2p_config cfg;
	tcpx_p2p_session *s;
	int rc;

	assert_int_equal(tcpx_p2p_config_init(&cfg), 0);
	cfg.chunk_bytes = chunk;
	cfg.mss = mss;
	rc = tcpx_p2p_session_create(&cfg, &s);
	if (!rc)
		assert_int_equal(tcpx_p2p_session_destroy(s), 0);
	return rc;
}

/* Host bounce: the emulator reports UNPACK devices, as TCPX does. */
static void test_chunk_vs_fragments(void **state)
{
	assert_int_equal(session_with(4u << 20, 8192), 0);
	assert_int_equal(session_with(4u << 20, 7168), 0);
	assert_int_equal(session_with(4u << 20, 1448), TCPX_P2P_EINVAL);
	assert_non_null(strstr(tcpx_p2p_last_error(), "TCPX_P2P_CHUNK_BYTES"));
	assert_int_equal(session_with(3u << 20, 1448), TCPX_P2P_EINVAL);
	assert_int_equal(session_with(2u << 20, 1448), 0);
	assert_int_equal(session_with(1u << 20, 1448), 0);
}

/* Bounce off: the plugin writes the user's buffer; no fragment limit. */
static void test_chunk_without_bounce(void **state)
{
	assert_int_equal(session_with(4u << 20, 1448), 0);
}

/* The emulator at TCPX_EMU_MSS=1448 draws each comm's MSS from [1267,
 * 1448]: the library told the smallest (1267) refuses 2 MiB chunks and
 * moves 1 MiB ones. */
static void test_small_mss_transfer(void **state)
{
	tcpx_p2p_config cfg;
	struct tp_pair p;
	size_t len = 8u << 20;
	unsigned char *b[2] = { malloc(len), malloc(len) };
	tcpx_p2p_mr *mr[2];
	tcpx_p2p_xfer *x[2];
	int i;

	assert_int_equal(tcpx_p2p_config_init(&cfg), 0);
	cfg.chunk_bytes = 2u << 20;
	cfg.mss = 1267;
	assert_int_equal(tp_pair_open(&p, &cfg, 1), TCPX_P2P_EINVAL);
	cfg.chunk_bytes = 1u << 20;
	assert_int_equal(tp_pair_open(&p, &cfg, 1), 0);
	for (i = 0; i < 2; i++) {
		assert_non_null(b[i]);
		assert_int_equal(tcpx_p2p_mr_register(p.s[i], b[i], len, TCPX_P2P_MEM_HOST, &mr[i]),
				 0);
	}
	tp_fill(b[0], len, 77);
	memset(b[1], 0, len);
	assert_int_equal(tcpx_p2p_recv(p.c[1], mr[1], 0, len, &x[1]), 0);
	assert_int_equal(tcpx_p2p_send(p.c[0], mr[0], 0, len, &x[0]), 0);
	assert_int_equal(tp_complete_all(x, 2), 0);
	assert_int_equal(tp_check(b[1], len, 77), (size_t)-1);
	for (i = 0; i < 2; i++) {
		assert_int_equal(tcpx_p2p_mr_deregister(mr[i]), 0);
		free(b[i]);
	}
	tp_pair_close(&p);
}

/* The counters of the accept_probe plugin this group runs on (the
 * registration points TCPX_P2P_PLUGIN at it). */
static struct accept_probe_stats probe_read(void)
{
	struct accept_probe_stats (*rd)(void);
	struct accept_probe_stats st;
	void *dl = dlopen(ACCEPT_PROBE_PATH, RTLD_NOW);

	if (!dl)
		fail_msg("%s", dlerror());
	rd = (struct accept_probe_stats (*)(void))dlsym(dl, "accept_probe_read");
	assert_non_null(rd);
	st = rd();
	dlclose(dl);
	return st;
}

/*
 * TCPX's accept withholds each comm while it programs flow steering
 * (TCPX_EMU_ACCEPT_WAIT_US = 300 ms here): the set-up of 8 channels must
 * drive all accepts at once, so that the waits overlap (one wait in all
 * rather than one per channel, 2.4 s).  Through the rendezvous, as
 * tcpx_p2p_dial / server_accept.  The probe plugin counts the accepts in
 * flight when the first completes: at least the 8 of a side (both sides,
 * and each side's control comm, go through the probe), where one channel
 * after another would show one per side.  The emulator completes no accept on its first call, so a side
 * that polls all its channels in turn has every one in flight before any
 * finishes, however slow the machine.
 */
static void test_parallel_accepts(void **state)
{
	tcpx_p2p_config cfg;
	struct accept_probe_stats st;
	struct tp_pair p;

	assert_true(probe_read().emu_loaded);
	assert_int_equal(tcpx_p2p_config_init(&cfg), 0);
	cfg.num_channels = 8;
	assert_int_equal(tp_pair_open(&p, &cfg, 0), 0);
	st = probe_read();
	fprintf(stderr, "8-channel set-up: %d accepts in flight at the first completion, "
		"%d at most, %d completed\n", st.in_flight_at_first_done, st.max_in_flight,
		st.completed);
	assert_true(st.completed >= 2 * cfg.num_channels);
	assert_true(st.in_flight_at_first_done >= cfg.num_channels);
	tp_pair_close(&p);
}

/* TCPX can return a device handle without a bounce buffer: the
 * connection is refused with a clear error, nothing crashes. */
static void test_null_bounce(void **state)
{
	struct tp_pair p;

	assert_int_equal(tp_pair_open(&p, NULL, 1), TCPX_P2P_EPLUGIN);
}

int main(int argc, char **argv)
{
	const char *group = argc > 1 ? argv[1] : "bounce";
	const struct CMUnitTest bounce[] = {
		cmocka_unit_test(test_chunk_vs_fragments),
		cmocka_unit_test(test_small_mss_transfer),
	};
	const struct CMUnitTest nobounce[] = { cmocka_unit_test(test_chunk_without_bounce) };
	const struct CMUnitTest nullbounce[] = { cmocka_unit_test(test_null_bounce) };
	const struct CMUnitTest acceptwait[] = { cmocka_unit_test(test_parallel_accepts) };

	if (!strcmp(group, "bounce"))
		return cmocka_run_group_tests_name("guards (bounce)", bounce, NULL, NULL) ? 1 : 0;
	if (!strcmp(group, "nobounce"))
		return cmocka_run_group_tests_name("guards (no bounce)", nobounce, NULL, NULL) ? 1 : 0;
	if (!strcmp(group, "nullbounce"))
		return cmocka_run_group_tests_name("guards (null bounce)", nullbounce, NULL, NULL) ? 1
												: 0;
	if (!strcmp(group, "acceptwait"))
		return cmocka_run_group_tests_name("guards (accept wait)", acceptwait, NULL, NULL) ? 1
												: 0;
	fprintf(stderr, "unknown group %s\n", group);
	return 1;
}
