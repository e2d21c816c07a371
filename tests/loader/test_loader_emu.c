/* The loader against the real bundled emulator plugin (TCPX_P2P_PLUGIN). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmocka.h>

#include "net/net.h"
#include "tcpx_p2p.h"

static const char *emu_path;

static void test_load_emulator(void **state)
{
	struct tp_net *net = NULL, *again = NULL;
	struct tp_net_props props;
	int ndev = 0, rc;

	rc = tp__net_load(emu_path, 0, &net);
	if (rc)
		fail_msg("load %s: %d %s", emu_path, rc, tcpx_p2p_last_error());
	assert_int_equal(net->abi, 7);
	assert_ptr_equal(net->ops, &tp__net_ops_v7);
	assert_string_equal(net->name, "TCPXEmu_v7");
	assert_int_equal(net->ops->devices(net, &ndev), 0);
	assert_true(ndev >= 1);
	assert_int_equal(net->ops->get_properties(net, 0, &props), 0);
	assert_true(props.ptr_support & NCCL_PTR_HOST);
	assert_int_equal(props.max_recvs, 1);

	/* The same file, loaded once; each caller its own view of it. */
	assert_int_equal(tp__net_load(emu_path, 0, &again), 0);
	assert_ptr_not_equal(again, net);
	assert_ptr_equal(again->table, net->table);
	assert_int_equal(again->max_requests, 16);
	tp__net_unload(again);
	tp__net_unload(net);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_load_emulator),
	};

	emu_path = getenv("TCPX_P2P_PLUGIN");
	if (!emu_path || access(emu_path, R_OK)) {
		fprintf(stderr, "SKIP: emulator plugin %s not built\n",
			emu_path ? emu_path : "(TCPX_P2P_PLUGIN unset)");
		return 77;
	}
	return cmocka_run_group_tests(tests, NULL, NULL) ? 1 : 0;
}
