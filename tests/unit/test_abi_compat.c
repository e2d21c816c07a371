/* A binary built against the 0.1 header keeps working with this library:
 * tcpx_p2p_config_init@TCPX_P2P_0.1 writes only the 0.1 struct (fields up
 * to plugin_path) and says so in struct_size, and session_create then
 * reads no further; the 0.2 entry point (binaries built against 0.2 to
 * 0.4) writes the struct up to the 0.5 fields, the 0.5 one up to
 * close_timeout_ms (0.6), the 0.6 one up to heartbeat_ms (0.7), the 0.7 one
 * up to chunks_per_channel (0.8), the 0.8 one up to redial_ms (0.13).  The old
 * entry points are
 * reached with dlvsym, as the dynamic linker would bind an old binary. */
#define _GNU_SOURCE /* dlvsym */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tcpx_p2p.h"

#define V01_SIZE offsetof(tcpx_p2p_config, progress_thread)
#define V02_SIZE offsetof(tcpx_p2p_config, peer_max_items)
#define V05_SIZE offsetof(tcpx_p2p_config, close_timeout_ms)
#define V06_SIZE offsetof(tcpx_p2p_config, heartbeat_ms)
#define V07_SIZE offsetof(tcpx_p2p_config, chunks_per_channel)
#define V08_SIZE offsetof(tcpx_p2p_config, redial_ms)

