/* The whole library over the emulator driven through one NCCL net ABI
 * version (argv[1]: 5..12, or "all" for the build exporting every version,
 * where the newest must win).  TCPX_P2P_PLUGIN names the emulator build.
 * Many chunks are posted at once, so every comm's window fills: before v7
 * the emulator takes 8 requests per comm, as NCCL promised such plugins,
 * and a library posting more fails. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "integration/pair.h"

static int want_abi;

static void check_session(tcpx_p2p_session *s)
{
	tcpx_p2p_session_info info;
	char name[32];
	int window = want_abi < 7 ? 8 : 16;

	memset(&info, 0, sizeof(info));
	info.struct_size = sizeof(info);
	assert_int_equal(tcpx_p2p_session_query(s, &info), 0);
	snprintf(name, sizeof(name), "TCPXEmu_v%d", want_abi);
	assert_int_equal(info.plugin_abi, want_abi);
	assert_string_equal(info.plugin_name, name);
	assert_int_equal(info.plugin_fallback, 0);
	assert_string_equal(info.plugin_tried, "");
	assert_int_equal(info.send_window, window);
	assert_int_equal(info.recv_window, window);
}

/* Both directions at once, several transfers each way in flight. */
static void test_transfers(void **state)
{
	static const size_t lens[] = { 1, 4097, 1 << 20, 1 << 20, 3 << 20, 65536 };
	enum { N = sizeof(lens) / sizeof(lens[0]) };
	tcpx_p2p_xfer *x[4 * N];
	tcpx_p2p_mr *mr[2][2];
	char *buf[2][2];
	size_t total = 0, off;
	struct tp_pair p;
	int i, k, n = 0, rc;

	for (i = 0; i < N; i++)
		total += lens[i];
	rc = tp_pair_open(&p, NULL, 1);
	if (rc)
		fail_msg("pair: %d %s", rc, tcpx_p2p_last_error());
	for (i = 0; i < 2; i++)
		for (k = 0; k < 2; k++) {
			/* k = 0: what side i sends, k = 1: what it receives */
			buf[i][k] = malloc(total);
			assert_non_null(buf[i][k]);
			if (k == 0)
				tp_fill(buf[i][k], total, 100 + (uint64_t)i);
			else
				memset(buf[i][k], 0, total);
			assert_int_equal(tcpx_p2p_mr_register(p.s[i], buf[i][k], total,
							      TCPX_P2P_MEM_HOST, &mr[i][k]), 0);
		}
	for (off = 0, k = 0; k < N; off += lens[k], k++)
		for (i = 0; i < 2; i++) {
			assert_int_equal(tcpx_p2p_recv(p.c[i], mr[i][1], off, lens[k], &x[n++]), 0);
			assert_int_equal(tcpx_p2p_send(p.c[i], mr[i][0], off, lens[k], &x[n++]), 0);
		}
	rc = tp_complete_all(x, n);
	if (rc)
		fail_msg("transfers: %d %s", rc, tcpx_p2p_last_error());
	for (i = 0; i < 2; i++)
		assert_true(tp_check(buf[i][1], total, 100 + (uint64_t)(1 - i)) == (size_t)-1);
	check_session(p.s[0]);
	check_session(p.s[1]);
	for (i = 0; i < 2; i++)
		for (k = 0; k < 2; k++) {
			assert_int_equal(tcpx_p2p_mr_deregister(mr[i][k]), 0);
			free(buf[i][k]);
		}
	tp_pair_close(&p);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_transfers),
	};

	if (argc != 2) {
		fprintf(stderr, "usage: %s 5..12|all\n", argv[0]);
		return 1;
	}
	want_abi = strcmp(argv[1], "all") ? atoi(argv[1]) : 12;
	return cmocka_run_group_tests(tests, NULL, NULL) ? 1 : 0;
}
