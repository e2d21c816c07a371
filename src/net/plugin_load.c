/* Finding, loading and sharing NCCL net plugins (one registry per process). */
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "net/plugin_common.h"
#include "util/error.h"
#include "util/log.h"

#define TP_TCPX_PATH "/usr/local/tcpx/lib64/libnccl-net-tcpx.so"
#define TP_TCPX_PATH_VARLIB "/var/lib/tcpx/lib64/libnccl-net.so"
#define TP_WHY_MAX 256
#define TP_TRIED_MAX 1024

/* One per plugin file that loaded with a table; never freed (see unload). */
struct tp_net_entry {
	struct tp_net net;
	int err; /* init or devices failed: every later load answers this */
	char why[TP_WHY_MAX];
	struct tp_net_entry *next;
};

static pthread_mutex_t tp_net_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tp_net_entry *tp_net_list;

/* Newest first: a plugin exporting several versions is driven by the best. */
static const struct {
	const char *sym;
	int abi;
	const struct tp_net_ops *ops;
} tp_net_versions[] = {
	{ "ncclNetPlugin_v8", 8, &tp__net_ops_v8 },
	{ "ncclNetPlugin_v7", 7, &tp__net_ops_v7 },
	{ "ncclNetPlugin_v6", 6, &tp__net_ops_v6 },
	{ "ncclNetPlugin_v5", 5, &tp__net_ops_v5 },
};

/* Every table version begins with these two slots. */
struct tp_net_head {
	const char *name;
	ncclResult_t (*init)(ncclDebugLogger_t log);
};

static void plugin_log(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
		       const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static void plugin_log(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
		       const char *fmt, ...)
{
	char msg[1024];
	unsigned long held;
	va_list ap;
	size_t n;
	int lvl;

	switch (level) {
	case NCCL_LOG_WARN:
	case NCCL_LOG_ABORT:
		lvl = TCPX_P2P_LOG_WARN;
		break;
	case NCCL_LOG_VERSION:
		lvl = TCPX_P2P_LOG_INFO;
		break;
	case NCCL_LOG_INFO:
		/* TCPX logs every connection and request set-up at INFO. */
		lvl = TCPX_P2P_LOG_DEBUG;
		break;
	case NCCL_LOG_TRACE:
#ifdef NDEBUG
		return; /* as TP_TRACE: compiled out of release builds */
#else
		lvl = TCPX_P2P_LOG_TRACE;
		break;
#endif
	default:
		return;
	}
	/* Filter before formatting: the plugin may call this on its data path. */
	if (lvl > tp__log_level || !fmt)
		return;
	/* A plugin may log one line per request or per poll (TCPX warns on
	 * every host-memory task and every full task queue): past a burst,
	 * one line per call site per period, with the count held back. */
	if (!tp__log_site_allow(file ? file : fmt, line, time(NULL), &held))
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	n = strlen(msg);
	while (n && msg[n - 1] == '\n')
		msg[--n] = '\0';
	if (held)
		tp__log(lvl, "plugin", file ? file : "?", line, "%s (and %lu more like it in %d s)",
			msg, held, TP_LOG_SITE_PERIOD);
	else
		tp__log(lvl, "plugin", file ? file : "?", line, "%s", msg);
}

/* The bundled emulator lives beside libtcpx_p2p.so (both in lib/ of the
 * build tree and of an install); find our own file through one of our
 * functions.  Linked into a program, that is the program, whose link-map
 * name is empty (dladdr would offer argv[0], maybe relative to another
 * working directory), so ask the kernel. */
static int bundled_path(char *out, size_t len)
{
	struct link_map *map = NULL;
	char self[PATH_MAX];
	const char *file = NULL;
	const char *slash;
	Dl_info info;
	ssize_t n;

	if (dladdr1((void *)tp__net_load, &info, (void **)&map, RTLD_DL_LINKMAP) && map &&
	    map->l_name && strchr(map->l_name, '/')) {
		file = map->l_name;
	} else {
		n = readlink("/proc/self/exe", self, sizeof(self) - 1);
		if (n > 0) {
			self[n] = '\0';
			file = self;
		}
	}
	if (!file)
		return -1;
	slash = strrchr(file, '/');
	if (snprintf(out, len, "%.*s/%s", (int)(slash - file), file, TP_EMU_PLUGIN_FILE) >=
	    (int)len)
		return -1;
	return 0;
}

static void describe_dlerror(const char *path, char *why, size_t len)
{
	const char *err = dlerror();
	size_t plen = strlen(path);

	if (!err)
		err = "dlopen failed";
	/* glibc prefixes the file name, which the caller prints already. */
	if (!strncmp(err, path, plen) && err[plen] == ':')
		err += plen + 1 + (err[plen + 1] == ' ');
	if (strstr(err, "map") || strstr(err, "ermission"))
		snprintf(why, len, "%s; mounted noexec? copy it to /usr/local/tcpx/lib64", err);
	else
		snprintf(why, len, "%s", err);
}

static struct tp_net_entry *find_entry(void *dl)
{
	struct tp_net_entry *e;

	for (e = tp_net_list; e; e = e->next)
		if (e->net.dl == dl)
			return e;
	return NULL;
}

/* Call init once and devices once; a failure sticks to the entry so that
 * later loads of the file report it without calling init again. */
static void start_plugin(struct tp_net_entry *e)
{
	const struct tp_net_head *head = e->net.table;
	struct tp_net *net = &e->net;
	ncclResult_t r;
	int ndev = 0;

	if (head->init) {
		r = head->init(plugin_log);
		if (r != ncclSuccess) {
			e->err = TCPX_P2P_EPLUGIN;
			snprintf(e->why, sizeof(e->why), "plugin %s init failed: %s (%d)",
				 net->name, tp__net_result_name(r), (int)r);
			TP_WARN("net", "%s: %s", net->path, e->why);
			return;
		}
	}
	e->err = net->ops->devices(net, &ndev);
	if (e->err) {
		snprintf(e->why, sizeof(e->why), "%s", tcpx_p2p_last_error());
		TP_WARN("net", "%s: %s", net->path, e->why);
		return;
	}
	TP_INFO("net", "loaded %s: plugin %s, ABI v%d, %d device(s)", net->path, net->name,
		net->abi, ndev);
}

/* 0 with *out set (new or shared entry), 1 when this file does not serve
 * (why says so; try the next), or a negative code. */
static int open_plugin(const char *path, struct tp_net_entry **out, char *why, size_t why_len)
{
	struct tp_net_entry *e;
	const void *table = NULL;
	const char *base;
	size_t i;
	void *dl;

	dlerror();
	dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!dl) {
		describe_dlerror(path, why, why_len);
		return 1;
	}
	e = find_entry(dl);
	if (e) {
		/* Only drops the count our dlopen added; the entry holds its own. */
		dlclose(dl);
		*out = e;
		return 0;
	}
	for (i = 0; i < sizeof(tp_net_versions) / sizeof(tp_net_versions[0]); i++) {
		table = dlsym(dl, tp_net_versions[i].sym);
		if (table)
			break;
	}
	if (!table) {
		dlclose(dl);
		snprintf(why, why_len, "no ncclNetPlugin_v5..v8 symbol");
		return 1;
	}
	e = calloc(1, sizeof(*e));
	if (!e) {
		dlclose(dl);
		return tp__error(TCPX_P2P_ENOMEM, "loading %s: out of memory", path);
	}
	e->net.ops = tp_net_versions[i].ops;
	e->net.table = table;
	e->net.abi = tp_net_versions[i].abi;
	e->net.dl = dl;
	snprintf(e->net.path, sizeof(e->net.path), "%s", path);
	base = strrchr(path, '/');
	e->net.name = ((const struct tp_net_head *)table)->name;
	if (!e->net.name)
		e->net.name = base ? base + 1 : path;
	start_plugin(e);
	e->next = tp_net_list;
	tp_net_list = e;
	*out = e;
	return 0;
}

