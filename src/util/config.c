/* The configuration table: one row per setting feeds the environment
 * parser, tcpx_p2p_config_describe() (--dump-config) and
 * docs/configuration.md (tests/unit/test_config_doc.c keeps them in step). */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/config.h"
#include "util/error.h"
#include "util/symver.h"
#include "util/log.h"
#include "util/log_level.h"

enum tp_cfg_type {
	TP_CFG_INT,  /* int field */
	TP_CFG_SIZE, /* size_t field; K/M/KiB/MiB suffixes are 1024-multiples */
	TP_CFG_ENUM, /* int field holding an index into names */
	TP_CFG_PATH, /* const char * field; NULL shows as the row's default text */
	TP_CFG_LOG,  /* no field: the process-wide level that log.c applies */
	TP_CFG_SECRET, /* const char * field, shown only as set or not */
};

struct tp_cfg_row {
	const char *name;
	const char *alias;
	const char *field; /* member name, for tp__config_resolve() details */
	enum tp_cfg_type type;
	size_t offset;
	long long min, max;
	int minus_one_ok; /* -1 is allowed besides min..max */
	const char *const *names;
	int nnames;
	const char *def;
	const char *range;
	const char *help;
};

static const char *const tp_unpack_names[] = { "kernel", "d2d", "host" };

#define TP_OFF(f) offsetof(tcpx_p2p_config, f)

