/* The configuration table: defaults, environment parsing, aliases,
 * malformed values, size suffixes, resolve() and describe(). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "util/config.h"
#include "util/log.h"


struct capture {
	int count;
	char last[1100];
	char all[8192];
};

static struct capture cap;

static void capture_sink(int level, const char *subsys, const char *msg, void *arg)
{
	size_t used = strlen(cap.all);

	cap.count++;
	snprintf(cap.last, sizeof(cap.last), "%s", msg);
	snprintf(cap.all + used, sizeof(cap.all) - used, "%s\n", msg);
}

/* Every setting's variable (and the old UCCL_TCPX_ names) out of the
 * environment: the defaults under test must not depend on the shell's, or
 * on the test suite's (the sanitizer suites set some). */
static void unset_settings(void)
{
	extern char **environ;
	char name[128];
	bool again = true;

	while (again) { /* unsetenv reshuffles environ: start over after each */
		again = false;
		for (char **e = environ; *e; e++) {
			const char *eq = strchr(*e, '=');
			size_t n = eq ? (size_t)(eq - *e) : strlen(*e);

			if ((strncmp(*e, "TCPX_P2P_", 9) && strncmp(*e, "UCCL_TCPX_", 10)) ||
			    n >= sizeof(name))
				continue;
			memcpy(name, *e, n);
			name[n] = '\0';
			unsetenv(name);
			again = true;
			break;
		}
	}
}

static int clean_env(void **state)
{
	unset_settings();
	memset(&cap, 0, sizeof(cap));
	return tcpx_p2p_set_log(capture_sink, NULL, TCPX_P2P_LOG_INFO);
}

static int restore_log(void **state)
{
	return tcpx_p2p_set_log(NULL, NULL, TCPX_P2P_LOG_WARN);
}

static void assert_defaults(const tcpx_p2p_config *c)
{
	assert_int_equal(c->struct_size, sizeof(*c));
	assert_int_equal(c->gpu, -1);
	assert_int_equal(c->net_dev, -1);
	assert_int_equal(c->num_channels, 4);
	assert_int_equal(c->chunk_bytes, 2097152);
	assert_int_equal(c->chunks_per_channel, 1);
	assert_int_equal(c->send_window, 16);
	assert_int_equal(c->recv_window, 16);
	assert_int_equal(c->unpack, TCPX_P2P_UNPACK_KERNEL);
	assert_int_equal(c->timeout_ms, 60000);
	assert_null(c->plugin_path);
}

static void test_defaults(void **state)
{
	tcpx_p2p_config c;

	memset(&c, 0x5a, sizeof(c));
	assert_int_equal(tcpx_p2p_config_init(&c), 0);
	assert_defaults(&c);
	assert_int_equal(cap.count, 0);
	assert_int_equal(tcpx_p2p_config_init(NULL), TCPX_P2P_EINVAL);
}

static void test_every_row_from_env(void **state)
{
	tcpx_p2p_config c;

	setenv("TCPX_P2P_GPU", "7", 1);
	setenv("TCPX_P2P_NET_DEV", "3", 1);
	setenv("TCPX_P2P_NUM_CHANNELS", "16", 1);
	setenv("TCPX_P2P_CHUNK_BYTES", "4194304", 1);
	setenv("TCPX_P2P_SEND_WINDOW", "1", 1);
	setenv("TCPX_P2P_RECV_WINDOW", "8", 1);
	setenv("TCPX_P2P_UNPACK", "d2d", 1);
	setenv("TCPX_P2P_TIMEOUT_MS", "-1", 1);
	setenv("TCPX_P2P_PLUGIN", "/opt/x/libnccl-net.so", 1);
	assert_int_equal(tcpx_p2p_config_init(&c), 0);
	assert_int_equal(c.gpu, 7);
	assert_int_equal(c.net_dev, 3);
	assert_int_equal(c.num_channels, 16);
	assert_int_equal(c.chunk_bytes, 4194304);
	assert_int_equal(c.send_window, 1);
	assert_int_equal(c.recv_window, 8);
	assert_int_equal(c.unpack, TCPX_P2P_UNPACK_D2D);
	assert_int_equal(c.timeout_ms, -1);
	assert_string_equal(c.plugin_path, "/opt/x/libnccl-net.so");

	setenv("TCPX_P2P_UNPACK", "HOST", 1);
	setenv("TCPX_P2P_TIMEOUT_MS", "86400000", 1);
	setenv("TCPX_P2P_GPU", "-1", 1);
	setenv("TCPX_P2P_NET_DEV", "+255", 1);
	assert_int_equal(tcpx_p2p_config_init(&c), 0);
	assert_int_equal(c.unpack, TCPX_P2P_UNPACK_HOST);
	assert_int_equal(c.timeout_ms, 86400000);
	assert_int_equal(c.gpu, -1);
	assert_int_equal(c.net_dev, 255);

	/* Set but empty means unset. */
	setenv("TCPX_P2P_NUM_CHANNELS", "", 1);
	setenv("TCPX_P2P_PLUGIN", "", 1);
	assert_int_equal(tcpx_p2p_config_init(&c), 0);
	assert_int_equal(c.num_channels, 4);
	assert_null(c.plugin_path);
}

