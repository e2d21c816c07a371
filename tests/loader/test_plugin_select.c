/* Plugin selection as a session sees it: NCCL_NET_PLUGIN, the fallback to
 * the bundled emulator (warned, visible in session_query, forbidden by
 * TCPX_P2P_REQUIRE_PLUGIN) and windows capped to what the plugin takes.
 * Linked with libtcpx_p2p.so, which finds the emulator beside itself. */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tcpx_p2p.h"

static const char *const tcpx_paths[] = {
	"/usr/local/tcpx/lib64/libnccl-net-tcpx.so",
	"/var/lib/tcpx/lib64/libnccl-net.so",
	"/usr/local/nvidia/lib64/libnccl-net.so",
	"/home/kubernetes/bin/nvidia/lib64/libnccl-net.so",
};
#define NPATHS (sizeof(tcpx_paths) / sizeof(tcpx_paths[0]))

static char emu_path[4096];

struct captured {
	int warns;
	char warn[2048];
};

static void capture(int level, const char *subsys, const char *msg, void *arg)
{
	struct captured *cap = arg;

	if (level != TCPX_P2P_LOG_WARN)
		return;
	cap->warns++;
	snprintf(cap->warn, sizeof(cap->warn), "%s", msg);
}

static tcpx_p2p_config config(void)
{
	tcpx_p2p_config cfg;

	assert_int_equal(tcpx_p2p_config_init(&cfg), 0);
	cfg.gpu = -1;
	return cfg;
}

static void query(tcpx_p2p_session *s, tcpx_p2p_session_info *info)
{
	memset(info, 0, sizeof(*info));
	info->struct_size = sizeof(*info);
	assert_int_equal(tcpx_p2p_session_query(s, info), 0);
}

static void assert_has(const char *text, const char *what)
{
	if (!strstr(text, what))
		fail_msg("\"%s\" lacks \"%s\"", text, what);
}

/* The default search on a host without any plugin: the emulator, with a
 * warning naming every file tried, once per process. */
static void test_fallback(void **state)
{
	tcpx_p2p_config cfg = config();
	struct captured cap = { 0 };
	tcpx_p2p_session_info info;
	tcpx_p2p_session *s, *t;
	void *dl;
	size_t i;

	for (i = 0; i < NPATHS; i++)
		if (!access(tcpx_paths[i], F_OK))
			skip();
	dl = dlopen("libnccl-net.so", RTLD_NOW | RTLD_LOCAL);
	if (dl) {
		dlclose(dl);
		skip();
	}
	assert_int_equal(tcpx_p2p_set_log(capture, &cap, TCPX_P2P_LOG_WARN), 0);
	assert_int_equal(tcpx_p2p_session_create(&cfg, &s), 0);
	query(s, &info);
	assert_int_equal(info.plugin_fallback, 1);
	assert_string_equal(info.plugin_path, emu_path);
	assert_string_equal(info.plugin_name, "TCPXEmu_v7");
	assert_int_equal(cap.warns, 1);
	assert_has(cap.warn, "bundled TCP emulator");
	assert_has(cap.warn, emu_path);
	assert_has(cap.warn, "TCPX_P2P_REQUIRE_PLUGIN=1");
	for (i = 0; i < NPATHS; i++) {
		assert_has(info.plugin_tried, tcpx_paths[i]);
		assert_has(cap.warn, tcpx_paths[i]);
	}
	assert_has(info.plugin_tried, "; libnccl-net.so (");
	assert_has(cap.warn, "; libnccl-net.so (");
	/* Once per process: the next session is marked, not warned about. */
	assert_int_equal(tcpx_p2p_session_create(&cfg, &t), 0);
	query(t, &info);
	assert_int_equal(info.plugin_fallback, 1);
	assert_int_equal(cap.warns, 1);
	assert_int_equal(tcpx_p2p_session_destroy(t), 0);
	assert_int_equal(tcpx_p2p_session_destroy(s), 0);

	/* NCCL_NET_PLUGIN=none: NCCL's internal transports, here the emulator. */
	setenv("NCCL_NET_PLUGIN", "none", 1);
	assert_int_equal(tcpx_p2p_session_create(&cfg, &s), 0);
	query(s, &info);
	assert_int_equal(info.plugin_fallback, 1);
	assert_has(info.plugin_tried, "NCCL_NET_PLUGIN=none");
	assert_int_equal(tcpx_p2p_session_destroy(s), 0);
	unsetenv("NCCL_NET_PLUGIN");
	assert_int_equal(tcpx_p2p_set_log(NULL, NULL, TCPX_P2P_LOG_WARN), 0);
}

/* TCPX_P2P_REQUIRE_PLUGIN=1 (or require_plugin) makes the fallback an
 * error; a plugin named on purpose is no fallback. */