static const struct tp_cfg_row tp_cfg_rows[] = {
	{ "TCPX_P2P_GPU", NULL, "gpu", TP_CFG_INT, TP_OFF(gpu), -1, 1023, 0, NULL, 0,
	  "-1", "-1..1023",
	  "CUDA device of the session; -1 = host memory only" },
	{ "TCPX_P2P_NET_DEV", NULL, "net_dev", TP_CFG_INT, TP_OFF(net_dev), -1, 255, 0, NULL, 0,
	  "-1", "-1..255",
	  "plugin network device for every channel; -1 = TCPX_P2P_NICS decides" },
	{ "TCPX_P2P_NUM_CHANNELS", "UCCL_TCPX_NUM_CHANNELS", "num_channels", TP_CFG_INT,
	  TP_OFF(num_channels), 1, TP_MAX_CHANNELS, 0, NULL, 0,
	  "4", "1..16",
	  "channels (plugin send+recv comm pairs) per connection; must match the peer" },
	{ "TCPX_P2P_CHUNK_BYTES", "UCCL_TCPX_CHUNK_BYTES", "chunk_bytes", TP_CFG_SIZE,
	  TP_OFF(chunk_bytes), 1, TP_MAX_CHUNK, 0, NULL, 0,
	  "2097152", "1..4194304 (K, M, KiB, MiB suffixes = 1024-multiples)",
	  "bytes per plugin request; must match the peer" },
	{ "TCPX_P2P_CHUNKS_PER_CHANNEL", NULL, "chunks_per_channel", TP_CFG_INT,
	  TP_OFF(chunks_per_channel), 1, TP_MAX_CHUNKS_PER_CHANNEL, 0, NULL, 0,
	  "1", "1..16",
	  "each channel's share of a transfer is cut into up to this many chunks of at least "
	  "128 KiB, so that a channel can receive while it unpacks; 1 = one share per "
	  "channel; must match the peer" },
	{ "TCPX_P2P_SEND_WINDOW", NULL, "send_window", TP_CFG_INT, TP_OFF(send_window), 1,
	  TP_MAX_WINDOW, 0, NULL, 0,
	  "16", "1..16",
	  "sends in flight per channel" },
	{ "TCPX_P2P_RECV_WINDOW", NULL, "recv_window", TP_CFG_INT, TP_OFF(recv_window), 1,
	  TP_MAX_WINDOW, 0, NULL, 0,
	  "16", "1..16",
	  "receives in flight per channel, counted until their pages are consumed" },
	{ "TCPX_P2P_UNPACK", "UCCL_TCPX_UNPACK_IMPL", "unpack", TP_CFG_ENUM, TP_OFF(unpack), 0, 2,
	  0, tp_unpack_names, 3,
	  "kernel", "kernel|d2d|host",
	  "how received fragments reach the user's buffer: one CUDA kernel, "
	  "cudaMemcpyAsync per fragment, or through host memory" },
	{ "TCPX_P2P_TIMEOUT_MS", NULL, "timeout_ms", TP_CFG_INT, TP_OFF(timeout_ms), 1, 86400000,
	  1, NULL, 0,
	  "60000", "-1 (no limit) or 1..86400000",
	  "connection set-up deadline in ms where TCPX_P2P_TIMEOUT_DEFAULT is passed" },
	{ "TCPX_P2P_HANDSHAKE_MS", NULL, "handshake_ms", TP_CFG_INT, TP_OFF(handshake_ms), 1,
	  86400000, 0, NULL, 0,
	  "10000", "1..86400000",
	  "rendezvous server: ms a connected peer gets to authenticate and send its blob "
	  "before it is dropped" },
	{ "TCPX_P2P_PLUGIN", "UCCL_TCPX_PLUGIN_PATH", "plugin_path", TP_CFG_PATH,
	  TP_OFF(plugin_path), 0, 0, 0, NULL, 0,
	  "(search)", "a file path",
	  "NCCL net plugin to load instead of searching the default locations" },
	{ "TCPX_P2P_REQUIRE_PLUGIN", NULL, "require_plugin", TP_CFG_INT,
	  TP_OFF(require_plugin), 0, 1, 0, NULL, 0,
	  "0", "0|1",
	  "1 = fail session_create when the plugin search finds no plugin, instead of "
	  "using the bundled emulator" },
	{ "TCPX_P2P_CLOSE_TIMEOUT_MS", NULL, "close_timeout_ms", TP_CFG_INT,
	  TP_OFF(close_timeout_ms), 0, 86400000, 0, NULL, 0,
	  "10000", "0..86400000",
	  "how long a destroyed connection waits for the peer to answer its close before "
	  "closing with requests still posted; 0 = do not wait" },
	{ "TCPX_P2P_HEARTBEAT_MS", NULL, "heartbeat_ms", TP_CFG_INT, TP_OFF(heartbeat_ms), 0,
	  3600000, 0, NULL, 0,
	  "1000", "0..3600000",
	  "ms without a control message to the peer after which a connection's passes send it "
	  "a heartbeat; 0 = none" },
	{ "TCPX_P2P_DEAD_AFTER_MS", NULL, "dead_after_ms", TP_CFG_INT, TP_OFF(dead_after_ms), 0,
	  86400000, 0, NULL, 0,
	  "10000", "0..86400000",
	  "a connection whose peer sent nothing (data, control message or heartbeat) for this "
	  "many ms of this side's passes fails with ECLOSED; 0 = never" },
	{ "TCPX_P2P_NOTIF_MAX_BYTES", NULL, "notif_max_bytes", TP_CFG_INT,
	  TP_OFF(notif_max_bytes), 1, 16 << 20, 0, NULL, 0,
	  "65536", "1..16777216",
	  "longest notification this side accepts (the peer learns it and refuses longer "
	  "ones); each started KiB counts as one of TCPX_P2P_PEER_MAX_NOTIFS" },
	{ "TCPX_P2P_STALL_MS", NULL, "stall_ms", TP_CFG_INT, TP_OFF(stall_ms), 0, 86400000, 0,
	  NULL, 0,
	  "2000", "0..86400000",
	  "a pending transfer that moved no chunk for this many ms of this side's passes is "
	  "reported stalled (tcpx_p2p_xfer_query, stats), not failed; 0 = never" },
	{ "TCPX_P2P_REDIAL_MS", NULL, "redial_ms", TP_CFG_INT, TP_OFF(redial_ms), 0, 86400000, 0,
	  NULL, 0,
	  "0", "0..86400000",
	  "a dialled connection whose peer failed or restarted is dialled again for new "
	  "transfers for up to this many ms (calls meanwhile get EAGAIN); 0 = never" },
	{ "TCPX_P2P_PROGRESS_THREAD", NULL, "progress_thread", TP_CFG_INT,
	  TP_OFF(progress_thread), 0, 1, 0, NULL, 0,
	  "0", "0|1",
	  "1 = a thread per session drives every transfer; callers post and return" },
	{ "TCPX_P2P_MSS", NULL, "mss", TP_CFG_INT, TP_OFF(mss), 512, 65536, 0, NULL, 0,
	  "7168", "512..65536",
	  "smallest TCP MSS on the path; chunks must fit the plugin's 2048 fragments "
	  "per receive at this MSS" },
	{ "TCPX_P2P_NICS", NULL, "nics", TP_CFG_PATH, TP_OFF(nics), 0, 0, 0, NULL, 0,
	  "auto", "auto|all|comma-separated device names or indices",
	  "plugin devices each connection stripes its channels over (channel i on the "
	  "i-th, round robin); auto = the devices closest to the GPU" },
	{ "TCPX_P2P_AUTH_TOKEN", NULL, "auth_token", TP_CFG_SECRET, TP_OFF(auth_token), 0, 0, 0,
	  NULL, 0,
	  "(none)", "any text; at least 16 bytes recommended",
	  "shared secret: peers must prove they hold it before any blob is sent or plugin "
	  "called; never sent, never shown" },
	{ "TCPX_P2P_PEER_MAX_ITEMS", NULL, "peer_max_items", TP_CFG_INT, TP_OFF(peer_max_items),
	  1, 1 << 24, 0, NULL, 0,
	  "65536", "1..16777216",
	  "per connection: transfers the peer may have announced and not yet finished here" },
	{ "TCPX_P2P_PEER_MAX_SEGMENTS", NULL, "peer_max_segments", TP_CFG_INT,
	  TP_OFF(peer_max_segments), 1, 1 << 26, 0, NULL, 0,
	  "1048576", "1..67108864",
	  "per connection: remote segments of those transfers this side holds (about 40 "
	  "bytes each)" },
	{ "TCPX_P2P_PEER_MAX_NOTIFS", NULL, "peer_max_notifs", TP_CFG_INT,
	  TP_OFF(peer_max_notifs), 1, 1 << 20, 0, NULL, 0,
	  "4096", "1..1048576",
	  "per connection: notifications received and not yet taken by notif_poll (at most "
	  "1 KiB each)" },
	{ "TCPX_P2P_PEER_MAX_CTL_BYTES", NULL, "peer_max_ctl_bytes", TP_CFG_SIZE,
	  TP_OFF(peer_max_ctl_bytes), 1 << 20, 1LL << 32, 0, NULL, 0,
	  "67108864", "1M..4096M (K, M, KiB, MiB suffixes = 1024-multiples)",
	  "per connection: control bytes waiting to go to the peer; an answer beyond it fails "
	  "the connection, a transfer posted beyond half of it gets EAGAIN" },
	{ "TCPX_P2P_LOG_LEVEL", "UCCL_TCPX_DEBUG", NULL, TP_CFG_LOG, 0, 0, 4, 0, NULL, 0,
	  "warn", "none|warn|info|debug|trace or 0..4",
	  "process-wide log level (UCCL_TCPX_DEBUG set to non-zero means debug)" },
};