static void test_aliases(void **state)
{
	tcpx_p2p_config c;
	int notices;

	setenv("UCCL_TCPX_NUM_CHANNELS", "3", 1);
	setenv("UCCL_TCPX_CHUNK_BYTES", "1M", 1);
	setenv("UCCL_TCPX_UNPACK_IMPL", "host", 1);
	setenv("UCCL_TCPX_PLUGIN_PATH", "/old/plugin.so", 1);
	assert_int_equal(tcpx_p2p_config_init(&c), 0);
	assert_int_equal(c.num_channels, 3);
	assert_int_equal(c.chunk_bytes, 1 << 20);
	assert_int_equal(c.unpack, TCPX_P2P_UNPACK_HOST);
	assert_string_equal(c.plugin_path, "/old/plugin.so");
	/* One INFO notice per alias, naming the new variable. */
	assert_int_equal(cap.count, 4);
	assert_non_null(strstr(cap.all, "tcpx_p2p INFO config "));
	assert_non_null(strstr(cap.all, "UCCL_TCPX_NUM_CHANNELS is deprecated; use "
					"TCPX_P2P_NUM_CHANNELS"));
	assert_non_null(strstr(cap.all, "UCCL_TCPX_PLUGIN_PATH is deprecated; use "
					"TCPX_P2P_PLUGIN"));
	notices = cap.count;
	assert_int_equal(tcpx_p2p_config_init(&c), 0);
	assert_int_equal(cap.count, notices);

	/* The canonical name wins. */
	setenv("TCPX_P2P_NUM_CHANNELS", "8", 1);
	setenv("TCPX_P2P_CHUNK_BYTES", "65536", 1);
	setenv("TCPX_P2P_UNPACK", "kernel", 1);
	setenv("TCPX_P2P_PLUGIN", "/new/plugin.so", 1);
	assert_int_equal(tcpx_p2p_config_init(&c), 0);
	assert_int_equal(c.num_channels, 8);
	assert_int_equal(c.chunk_bytes, 65536);
	assert_int_equal(c.unpack, TCPX_P2P_UNPACK_KERNEL);
	assert_string_equal(c.plugin_path, "/new/plugin.so");

	/* A bad alias value is reported under the alias's name. */
	unsetenv("TCPX_P2P_NUM_CHANNELS");
	setenv("UCCL_TCPX_NUM_CHANNELS", "0", 1);
	assert_int_equal(tcpx_p2p_config_init(&c), TCPX_P2P_EINVAL);
	assert_int_equal(c.num_channels, 4);
	assert_non_null(strstr(tcpx_p2p_last_error(),
			       "UCCL_TCPX_NUM_CHANNELS (alias of TCPX_P2P_NUM_CHANNELS)=\"0\""));
}

struct bad_case {
	const char *var;
	const char *value;
	const char *range; /* expected in the detail */
};