static void test_require(void **state)
{
	tcpx_p2p_config cfg = config();
	tcpx_p2p_session_info info;
	tcpx_p2p_session *s = NULL;
	size_t i;

	for (i = 0; i < NPATHS; i++)
		if (!access(tcpx_paths[i], F_OK))
			skip();
	cfg.require_plugin = 1;
	assert_int_equal(tcpx_p2p_session_create(&cfg, &s), TCPX_P2P_ENOPLUGIN);
	assert_null(s);
	assert_has(tcpx_p2p_last_error(), "TCPX_P2P_REQUIRE_PLUGIN=1");
	assert_has(tcpx_p2p_last_error(), tcpx_paths[0]);
	assert_has(tcpx_p2p_last_error(), emu_path);

	setenv("TCPX_P2P_REQUIRE_PLUGIN", "1", 1);
	cfg = config();
	assert_int_equal(cfg.require_plugin, 1);
	assert_int_equal(tcpx_p2p_session_create(&cfg, &s), TCPX_P2P_ENOPLUGIN);
	setenv("NCCL_NET_PLUGIN", "none", 1);
	assert_int_equal(tcpx_p2p_session_create(&cfg, &s), TCPX_P2P_ENOPLUGIN);

	/* Named, by either variable, the emulator is what was asked for. */
	setenv("NCCL_NET_PLUGIN", emu_path, 1);
	assert_int_equal(tcpx_p2p_session_create(&cfg, &s), 0);
	query(s, &info);
	assert_int_equal(info.plugin_fallback, 0);
	assert_string_equal(info.plugin_tried, "");
	assert_int_equal(tcpx_p2p_session_destroy(s), 0);
	unsetenv("NCCL_NET_PLUGIN");
	cfg.plugin_path = emu_path;
	assert_int_equal(tcpx_p2p_session_create(&cfg, &s), 0);
	query(s, &info);
	assert_int_equal(info.plugin_fallback, 0);
	assert_int_equal(tcpx_p2p_session_destroy(s), 0);
	unsetenv("TCPX_P2P_REQUIRE_PLUGIN");
}

/* A plugin named by NCCL_NET_PLUGIN that does not load is an error, not
 * the emulator. */
static void test_nccl_plugin_missing(void **state)
{
	tcpx_p2p_config cfg = config();
	tcpx_p2p_session *s = NULL;

	setenv("NCCL_NET_PLUGIN", "nosuchplugin", 1);
	assert_int_equal(tcpx_p2p_session_create(&cfg, &s), TCPX_P2P_ENOPLUGIN);
	assert_null(s);
	assert_has(tcpx_p2p_last_error(), "libnccl-net-nosuchplugin.so (");
	unsetenv("NCCL_NET_PLUGIN");
}

/* Windows in effect: 8 requests per comm for a v6 plugin (the fake takes
 * no more), 16 from v7; a smaller configured window stays. */
static void test_windows(void **state)
{
	static const struct {
		const char *path;
		int abi, window;
	} cases[] = {
		{ FAKE_V6_PATH, 6, 8 },
		{ FAKE_V12_PATH, 12, 16 },
	};
	tcpx_p2p_session_info info;
	tcpx_p2p_session *s;
	size_t i, old;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		tcpx_p2p_config cfg = config();

		cfg.plugin_path = cases[i].path;
		cfg.recv_window = 5;
		if (tcpx_p2p_session_create(&cfg, &s))
			fail_msg("session over %s: %s", cases[i].path, tcpx_p2p_last_error());
		query(s, &info);
		assert_int_equal(info.plugin_abi, cases[i].abi);
		assert_int_equal(info.send_window, cases[i].window);
		assert_int_equal(info.recv_window, 5);
		/* A caller built against 0.4.1 gets its struct and no more. */
		old = offsetof(tcpx_p2p_session_info, plugin_fallback);
		memset(&info, 0x5a, sizeof(info));
		info.struct_size = old;
		assert_int_equal(tcpx_p2p_session_query(s, &info), 0);
		assert_int_equal(info.struct_size, old);
		assert_int_equal(info.plugin_abi, cases[i].abi);
		assert_int_equal(info.send_window, 0x5a5a5a5a);
		assert_int_equal(tcpx_p2p_session_destroy(s), 0);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fallback),
		cmocka_unit_test(test_require),
		cmocka_unit_test(test_nccl_plugin_missing),
		cmocka_unit_test(test_windows),
	};
	const char *p = getenv("TCPX_P2P_PLUGIN");

	/* The test registration names the emulator; the search must not. */
	if (!p || access(p, R_OK)) {
		fprintf(stderr, "SKIP: emulator plugin %s not built\n", p ? p : "(unset)");
		return 77;
	}
	snprintf(emu_path, sizeof(emu_path), "%s", p);
	unsetenv("TCPX_P2P_PLUGIN");
	unsetenv("UCCL_TCPX_PLUGIN_PATH");
	unsetenv("NCCL_NET_PLUGIN");
	unsetenv("TCPX_P2P_REQUIRE_PLUGIN");
	return cmocka_run_group_tests(tests, NULL, NULL) ? 1 : 0;
}