#define TP_CFG_NROWS ((int)(sizeof(tp_cfg_rows) / sizeof(tp_cfg_rows[0])))

static atomic_int tp_alias_noticed[TP_CFG_NROWS];

/* Base 10 only, no leading blanks, no overflow; *rest is what follows. */
static int tp_parse_ll(const char *s, long long *v, const char **rest)
{
	char *end;
	const char *digits = (s[0] == '-' || s[0] == '+') ? s + 1 : s;

	if (!isdigit((unsigned char)digits[0]))
		return -1;
	errno = 0;
	*v = strtoll(s, &end, 10);
	if (errno == ERANGE)
		return -1;
	*rest = end;
	return 0;
}

static int tp_parse_size(const char *s, long long *v)
{
	static const struct {
		const char *suffix;
		long long mult;
	} units[] = { { "", 1 }, { "K", 1 << 10 }, { "KiB", 1 << 10 }, { "M", 1 << 20 },
		      { "MiB", 1 << 20 } };
	const char *rest;
	size_t i;

	if (tp_parse_ll(s, v, &rest))
		return -1;
	for (i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcasecmp(rest, units[i].suffix))
			continue;
		if (*v > LLONG_MAX / units[i].mult || *v < LLONG_MIN / units[i].mult)
			return -1;
		*v *= units[i].mult;
		return 0;
	}
	return -1;
}