static const struct bad_case bad_cases[] = {
	{ "TCPX_P2P_GPU", "abc", "-1..1023" },
	{ "TCPX_P2P_GPU", "1024", "-1..1023" },
	{ "TCPX_P2P_GPU", "-2", "-1..1023" },
	{ "TCPX_P2P_GPU", "3x", "-1..1023" },
	{ "TCPX_P2P_GPU", " 3", "-1..1023" },
	{ "TCPX_P2P_GPU", "3 ", "-1..1023" },
	{ "TCPX_P2P_GPU", "0x3", "-1..1023" },
	{ "TCPX_P2P_GPU", "-", "-1..1023" },
	{ "TCPX_P2P_NET_DEV", "256", "-1..255" },
	{ "TCPX_P2P_NUM_CHANNELS", "0", "1..16" },
	{ "TCPX_P2P_NUM_CHANNELS", "17", "1..16" },
	{ "TCPX_P2P_NUM_CHANNELS", "99999999999999999999999", "1..16" },
	{ "TCPX_P2P_NUM_CHANNELS", "4294967298", "1..16" }, /* 2 after int truncation */
	{ "TCPX_P2P_NUM_CHANNELS", "2.0", "1..16" },
	{ "TCPX_P2P_CHUNK_BYTES", "0", "1..4194304" },
	{ "TCPX_P2P_CHUNK_BYTES", "5M", "1..4194304" },
	{ "TCPX_P2P_CHUNK_BYTES", "4194305", "1..4194304" },
	{ "TCPX_P2P_CHUNK_BYTES", "-1", "1..4194304" },
	{ "TCPX_P2P_CHUNK_BYTES", "512KB", "1..4194304" },
	{ "TCPX_P2P_CHUNK_BYTES", "512G", "1..4194304" },
	{ "TCPX_P2P_CHUNK_BYTES", "K", "1..4194304" },
	{ "TCPX_P2P_CHUNK_BYTES", "9223372036854775807K", "1..4194304" },
	{ "TCPX_P2P_SEND_WINDOW", "17", "1..16" },
	{ "TCPX_P2P_RECV_WINDOW", "0", "1..16" },
	{ "TCPX_P2P_UNPACK", "gpu", "kernel|d2d|host" },
	{ "TCPX_P2P_UNPACK", "1", "kernel|d2d|host" },
	{ "TCPX_P2P_TIMEOUT_MS", "0", "-1 (no limit) or 1..86400000" },
	{ "TCPX_P2P_TIMEOUT_MS", "-2", "-1 (no limit) or 1..86400000" },
	{ "TCPX_P2P_TIMEOUT_MS", "86400001", "-1 (no limit) or 1..86400000" },
	{ "TCPX_P2P_LOG_LEVEL", "verbose", "none|warn|info|debug|trace" },
	{ "TCPX_P2P_LOG_LEVEL", "5", "none|warn|info|debug|trace" },
};

static void test_malformed(void **state)
{
	tcpx_p2p_config c;
	char want[256];
	size_t i;

	for (i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
		const struct bad_case *b = &bad_cases[i];

		setenv(b->var, b->value, 1);
		/* A valid neighbour is still applied. */
		setenv(strcmp(b->var, "TCPX_P2P_SEND_WINDOW") ? "TCPX_P2P_SEND_WINDOW" :
								"TCPX_P2P_RECV_WINDOW",
		       "5", 1);
		memset(&c, 0x5a, sizeof(c));
		cap.count = 0;
		if (tcpx_p2p_config_init(&c) != TCPX_P2P_EINVAL)
			fail_msg("%s=\"%s\" accepted", b->var, b->value);
		snprintf(want, sizeof(want), "%s=\"%s\" is not valid", b->var, b->value);
		if (!strstr(tcpx_p2p_last_error(), want) ||
		    !strstr(tcpx_p2p_last_error(), b->range))
			fail_msg("%s=\"%s\": detail \"%s\"", b->var, b->value,
				 tcpx_p2p_last_error());
		/* Logged once as a warning too. */
		assert_int_equal(cap.count, 1);
		assert_non_null(strstr(cap.last, want));

		/* The bad field keeps its default; the neighbour got 5. */
		if (strcmp(b->var, "TCPX_P2P_SEND_WINDOW")) {
			assert_int_equal(c.send_window, 5);
			c.send_window = 16;
		} else {
			assert_int_equal(c.recv_window, 5);
			c.recv_window = 16;
		}
		assert_defaults(&c);
		unsetenv(b->var);
		unsetenv("TCPX_P2P_SEND_WINDOW");
		unsetenv("TCPX_P2P_RECV_WINDOW");
	}
}

