/* Rules the library keeps for Google's GPUDirect-TCPX plugin, on a fake
 * plugin under TCPX's name: NCCL_DYNAMIC_CHUNK_SIZE must be set (unset, the
 * plugin sends nothing) and bounds chunk_bytes (TCPX hands back only the
 * last task's pages of a request whose tasks share a socket). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tcpx_p2p.h"

static char last_info[512];

static void sink(int level, const char *subsys, const char *msg, void *arg)
{
	if (strstr(msg, "chunk_bytes"))
		snprintf(last_info, sizeof(last_info), "%s", msg);
}

static int open_session(size_t chunk, tcpx_p2p_session **s)
{
	tcpx_p2p_config cfg;
	assert_int_equal(tcpx_p2p_config_init(&cfg), 0);
	cfg.plugin_path = FAKE_TCPX_PATH;
	cfg.gpu = -1;
	cfg.chunk_bytes = chunk;
	return tcpx_p2p_session_create(&cfg, s);
}

static size_t chunk_in_effect(tcpx_p2p_session *s)
{
	tcpx_p2p_session_info info = {.struct_size = sizeof(info)};
	assert_int_equal(tcpx_p2p_session_query(s, &info), 0);
	assert_string_equal(info.plugin_name, "GPUDirectTCPX_v7");
	return info.chunk_bytes;
}

static void test_dynamic_chunk_required(void **state)
{
	tcpx_p2p_session *s = NULL;
	unsetenv("NCCL_DYNAMIC_CHUNK_SIZE");
	assert_int_equal(open_session(2u << 20, &s), TCPX_P2P_EINVAL);
	assert_non_null(strstr(tcpx_p2p_last_error(), "NCCL_DYNAMIC_CHUNK_SIZE"));
	setenv("NCCL_DYNAMIC_CHUNK_SIZE", "0", 1);
	assert_int_equal(open_session(2u << 20, &s), TCPX_P2P_EINVAL);
	setenv("NCCL_DYNAMIC_CHUNK_SIZE", "512k", 1);
	assert_int_equal(open_session(2u << 20, &s), TCPX_P2P_EINVAL);
	assert_null(s);
}

static void test_chunk_capped(void **state)
{
	tcpx_p2p_session *s = NULL;
	setenv("NCCL_DYNAMIC_CHUNK_SIZE", "524288", 1);
	last_info[0] = '\0';
	assert_int_equal(tcpx_p2p_set_log(sink, NULL, TCPX_P2P_LOG_INFO), 0);
	assert_int_equal(open_session(2u << 20, &s), 0);
	assert_int_equal(chunk_in_effect(s), 524288);
	assert_non_null(strstr(last_info, "2097152 -> 524288"));
	tcpx_p2p_session_destroy(s);

	/* A task as large as the chunk: nothing to change. */
	setenv("NCCL_DYNAMIC_CHUNK_SIZE", "4194304", 1);
	assert_int_equal(open_session(2u << 20, &s), 0);
	assert_int_equal(chunk_in_effect(s), 2u << 20);
	tcpx_p2p_session_destroy(s);
	assert_int_equal(tcpx_p2p_set_log(NULL, NULL, TCPX_P2P_LOG_WARN), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dynamic_chunk_required),
		cmocka_unit_test(test_chunk_capped),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