static int tp_row_in_range(const struct tp_cfg_row *row, long long v)
{
	return (v >= row->min && v <= row->max) || (row->minus_one_ok && v == -1);
}

/* Text to a value (enum: its index); -1 if malformed or out of range. */
static int tp_row_parse(const struct tp_cfg_row *row, const char *text, long long *v)
{
	const char *rest;
	int i, level;

	switch (row->type) {
	case TP_CFG_INT:
		if (tp_parse_ll(text, v, &rest) || *rest)
			return -1;
		break;
	case TP_CFG_SIZE:
		if (tp_parse_size(text, v))
			return -1;
		break;
	case TP_CFG_ENUM:
		for (i = 0; i < row->nnames; i++) {
			if (!strcasecmp(text, row->names[i])) {
				*v = i;
				return 0;
			}
		}
		return -1;
	case TP_CFG_LOG:
		if (tp__log_level_parse(text, &level))
			return -1;
		*v = level;
		return 0;
	case TP_CFG_PATH:
	case TP_CFG_SECRET:
		*v = 0;
		return 0;
	}
	return tp_row_in_range(row, *v) ? 0 : -1;
}

static void *tp_field(const struct tp_cfg_row *row, tcpx_p2p_config *cfg)
{
	return (char *)cfg + row->offset;
}

static const void *tp_field_c(const struct tp_cfg_row *row, const tcpx_p2p_config *cfg)
{
	return (const char *)cfg + row->offset;
}

static void tp_row_store(const struct tp_cfg_row *row, tcpx_p2p_config *cfg, long long v,
			 const char *text)
{
	switch (row->type) {
	case TP_CFG_INT:
	case TP_CFG_ENUM:
		*(int *)tp_field(row, cfg) = (int)v;
		break;
	case TP_CFG_SIZE:
		*(size_t *)tp_field(row, cfg) = (size_t)v;
		break;
	case TP_CFG_PATH:
	case TP_CFG_SECRET:
		*(const char **)tp_field(row, cfg) = text;
		break;
	case TP_CFG_LOG:
		break;
	}
}

static void tp_config_defaults(tcpx_p2p_config *cfg)
{
	const struct tp_cfg_row *row;
	long long v = 0;

	memset(cfg, 0, sizeof(*cfg));
	cfg->struct_size = sizeof(*cfg);
	for (row = tp_cfg_rows; row < tp_cfg_rows + TP_CFG_NROWS; row++) {
		if (row->type == TP_CFG_PATH || row->type == TP_CFG_SECRET) {
			tp_row_store(row, cfg, 0, NULL);
			continue;
		}
		tp_row_parse(row, row->def, &v);
		tp_row_store(row, cfg, v, NULL);
	}
}

/* The value of one environment row, or NULL when unset (an empty value is
 * unset too, so that `VAR= cmd` restores the default). */
static const char *tp_row_getenv(int i, const char **used)
{
	const struct tp_cfg_row *row = &tp_cfg_rows[i];
	const char *text = getenv(row->name);

	*used = row->name;
	if (text && *text) {
		if (row->alias && getenv(row->alias))
			TP_DEBUG("config", "%s ignored: %s is set", row->alias, row->name);
		return text;
	}
	if (!row->alias)
		return NULL;
	text = getenv(row->alias);
	if (!text || !*text)
		return NULL;
	*used = row->alias;
	/* log.c gives UCCL_TCPX_DEBUG its own meaning and notice. */
	if (row->type != TP_CFG_LOG && !atomic_exchange(&tp_alias_noticed[i], 1))
		TP_INFO("config", "%s is deprecated; use %s", row->alias, row->name);
	return text;
}