/* "path (why); " onto the list of files tried, truncating quietly. */
static void note_tried(char *tried, size_t len, const char *path, const char *why)
{
	size_t used = strlen(tried);

	if (used < len)
		snprintf(tried + used, len - used, "%s%s (%s)", used ? "; " : "", path, why);
	TP_DEBUG("net", "plugin %s not used: %s", path, why);
}

int tp__net_load(const char *explicit_path, struct tp_net **out)
{
	char bundled[PATH_MAX], why[TP_WHY_MAX], tried[TP_TRIED_MAX] = "";
	const char *paths[3];
	struct tp_net_entry *e = NULL;
	int npaths = 0, i, rc;

	if (!out)
		return tp__error(TCPX_P2P_EINVAL, "plugin load: NULL output");
	tp__log_init();
	if (explicit_path && *explicit_path) {
		paths[npaths++] = explicit_path;
	} else {
		paths[npaths++] = TP_TCPX_PATH;
		paths[npaths++] = TP_TCPX_PATH_VARLIB;
		if (!bundled_path(bundled, sizeof(bundled)))
			paths[npaths++] = bundled;
		else
			note_tried(tried, sizeof(tried), TP_EMU_PLUGIN_FILE,
				   "cannot locate libtcpx_p2p itself");
	}

	pthread_mutex_lock(&tp_net_lock);
	for (i = 0; i < npaths; i++) {
		rc = open_plugin(paths[i], &e, why, sizeof(why));
		if (rc < 0)
			goto unlock;
		if (rc > 0) {
			note_tried(tried, sizeof(tried), paths[i], why);
			continue;
		}
		if (e->err) {
			rc = tp__error(e->err, "%s: %s", e->net.path, e->why);
			goto unlock;
		}
		e->net.refs++;
		*out = &e->net;
		rc = 0;
		goto unlock;
	}
	rc = tp__error(TCPX_P2P_ENOPLUGIN, "no NCCL net plugin could be loaded; tried %s", tried);
unlock:
	pthread_mutex_unlock(&tp_net_lock);
	return rc;
}

/* The entry and its dl handle stay for the life of the process: plugins
 * (TCPX included) start helper threads in init and on connect that are never
 * joined, so dlclose could unmap code those threads still run.  NCCL never
 * unloads its net plugin for the same reason.  A later load of the file
 * finds the entry and reuses it without calling init again. */
void tp__net_unload(struct tp_net *net)
{
	if (!net)
		return;
	pthread_mutex_lock(&tp_net_lock);
	if (net->refs > 0)
		net->refs--;
	pthread_mutex_unlock(&tp_net_lock);
}