static void test_several_bad(void **state)
{
	tcpx_p2p_config c;

	setenv("TCPX_P2P_NUM_CHANNELS", "x", 1);
	setenv("TCPX_P2P_UNPACK", "y", 1);
	setenv("TCPX_P2P_GPU", "2", 1);
	assert_int_equal(tcpx_p2p_config_init(&c), TCPX_P2P_EINVAL);
	assert_non_null(strstr(tcpx_p2p_last_error(), "TCPX_P2P_NUM_CHANNELS=\"x\""));
	assert_non_null(strstr(tcpx_p2p_last_error(), "and 1 more"));
	assert_int_equal(cap.count, 2);
	assert_int_equal(c.num_channels, 4);
	assert_int_equal(c.unpack, TCPX_P2P_UNPACK_KERNEL);
	assert_int_equal(c.gpu, 2);
}

static void test_size_suffixes(void **state)
{
	static const struct {
		const char *text;
		size_t want;
	} ok[] = {
		{ "1", 1 },	      { "512K", 512 << 10 }, { "512k", 512 << 10 },
		{ "64KiB", 64 << 10 }, { "1kib", 1 << 10 },   { "4M", 4 << 20 },
		{ "2m", 2 << 20 },     { "1MiB", 1 << 20 },   { "4096K", 4 << 20 },
	};
	tcpx_p2p_config c;
	size_t i;

	for (i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		setenv("TCPX_P2P_CHUNK_BYTES", ok[i].text, 1);
		if (tcpx_p2p_config_init(&c))
			fail_msg("%s: %s", ok[i].text, tcpx_p2p_last_error());
		assert_int_equal(c.chunk_bytes, ok[i].want);
	}
}

static void test_resolve(void **state)
{
	tcpx_p2p_config in, out;

	assert_int_equal(tcpx_p2p_config_init(&in), 0);
	in.num_channels = 4;
	in.timeout_ms = -1;
	in.plugin_path = "/p.so";
	memset(&out, 0, sizeof(out));
	assert_int_equal(tp__config_resolve(&in, &out), 0);
	assert_memory_equal(&in, &out, sizeof(in));

	/* Environment plays no part in resolve(). */
	setenv("TCPX_P2P_NUM_CHANNELS", "9", 1);
	assert_int_equal(tp__config_resolve(&in, &out), 0);
	assert_int_equal(out.num_channels, 4);

	assert_int_equal(tp__config_resolve(NULL, &out), TCPX_P2P_EINVAL);
	assert_int_equal(tp__config_resolve(&in, NULL), TCPX_P2P_EINVAL);
}