static int config_init(tcpx_p2p_config *cfg)
{
	char detail[512] = "";
	int i, nbad = 0;

	if (!cfg)
		return tp__error(TCPX_P2P_EINVAL, "tcpx_p2p_config_init: cfg is NULL");
	tp__log_init();
	tp_config_defaults(cfg);

	for (i = 0; i < TP_CFG_NROWS; i++) {
		const struct tp_cfg_row *row = &tp_cfg_rows[i];
		const char *used, *text = tp_row_getenv(i, &used);
		long long v;

		if (!text || (row->type == TP_CFG_LOG && used == row->alias))
			continue;
		if (tp_row_parse(row, text, &v) == 0) {
			tp_row_store(row, cfg, v, text);
			continue;
		}
		TP_WARN("config", "%s=\"%.64s\" is not valid: expected %s; keeping the default %s",
			used, text, row->range, row->def);
		if (nbad++ == 0)
			snprintf(detail, sizeof(detail),
				 "%s%s%s%s=\"%.64s\" is not valid: expected %s; "
				 "keeping the default %s",
				 used, used == row->alias ? " (alias of " : "",
				 used == row->alias ? row->name : "", used == row->alias ? ")" : "",
				 text, row->range, row->def);
	}
	if (nbad > 1)
		return tp__error(TCPX_P2P_EINVAL, "%s (and %d more, see the log)", detail,
				 nbad - 1);
	if (nbad)
		return tp__error(TCPX_P2P_EINVAL, "%s", detail);
	return 0;
}

/*
 * tcpx_p2p_config_init has one version per size of the struct: a binary
 * built against the 0.1 header passes a struct that ends before
 * progress_thread, and must get exactly that much written (and that
 * struct_size, so that session_create reads no further).
 */
#define TP_CONFIG_V01_SIZE offsetof(tcpx_p2p_config, progress_thread)
#define TP_CONFIG_V02_SIZE offsetof(tcpx_p2p_config, peer_max_items) /* the first 0.5 field */
#define TP_CONFIG_V05_SIZE offsetof(tcpx_p2p_config, close_timeout_ms) /* the first 0.6 one */
#define TP_CONFIG_V06_SIZE offsetof(tcpx_p2p_config, heartbeat_ms) /* the first 0.7 one */
#define TP_CONFIG_V07_SIZE offsetof(tcpx_p2p_config, chunks_per_channel) /* the first 0.8 one */
#define TP_CONFIG_V08_SIZE offsetof(tcpx_p2p_config, redial_ms) /* the first 0.13 one */
/* The 0.8 struct ended with reserved_08 at the struct's alignment: a 0.8
 * caller's sizeof is exactly the offset of the first 0.13 field. */
_Static_assert(TP_CONFIG_V08_SIZE ==
		       ((offsetof(tcpx_p2p_config, reserved_08) + sizeof(int) +
			 _Alignof(tcpx_p2p_config) - 1) & ~(_Alignof(tcpx_p2p_config) - 1)),
	       "redial_ms must start after the 0.8 struct");
/* The 0.7 struct ended with stall_ms, padded to the struct's alignment
 * (reserved_07 names that padding): a 0.7 caller's sizeof is exactly the
 * offset of the first 0.8 field. */
_Static_assert(TP_CONFIG_V07_SIZE ==
		       ((offsetof(tcpx_p2p_config, stall_ms) + sizeof(int) +
			 _Alignof(tcpx_p2p_config) - 1) & ~(_Alignof(tcpx_p2p_config) - 1)),
	       "chunks_per_channel must start after the 0.7 struct's padding");
#define TP_CONFIG_V06_PADDED                                                                   \
	((TP_CONFIG_V06_SIZE + _Alignof(tcpx_p2p_config) - 1) & ~(_Alignof(tcpx_p2p_config) - 1))
_Static_assert(TP_CONFIG_V06_PADDED < sizeof(tcpx_p2p_config),
	       "a 0.6 caller's padded size must not be a whole 0.7 struct");
/* The 0.5 struct ended with require_plugin, padded to the struct's
 * alignment: the first 0.6 field must start where that padding ended, or a
 * 0.5 caller's struct_size (its sizeof) would cover it. */
_Static_assert(TP_CONFIG_V05_SIZE ==
		       ((offsetof(tcpx_p2p_config, require_plugin) + sizeof(int) +
			 _Alignof(tcpx_p2p_config) - 1) & ~(_Alignof(tcpx_p2p_config) - 1)),
	       "close_timeout_ms must start after the 0.5 struct's padding");