static void test_config_init_v01(void **state)
{
	unsigned char buf[sizeof(tcpx_p2p_config) + 64];
	int (*init01)(tcpx_p2p_config *);
	int (*init02)(tcpx_p2p_config *);
	int (*init05)(tcpx_p2p_config *);
	int (*init06)(tcpx_p2p_config *);
	int (*init07)(tcpx_p2p_config *);
	int (*init08)(tcpx_p2p_config *);
	int (*init13)(tcpx_p2p_config *);
	tcpx_p2p_config *cfg = (tcpx_p2p_config *)(void *)buf;
	tcpx_p2p_session *s;
	void *lib = dlopen(TP_LIB_PATH, RTLD_NOW | RTLD_LOCAL);

	assert_non_null(lib);
	init01 = (int (*)(tcpx_p2p_config *))dlvsym(lib, "tcpx_p2p_config_init", "TCPX_P2P_0.1");
	init02 = (int (*)(tcpx_p2p_config *))dlvsym(lib, "tcpx_p2p_config_init", "TCPX_P2P_0.2");
	assert_non_null(init01);
	init05 = (int (*)(tcpx_p2p_config *))dlvsym(lib, "tcpx_p2p_config_init", "TCPX_P2P_0.5");
	assert_non_null(init02);
	assert_non_null(init05);
	init06 = (int (*)(tcpx_p2p_config *))dlvsym(lib, "tcpx_p2p_config_init", "TCPX_P2P_0.6");
	assert_non_null(init06);
	init07 = (int (*)(tcpx_p2p_config *))dlvsym(lib, "tcpx_p2p_config_init", "TCPX_P2P_0.7");
	assert_non_null(init07);
	init08 = (int (*)(tcpx_p2p_config *))dlvsym(lib, "tcpx_p2p_config_init", "TCPX_P2P_0.8");
	assert_non_null(init08);
	init13 = (int (*)(tcpx_p2p_config *))dlvsym(lib, "tcpx_p2p_config_init", "TCPX_P2P_0.13");
	assert_non_null(init13);
	assert_ptr_equal((void *)init13, (void *)dlsym(lib, "tcpx_p2p_config_init"));

	memset(buf, 0x5a, sizeof(buf));
	assert_int_equal(init01(cfg), 0);
	assert_int_equal(cfg->struct_size, V01_SIZE);
	assert_int_equal(cfg->num_channels, 4);
	for (size_t i = V01_SIZE; i < sizeof(buf); i++)
		assert_int_equal(buf[i], 0x5a);
	/* The bytes behind the 0.1 struct are garbage: never read. */
	cfg->gpu = -1;
	assert_int_equal(tcpx_p2p_session_create(cfg, &s), 0);
	assert_int_equal(tcpx_p2p_session_destroy(s), 0);

	/* 0.2 to 0.4 binaries: the struct ends before require_plugin. */
	memset(buf, 0x5a, sizeof(buf));
	assert_int_equal(init02(cfg), 0);
	assert_int_equal(cfg->struct_size, V02_SIZE);
	assert_int_equal(cfg->mss, 7168);
	for (size_t i = V02_SIZE; i < sizeof(buf); i++)
		assert_int_equal(buf[i], 0x5a);
	cfg->gpu = -1;
	assert_int_equal(tcpx_p2p_session_create(cfg, &s), 0);
	assert_int_equal(tcpx_p2p_session_destroy(s), 0);

	/* 0.5 binaries: the struct ends before close_timeout_ms. */
	memset(buf, 0x5a, sizeof(buf));
	assert_int_equal(init05(cfg), 0);
	assert_int_equal(cfg->struct_size, V05_SIZE);
	assert_int_equal(cfg->require_plugin, 0);
	for (size_t i = V05_SIZE; i < sizeof(buf); i++)
		assert_int_equal(buf[i], 0x5a);
	cfg->gpu = -1;
	assert_int_equal(tcpx_p2p_session_create(cfg, &s), 0);
	assert_int_equal(tcpx_p2p_session_destroy(s), 0);

	/* 0.6 binaries: the struct ends before heartbeat_ms. */
	memset(buf, 0x5a, sizeof(buf));
	assert_int_equal(init06(cfg), 0);
	assert_int_equal(cfg->struct_size, V06_SIZE);
	assert_int_equal(cfg->close_timeout_ms, 10000);
	for (size_t i = V06_SIZE; i < sizeof(buf); i++)
		assert_int_equal(buf[i], 0x5a);
	cfg->gpu = -1;
	assert_int_equal(tcpx_p2p_session_create(cfg, &s), 0);
	assert_int_equal(tcpx_p2p_session_destroy(s), 0);

	/* 0.7 binaries: the struct ends before chunks_per_channel. */
	memset(buf, 0x5a, sizeof(buf));
	assert_int_equal(init07(cfg), 0);
	assert_int_equal(cfg->struct_size, V07_SIZE);
	assert_int_equal(cfg->heartbeat_ms, 1000);
	assert_int_equal(cfg->dead_after_ms, 10000);
	for (size_t i = V07_SIZE; i < sizeof(buf); i++)
		assert_int_equal(buf[i], 0x5a);
	cfg->gpu = -1;
	assert_int_equal(tcpx_p2p_session_create(cfg, &s), 0);
	assert_int_equal(tcpx_p2p_session_destroy(s), 0);

	/* 0.8 to 0.12 binaries: the struct ends before redial_ms. */
	memset(buf, 0x5a, sizeof(buf));
	assert_int_equal(init08(cfg), 0);
	assert_int_equal(cfg->struct_size, V08_SIZE);
	assert_int_equal(cfg->chunks_per_channel, 1);
	for (size_t i = V08_SIZE; i < sizeof(buf); i++)
		assert_int_equal(buf[i], 0x5a);
	cfg->gpu = -1;
	assert_int_equal(tcpx_p2p_session_create(cfg, &s), 0);
	assert_int_equal(tcpx_p2p_session_destroy(s), 0);

	memset(buf, 0x5a, sizeof(buf));
	assert_int_equal(init13(cfg), 0);
	assert_int_equal(cfg->struct_size, sizeof(tcpx_p2p_config));
	assert_int_equal(cfg->redial_ms, 0);
	dlclose(lib);
}

int main(void)
{
	/* The defaults checked above, whatever the environment sets (the
	 * sanitizer suites set some). */
	static const char *const vars[] = {
		"TCPX_P2P_NUM_CHANNELS",     "UCCL_TCPX_NUM_CHANNELS", "TCPX_P2P_MSS",
		"TCPX_P2P_REQUIRE_PLUGIN",   "TCPX_P2P_CLOSE_TIMEOUT_MS", "TCPX_P2P_HEARTBEAT_MS",
		"TCPX_P2P_DEAD_AFTER_MS",    "TCPX_P2P_CHUNKS_PER_CHANNEL", "TCPX_P2P_REDIAL_MS",
	};
	const struct CMUnitTest tests[] = { cmocka_unit_test(test_config_init_v01) };

	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		unsetenv(vars[i]);

	return cmocka_run_group_tests_name("ABI compatibility", tests, NULL, NULL) ? 1 : 0;
}