static void test_resolve_old_struct(void **state)
{
	tcpx_p2p_config in, out;

	/* An older caller knew fields up to timeout_ms; the bytes after it
	 * are someone else's and must not be read. */
	memset(&in, 0x5a, sizeof(in));
	in.struct_size = offsetof(tcpx_p2p_config, plugin_path);
	in.gpu = 3;
	in.net_dev = 1;
	in.num_channels = 8;
	in.chunk_bytes = 1 << 20;
	in.send_window = 4;
	in.recv_window = 12;
	in.unpack = TCPX_P2P_UNPACK_HOST;
	in.timeout_ms = 100;
	assert_int_equal(tp__config_resolve(&in, &out), 0);
	assert_int_equal(out.struct_size, sizeof(out));
	assert_int_equal(out.gpu, 3);
	assert_int_equal(out.recv_window, 12);
	assert_int_equal(out.timeout_ms, 100);
	assert_null(out.plugin_path);

	/* Only gpu and net_dev known: the rest are defaults. */
	in.struct_size = offsetof(tcpx_p2p_config, num_channels);
	assert_int_equal(tp__config_resolve(&in, &out), 0);
	assert_int_equal(out.gpu, 3);
	assert_int_equal(out.net_dev, 1);
	out.gpu = -1;
	out.net_dev = -1;
	assert_defaults(&out);

	/* Nothing but struct_size: all defaults. */
	in.struct_size = offsetof(tcpx_p2p_config, gpu);
	assert_int_equal(tp__config_resolve(&in, &out), 0);
	assert_defaults(&out);

	/* A 0.1 caller (up to plugin_path): the fields added in 0.2 get
	 * their defaults, not the 0x5a bytes behind its struct. */
	in.struct_size = offsetof(tcpx_p2p_config, progress_thread);
	in.plugin_path = NULL;
	assert_int_equal(tp__config_resolve(&in, &out), 0);
	assert_int_equal(out.progress_thread, 0);
	assert_int_equal(out.mss, 7168);
	/* ... and then the environment: a 0.1 binary honours the 0.2 variables
	 * (TCPX_P2P_AUTH_TOKEN above all). */
	setenv("TCPX_P2P_MSS", "1448", 1);
	setenv("TCPX_P2P_PROGRESS_THREAD", "1", 1);
	assert_int_equal(tp__config_resolve(&in, &out), 0);
	assert_int_equal(out.mss, 1448);
	assert_int_equal(out.progress_thread, 1);
	assert_int_equal(out.num_channels, 8); /* the caller's own fields still win */
	unsetenv("TCPX_P2P_MSS");
	unsetenv("TCPX_P2P_PROGRESS_THREAD");

	/* A 0.2 to 0.4 caller: the fields added in 0.5 get their defaults,
	 * not the 0x5a bytes behind its struct. */
	in.struct_size = offsetof(tcpx_p2p_config, peer_max_items);
	in.nics = NULL;
	in.auth_token = NULL;
	in.progress_thread = 0;
	in.mss = 7168;
	in.handshake_ms = 10000;
	assert_int_equal(tp__config_resolve(&in, &out), 0);
	assert_int_equal(out.require_plugin, 0);
	assert_int_equal(out.peer_max_items, 65536);
	assert_int_equal(out.peer_max_notifs, 4096);
	assert_int_equal(out.close_timeout_ms, 10000);
	assert_int_equal(out.heartbeat_ms, 1000);
	assert_int_equal(out.dead_after_ms, 10000);
	/* It cannot know notif_take: notifications tcpx_p2p_notif holds,
	 * unless the environment says otherwise. */
	assert_int_equal(out.notif_max_bytes, TCPX_P2P_NOTIF_MAX);
	setenv("TCPX_P2P_NOTIF_MAX_BYTES", "65536", 1);
	assert_int_equal(tp__config_resolve(&in, &out), 0);
	assert_int_equal(out.notif_max_bytes, 65536);
	unsetenv("TCPX_P2P_NOTIF_MAX_BYTES");
	assert_int_equal(out.stall_ms, 2000);
	assert_int_equal(out.chunks_per_channel, 1);

	/* A newer, larger caller: the known part is used. */
	in.struct_size = sizeof(in) + 64;
	in.progress_thread = 1;
	in.mss = 1448;
	in.plugin_path = NULL;
	in.handshake_ms = 1000;
	in.peer_max_items = 10;
	in.peer_max_segments = 100;
	in.peer_max_notifs = 10;
	in.peer_max_ctl_bytes = 1 << 20;
	in.require_plugin = 1;
	in.close_timeout_ms = 500;
	in.heartbeat_ms = 100;
	in.dead_after_ms = 0;
	in.notif_max_bytes = 4096;
	in.stall_ms = 0;
	in.chunks_per_channel = 3;
	in.reserved_08 = 0;
	in.redial_ms = 2000;
	in.reserved_13 = 0;
	assert_int_equal(tp__config_resolve(&in, &out), 0);
	assert_int_equal(out.redial_ms, 2000);
	assert_int_equal(out.chunks_per_channel, 3);
	assert_int_equal(out.heartbeat_ms, 100);
	assert_int_equal(out.dead_after_ms, 0);
	assert_int_equal(out.require_plugin, 1);
	assert_int_equal(out.close_timeout_ms, 500);
	assert_int_equal(out.struct_size, sizeof(out));
	assert_int_equal(out.num_channels, 8);

	/* A 0.7 caller (its sizeof: stall_ms and the padding after it): the
	 * 0.8 fields get their defaults, not the bytes behind its struct. */
	in.struct_size = offsetof(tcpx_p2p_config, chunks_per_channel);
	in.stall_ms = 100;
	in.chunks_per_channel = 0x5a5a5a5a;
	assert_int_equal(tp__config_resolve(&in, &out), 0);
	assert_int_equal(out.stall_ms, 100);
	assert_int_equal(out.chunks_per_channel, 1);

	in.struct_size = 0;
	assert_int_equal(tp__config_resolve(&in, &out), TCPX_P2P_EINVAL);
	assert_non_null(strstr(tcpx_p2p_last_error(), "struct_size 0"));
	in.struct_size = 4;
	assert_int_equal(tp__config_resolve(&in, &out), TCPX_P2P_EINVAL);
}