TCPX_P2P_API int tp__config_init_v13(tcpx_p2p_config *cfg)
{
	return config_init(cfg);
}
TP_SYMVER(tp__config_init_v13, "tcpx_p2p_config_init@@TCPX_P2P_0.13");

/* Writes exactly n bytes of the full struct, and n as struct_size. */
static int config_init_size(tcpx_p2p_config *cfg, size_t n)
{
	tcpx_p2p_config full;
	int rc;

	if (!cfg)
		return tp__error(TCPX_P2P_EINVAL, "tcpx_p2p_config_init: cfg is NULL");
	rc = config_init(&full);
	memcpy(cfg, &full, n);
	cfg->struct_size = n;
	return rc;
}

TCPX_P2P_API int tp__config_init_v08(tcpx_p2p_config *cfg)
{
	return config_init_size(cfg, TP_CONFIG_V08_SIZE);
}
TP_SYMVER(tp__config_init_v08, "tcpx_p2p_config_init@TCPX_P2P_0.8");

TCPX_P2P_API int tp__config_init_v07(tcpx_p2p_config *cfg)
{
	return config_init_size(cfg, TP_CONFIG_V07_SIZE);
}
TP_SYMVER(tp__config_init_v07, "tcpx_p2p_config_init@TCPX_P2P_0.7");

/* The 0.6 struct ended with close_timeout_ms; 0.7's first field follows
 * it directly, so a 0.6 caller's sizeof (padded) would cover it: its
 * entry point writes and says the size up to there. */
TCPX_P2P_API int tp__config_init_v06(tcpx_p2p_config *cfg)
{
	return config_init_size(cfg, TP_CONFIG_V06_SIZE);
}
TP_SYMVER(tp__config_init_v06, "tcpx_p2p_config_init@TCPX_P2P_0.6");

TCPX_P2P_API int tp__config_init_v05(tcpx_p2p_config *cfg)
{
	return config_init_size(cfg, TP_CONFIG_V05_SIZE);
}
TP_SYMVER(tp__config_init_v05, "tcpx_p2p_config_init@TCPX_P2P_0.5");

TCPX_P2P_API int tp__config_init_v02(tcpx_p2p_config *cfg)
{
	return config_init_size(cfg, TP_CONFIG_V02_SIZE);
}
TP_SYMVER(tp__config_init_v02, "tcpx_p2p_config_init@TCPX_P2P_0.2");

TCPX_P2P_API int tp__config_init_v01(tcpx_p2p_config *cfg)
{
	return config_init_size(cfg, TP_CONFIG_V01_SIZE);
}
TP_SYMVER(tp__config_init_v01, "tcpx_p2p_config_init@TCPX_P2P_0.1");

int tp__config_init(tcpx_p2p_config *cfg)
{
	return config_init(cfg);
}

/* A caller's struct, possibly older and smaller, over a current one: the
 * fields it lacks take their defaults and then the environment, so that a
 * binary built against 0.1 still honours TCPX_P2P_AUTH_TOKEN and the other
 * later variables (a malformed one was reported by config_init). */
static int tp_config_upgrade(const tcpx_p2p_config *in, tcpx_p2p_config *out)
{
	size_t n;

	if (in && in->struct_size < sizeof(*out))
		(void)config_init(out);
	else
		tp_config_defaults(out);
	if (!in)
		return 0;
	if (in->struct_size < offsetof(tcpx_p2p_config, gpu))
		return tp__error(TCPX_P2P_EINVAL,
				 "config struct_size %zu is too small "
				 "(set it to sizeof(tcpx_p2p_config))",
				 in->struct_size);
	n = in->struct_size < sizeof(*out) ? in->struct_size : sizeof(*out);
	/* A 0.6 caller that set struct_size to its own sizeof: that padded
	 * size covers where 0.7 put heartbeat_ms, padding bytes to it. */
	if (n == TP_CONFIG_V06_PADDED)
		n = TP_CONFIG_V06_SIZE;
	memcpy(out, in, n);
	out->struct_size = sizeof(*out);
	/* A caller built before 0.7 knows no notif_take: by default its peer
	 * may send it only notifications that tcpx_p2p_notif fits. */
	if (n <= offsetof(tcpx_p2p_config, notif_max_bytes) && !getenv("TCPX_P2P_NOTIF_MAX_BYTES"))
		out->notif_max_bytes = TCPX_P2P_NOTIF_MAX;
	return 0;
}

