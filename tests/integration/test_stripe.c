/* Channels striped over several plugin devices (TCPX_P2P_NICS), on the
 * emulator reporting four devices (TCPX_EMU_NDEV=4, set by the CTest
 * registration): the map session_query reports, and verified transfers
 * with channel i on device nic[i % nnics]. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pair.h"

static void transfer(struct tp_pair *p, size_t len, uint64_t seed)
{
	unsigned char *b[2] = { malloc(len), malloc(len) };
	tcpx_p2p_mr *mr[2];
	tcpx_p2p_xfer *x[2];
	int i;

	for (i = 0; i < 2; i++) {
		assert_non_null(b[i]);
		assert_int_equal(tcpx_p2p_mr_register(p->s[i], b[i], len, TCPX_P2P_MEM_HOST, &mr[i]),
				 0);
	}
	tp_fill(b[0], len, seed);
	memset(b[1], 0, len);
	assert_int_equal(tcpx_p2p_recv(p->c[1], mr[1], 0, len, &x[1]), 0);
	assert_int_equal(tcpx_p2p_send(p->c[0], mr[0], 0, len, &x[0]), 0);
	assert_int_equal(tp_complete_all(x, 2), 0);
	assert_int_equal(tp_check(b[1], len, seed), (size_t)-1);
	for (i = 0; i < 2; i++) {
		assert_int_equal(tcpx_p2p_mr_deregister(mr[i]), 0);
		free(b[i]);
	}
}

static void open_with(struct tp_pair *p, const char *nics, int channels)
{
	tcpx_p2p_config cfg;

	assert_int_equal(tcpx_p2p_config_init(&cfg), 0);
	cfg.nics = nics;
	cfg.num_channels = channels;
	assert_int_equal(tp_pair_open(p, &cfg, 1), 0);
}

static void query(tcpx_p2p_session *s, tcpx_p2p_session_info *info)
{
	memset(info, 0, sizeof(*info));
	info->struct_size = sizeof(*info);
	assert_int_equal(tcpx_p2p_session_query(s, info), 0);
}

static void test_all(void **state)
{
	tcpx_p2p_session_info info;
	struct tp_pair p;

	open_with(&p, "all", 8);
	query(p.s[0], &info);
	assert_int_equal(info.nnics, 4);
	for (int i = 0; i < 4; i++)
		assert_int_equal(info.nic[i], i);
	assert_int_equal(info.nic[4], -1);
	assert_string_equal(info.nic_name[0], "tcpxemu");
	assert_string_equal(info.nic_name[3], "tcpxemu3");
	assert_int_equal(info.net_dev, 0);
	transfer(&p, 24u << 20, 3);
	tp_pair_close(&p);
}

/* Names and indices, in the order given; fewer channels than devices. */
static void test_list(void **state)
{
	tcpx_p2p_session_info info;
	struct tp_pair p;

	open_with(&p, "tcpxemu3,1", 3);
	query(p.s[1], &info);
	assert_int_equal(info.nnics, 2);
	assert_int_equal(info.nic[0], 3);
	assert_int_equal(info.nic[1], 1);
	assert_int_equal(info.net_dev, 3);
	transfer(&p, (5u << 20) + 77, 4);
	tp_pair_close(&p);
}

/* Defaults: host-only sessions use device 0; a bad name is EINVAL. */
static void test_default_and_bad(void **state)
{
	tcpx_p2p_session_info info;
	tcpx_p2p_config cfg;
	tcpx_p2p_session *s;
	struct tp_pair p;

	open_with(&p, NULL, 2);
	query(p.s[0], &info);
	assert_int_equal(info.nnics, 1);
	assert_int_equal(info.nic[0], 0);
	tp_pair_close(&p);

	assert_int_equal(tcpx_p2p_config_init(&cfg), 0);
	cfg.nics = "tcpxemu9";
	assert_int_equal(tcpx_p2p_session_create(&cfg, &s), TCPX_P2P_EINVAL);
	assert_non_null(strstr(tcpx_p2p_last_error(), "tcpxemu3"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_all),
		cmocka_unit_test(test_list),
		cmocka_unit_test(test_default_and_bad),
	};

	return cmocka_run_group_tests_name("channels striped over devices", tests, NULL, NULL);
}