static void test_resolve_bad_fields(void **state)
{
	static const struct {
		size_t off;
		int is_size;
		long long value;
		const char *want;
	} bad[] = {
		{ offsetof(tcpx_p2p_config, gpu), 0, -2, "config.gpu = -2" },
		{ offsetof(tcpx_p2p_config, gpu), 0, 1024, "config.gpu = 1024" },
		{ offsetof(tcpx_p2p_config, net_dev), 0, 256, "config.net_dev = 256" },
		{ offsetof(tcpx_p2p_config, num_channels), 0, 0, "config.num_channels = 0" },
		{ offsetof(tcpx_p2p_config, num_channels), 0, 17, "config.num_channels = 17" },
		{ offsetof(tcpx_p2p_config, chunk_bytes), 1, 0, "config.chunk_bytes = 0" },
		{ offsetof(tcpx_p2p_config, chunks_per_channel), 0, 0,
		  "config.chunks_per_channel = 0" },
		{ offsetof(tcpx_p2p_config, chunks_per_channel), 0, 17,
		  "config.chunks_per_channel = 17" },
		{ offsetof(tcpx_p2p_config, chunk_bytes), 1, (4 << 20) + 1,
		  "config.chunk_bytes = 4194305" },
		{ offsetof(tcpx_p2p_config, send_window), 0, 17, "config.send_window = 17" },
		{ offsetof(tcpx_p2p_config, recv_window), 0, 0, "config.recv_window = 0" },
		{ offsetof(tcpx_p2p_config, unpack), 0, 3, "config.unpack = 3" },
		{ offsetof(tcpx_p2p_config, unpack), 0, -1, "config.unpack = -1" },
		{ offsetof(tcpx_p2p_config, timeout_ms), 0, 0, "config.timeout_ms = 0" },
		{ offsetof(tcpx_p2p_config, timeout_ms), 0, -5, "config.timeout_ms = -5" },
	};
	tcpx_p2p_config in, out;
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(tcpx_p2p_config_init(&in), 0);
		if (bad[i].is_size)
			*(size_t *)((char *)&in + bad[i].off) = (size_t)bad[i].value;
		else
			*(int *)((char *)&in + bad[i].off) = (int)bad[i].value;
		assert_int_equal(tp__config_resolve(&in, &out), TCPX_P2P_EINVAL);
		if (!strstr(tcpx_p2p_last_error(), bad[i].want))
			fail_msg("want \"%s\", got \"%s\"", bad[i].want, tcpx_p2p_last_error());
		assert_non_null(strstr(tcpx_p2p_last_error(), "expected"));
	}
	/* A huge size_t is reported as huge, not wrapped into range. */
	assert_int_equal(tcpx_p2p_config_init(&in), 0);
	in.chunk_bytes = (size_t)-1;
	assert_int_equal(tp__config_resolve(&in, &out), TCPX_P2P_EINVAL);
}