static long long tp_row_value(const struct tp_cfg_row *row, const tcpx_p2p_config *cfg)
{
	switch (row->type) {
	case TP_CFG_INT:
	case TP_CFG_ENUM:
		return *(const int *)tp_field_c(row, cfg);
	case TP_CFG_SIZE:
		/* Clamp so that huge values stay huge rather than wrapping. */
		if (*(const size_t *)tp_field_c(row, cfg) > (size_t)LLONG_MAX)
			return LLONG_MAX;
		return (long long)*(const size_t *)tp_field_c(row, cfg);
	case TP_CFG_LOG:
		return tp__log_level;
	case TP_CFG_PATH:
	case TP_CFG_SECRET:
		break;
	}
	return 0;
}

int tp__config_resolve(const tcpx_p2p_config *in, tcpx_p2p_config *out)
{
	const struct tp_cfg_row *row;
	tcpx_p2p_config tmp;
	int rc;

	if (!in || !out)
		return tp__error(TCPX_P2P_EINVAL, "config is NULL");
	rc = tp_config_upgrade(in, &tmp);
	for (row = tp_cfg_rows; rc == 0 && row < tp_cfg_rows + TP_CFG_NROWS; row++) {
		long long v;

		if (row->type == TP_CFG_PATH || row->type == TP_CFG_SECRET ||
		    row->type == TP_CFG_LOG)
			continue;
		v = tp_row_value(row, &tmp);
		if (!tp_row_in_range(row, v))
			rc = tp__error(TCPX_P2P_EINVAL,
				       "config.%s = %lld is out of range: expected %s", row->field,
				       v, row->range);
	}
	*out = tmp;
	return rc;
}

int tcpx_p2p_config_count(void)
{
	return TP_CFG_NROWS;
}

int tcpx_p2p_config_describe(const tcpx_p2p_config *cfg, int index, const char **env_name,
			     const char **help, char *value, size_t value_len)
{
	const struct tp_cfg_row *row;
	tcpx_p2p_config full;
	char buf[4096];
	const char *s;
	long long v;
	int rc, n;

	if (index < 0 || index >= TP_CFG_NROWS)
		return tp__error(TCPX_P2P_EINVAL, "config index %d out of range 0..%d", index,
				 TP_CFG_NROWS - 1);
	if (!value && value_len)
		return tp__error(TCPX_P2P_EINVAL, "value is NULL but value_len is %zu", value_len);
	rc = tp_config_upgrade(cfg, &full);
	if (rc)
		return rc;
	row = &tp_cfg_rows[index];
	v = tp_row_value(row, &full);

	switch (row->type) {
	case TP_CFG_ENUM:
		if (v >= 0 && v < row->nnames)
			n = snprintf(buf, sizeof(buf), "%s", row->names[v]);
		else
			n = snprintf(buf, sizeof(buf), "%lld", v);
		break;
	case TP_CFG_PATH:
		s = *(const char *const *)tp_field_c(row, &full);
		n = snprintf(buf, sizeof(buf), "%s", s ? s : row->def);
		break;
	case TP_CFG_SECRET:
		s = *(const char *const *)tp_field_c(row, &full);
		n = snprintf(buf, sizeof(buf), "%s", s && *s ? "(set)" : row->def);
		break;
	case TP_CFG_LOG:
		s = tp__log_level_name((int)v);
		n = s ? snprintf(buf, sizeof(buf), "%s", s) : snprintf(buf, sizeof(buf), "%lld", v);
		break;
	default:
		n = snprintf(buf, sizeof(buf), "%lld", v);
		break;
	}
	if (value && (n < 0 || (size_t)n >= value_len || (size_t)n >= sizeof(buf)))
		return tp__error(TCPX_P2P_EINVAL, "%s: value needs %d bytes, value_len is %zu",
				 row->name, n + 1, value_len);
	if (env_name)
		*env_name = row->name;
	if (help)
		*help = row->help;
	if (value)
		memcpy(value, buf, (size_t)n + 1);
	return 0;
}