static void test_describe(void **state)
{
	static const struct {
		const char *name;
		const char *value;
	} want[] = {
		{ "TCPX_P2P_GPU", "-1" },
		{ "TCPX_P2P_NET_DEV", "-1" },
		{ "TCPX_P2P_NUM_CHANNELS", "4" },
		{ "TCPX_P2P_CHUNK_BYTES", "2097152" },
		{ "TCPX_P2P_CHUNKS_PER_CHANNEL", "1" },
		{ "TCPX_P2P_SEND_WINDOW", "16" },
		{ "TCPX_P2P_RECV_WINDOW", "16" },
		{ "TCPX_P2P_UNPACK", "kernel" },
		{ "TCPX_P2P_TIMEOUT_MS", "60000" },
		{ "TCPX_P2P_HANDSHAKE_MS", "10000" },
		{ "TCPX_P2P_PLUGIN", "(search)" },
		{ "TCPX_P2P_REQUIRE_PLUGIN", "0" },
		{ "TCPX_P2P_CLOSE_TIMEOUT_MS", "10000" },
		{ "TCPX_P2P_HEARTBEAT_MS", "1000" },
		{ "TCPX_P2P_DEAD_AFTER_MS", "10000" },
		{ "TCPX_P2P_NOTIF_MAX_BYTES", "65536" },
		{ "TCPX_P2P_STALL_MS", "2000" },
		{ "TCPX_P2P_REDIAL_MS", "0" },
		{ "TCPX_P2P_PROGRESS_THREAD", "0" },
		{ "TCPX_P2P_MSS", "7168" },
		{ "TCPX_P2P_NICS", "auto" },
		{ "TCPX_P2P_AUTH_TOKEN", "(none)" },
		{ "TCPX_P2P_PEER_MAX_ITEMS", "65536" },
		{ "TCPX_P2P_PEER_MAX_SEGMENTS", "1048576" },
		{ "TCPX_P2P_PEER_MAX_NOTIFS", "4096" },
		{ "TCPX_P2P_PEER_MAX_CTL_BYTES", "67108864" },
		{ "TCPX_P2P_LOG_LEVEL", "info" }, /* set_log(INFO) in setup */
	};
	tcpx_p2p_config c;
	const char *name, *help;
	char value[64];
	int i, n = tcpx_p2p_config_count();

	assert_int_equal(n, (int)(sizeof(want) / sizeof(want[0])));
	assert_int_equal(tcpx_p2p_config_init(&c), 0);
	for (i = 0; i < n; i++) {
		name = help = NULL;
		assert_int_equal(tcpx_p2p_config_describe(&c, i, &name, &help, value,
							  sizeof(value)), 0);
		assert_string_equal(name, want[i].name);
		assert_string_equal(value, want[i].value);
		assert_non_null(help);
		assert_true(strlen(help) > 10);
		/* NULL cfg describes the defaults. */
		assert_int_equal(tcpx_p2p_config_describe(NULL, i, NULL, NULL, value,
							  sizeof(value)), 0);
		assert_string_equal(value, want[i].value);
	}

	c.unpack = TCPX_P2P_UNPACK_D2D;
	c.chunk_bytes = 1 << 20;
	c.plugin_path = "/usr/local/tcpx/lib64/libnccl-net-tcpx.so";
	assert_int_equal(tcpx_p2p_config_describe(&c, 7, NULL, NULL, value, sizeof(value)), 0);
	assert_string_equal(value, "d2d");
	assert_int_equal(tcpx_p2p_config_describe(&c, 3, NULL, NULL, value, sizeof(value)), 0);
	assert_string_equal(value, "1048576");
	assert_int_equal(tcpx_p2p_config_describe(&c, 10, NULL, NULL, value, sizeof(value)), 0);
	assert_string_equal(value, "/usr/local/tcpx/lib64/libnccl-net-tcpx.so");
	c.unpack = 9;
	assert_int_equal(tcpx_p2p_config_describe(&c, 7, NULL, NULL, value, sizeof(value)), 0);
	assert_string_equal(value, "9");

	/* Too small a buffer: EINVAL, buffer untouched. */
	strcpy(value, "keep");
	assert_int_equal(tcpx_p2p_config_describe(&c, 10, NULL, NULL, value, 10), TCPX_P2P_EINVAL);
	assert_string_equal(value, "keep");
	assert_int_equal(tcpx_p2p_config_describe(&c, -1, &name, NULL, value, sizeof(value)),
			 TCPX_P2P_EINVAL);
	assert_int_equal(tcpx_p2p_config_describe(&c, n, &name, NULL, value, sizeof(value)),
			 TCPX_P2P_EINVAL);
	c.struct_size = 0;
	assert_int_equal(tcpx_p2p_config_describe(&c, 0, &name, NULL, value, sizeof(value)),
			 TCPX_P2P_EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_defaults, clean_env, restore_log),
		cmocka_unit_test_setup_teardown(test_every_row_from_env, clean_env, restore_log),
		cmocka_unit_test_setup_teardown(test_aliases, clean_env, restore_log),
		cmocka_unit_test_setup_teardown(test_malformed, clean_env, restore_log),
		cmocka_unit_test_setup_teardown(test_several_bad, clean_env, restore_log),
		cmocka_unit_test_setup_teardown(test_size_suffixes, clean_env, restore_log),
		cmocka_unit_test_setup_teardown(test_resolve, clean_env, restore_log),
		cmocka_unit_test_setup_teardown(test_resolve_old_struct, clean_env, restore_log),
		cmocka_unit_test_setup_teardown(test_resolve_bad_fields, clean_env, restore_log),
		cmocka_unit_test_setup_teardown(test_describe, clean_env, restore_log),
	};

	return cmocka_run_group_tests(tests, NULL, NULL) ? 1 : 0;
}
