/* Finding, loading and sharing NCCL net plugins (one registry per process). */
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "net/plugin_common.h"
#include "util/config.h"
#include "util/error.h"
#include "util/log.h"

#define TP_WHY_MAX 256
#define TP_TRIED_MAX ((int)sizeof(((struct tp_net *)0)->tried))
#define TP_CAND_MAX 24

/* Where TCPX is installed, in the order tried (docs/configuration.md,
 * "Plugin search order", says where each comes from). */
static const char *const tp_tcpx_paths[] = {
	"/usr/local/tcpx/lib64/libnccl-net-tcpx.so", /* A3 images, or a copy made there */
	"/var/lib/tcpx/lib64/libnccl-net.so",        /* the installer's own directory */
	"/usr/local/nvidia/lib64/libnccl-net.so",    /* GKE: inside a pod */
	"/home/kubernetes/bin/nvidia/lib64/libnccl-net.so", /* GKE: on the node */
};
/* Then, as NCCL does when NCCL_NET_PLUGIN is unset, this name through the
 * dynamic linker's search path (LD_LIBRARY_PATH first). */
#define TP_NCCL_DEFAULT_PLUGIN "libnccl-net.so"

/* One per plugin file that loaded with a table; never freed (see unload).
 * net is the template each session's struct tp_net is copied from. */
struct tp_net_file {
	struct tp_net net;
	int started; /* init (up to v10) and devices have been called */
	int err;     /* ... and failed: every later load answers this */
	char why[TP_WHY_MAX];
	int refs;    /* sessions using it */
	struct tp_net_file *next;
};

static pthread_mutex_t tp_net_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tp_net_file *tp_net_list;
static atomic_int tp_fallback_warned;

/* Newest first: a plugin exporting several versions is driven by the best. */
static const struct {
	const char *sym;
	int abi;
	const struct tp_net_ops *ops;
} tp_net_versions[] = {
	{ "ncclNetPlugin_v12", 12, &tp__net_ops_v12 },
	{ "ncclNetPlugin_v11", 11, &tp__net_ops_v11 },
	{ "ncclNetPlugin_v10", 10, &tp__net_ops_v10 },
	{ "ncclNetPlugin_v9", 9, &tp__net_ops_v9 },
	{ "ncclNetPlugin_v8", 8, &tp__net_ops_v8 },
	{ "ncclNetPlugin_v7", 7, &tp__net_ops_v7 },
	{ "ncclNetPlugin_v6", 6, &tp__net_ops_v6 },
	{ "ncclNetPlugin_v5", 5, &tp__net_ops_v5 },
};

/* Plugins known to take fewer requests per comm than NCCL promised their
 * ABI would never exceed. */
static const struct {
	const char *prefix;
	int max;
} tp_known_limits[] = {
	{ "GPUDirectTCPX", 16 }, /* a 17th post fails: "unable to allocate requests" */
};

/* Every table version begins with its name. */
struct tp_net_head {
	const char *name;
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
	if (!tp__log_site_allow(file ? file : fmt, line, tp__now_s(), &held))
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
	/* "No such file or directory" says it; keep the list of files short. */
	if (!strncmp(err, "cannot open shared object file: ", 32))
		err += 32;
	if (strstr(err, "map") || strstr(err, "ermission"))
		snprintf(why, len, "%s; mounted noexec? copy it to /usr/local/tcpx/lib64", err);
	else
		snprintf(why, len, "%s", err);
}

static struct tp_net_file *find_file(void *dl)
{
	struct tp_net_file *f;

	for (f = tp_net_list; f; f = f->next)
		if (f->net.dl == dl)
			return f;
	return NULL;
}

/* NCCL's promise for the ABI, lowered to what the plugin is known to
 * take and to the library's own slots per comm. */
static int max_requests(const struct tp_net *net)
{
	int max = net->abi < 7 ? TP_NCCL_MAX_REQUESTS_V6 : TP_NCCL_MAX_REQUESTS_V7;
	size_t i;

	for (i = 0; i < sizeof(tp_known_limits) / sizeof(tp_known_limits[0]); i++)
		if (!strncmp(net->name, tp_known_limits[i].prefix,
			     strlen(tp_known_limits[i].prefix)) &&
		    tp_known_limits[i].max < max)
			max = tp_known_limits[i].max;
	return max < TP_MAX_WINDOW ? max : TP_MAX_WINDOW;
}

/* The first load of a file: init (once per process up to v10; from v11 on
 * the session's own init, already done by the caller) and devices.  A
 * failure sticks to the file, so later loads report it without calling
 * the plugin again. */
static void start_plugin(struct tp_net_file *f, struct tp_net *net)
{
	int ndev = 0, rc = 0;

	f->started = 1;
	/* A plugin that cannot start is EPLUGIN whatever its result says. */
	if (!net->ops->finalize && net->ops->init(net, plugin_log))
		rc = TCPX_P2P_EPLUGIN;
	else
		rc = net->ops->devices(net, &ndev);
	if (rc) {
		f->err = rc;
		snprintf(f->why, sizeof(f->why), "%s", tcpx_p2p_last_error());
		TP_WARN("net", "%s: %s", net->path, f->why);
		return;
	}
	TP_INFO("net", "loaded %s: plugin %s, ABI v%d, %d device(s), %d requests per comm",
		net->path, net->name, net->abi, ndev, net->max_requests);
}

/* A session's own view of the file (lock held). */
static int acquire(struct tp_net_file *f, struct tp_net **out)
{
	struct tp_net *net;
	int rc;

	if (f->err)
		return tp__error(f->err, "%s: %s", f->net.path, f->why);
	net = malloc(sizeof(*net));
	if (!net)
		return tp__error(TCPX_P2P_ENOMEM, "loading %s: out of memory", f->net.path);
	*net = f->net;
	if (net->ops->finalize) {
		rc = net->ops->init(net, plugin_log) ? TCPX_P2P_EPLUGIN : 0;
		if (rc) {
			char why[TP_WHY_MAX];

			snprintf(why, sizeof(why), "%s", tcpx_p2p_last_error());
			if (!f->started) {
				f->started = 1;
				f->err = rc;
				snprintf(f->why, sizeof(f->why), "%s", why);
			}
			TP_WARN("net", "%s: %s", net->path, why);
			free(net);
			return tp__error(rc, "%s: %s", f->net.path, why);
		}
	}
	if (!f->started) {
		start_plugin(f, net);
		if (f->err) {
			if (net->ops->finalize)
				net->ops->finalize(net);
			free(net);
			return tp__error(f->err, "%s: %s", f->net.path, f->why);
		}
	}
	f->refs++;
	*out = net;
	return 0;
}

/* The file a bare name resolved to, for logs and session_query. */
static void resolved_path(void *dl, const char *name, char *out, size_t len)
{
	struct link_map *map = NULL;

	if (!strchr(name, '/') && !dlinfo(dl, RTLD_DI_LINKMAP, &map) && map && map->l_name &&
	    map->l_name[0])
		name = map->l_name;
	snprintf(out, len, "%s", name);
}

/* 0 with *out set (new or known file), 1 when this file does not serve
 * (why says so; try the next), or a negative code. */
static int open_plugin(const char *path, struct tp_net_file **out, char *why, size_t why_len)
{
	struct tp_net_file *f;
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
	f = find_file(dl);
	if (f) {
		/* Only drops the count our dlopen added; the file holds its own. */
		dlclose(dl);
		*out = f;
		return 0;
	}
	for (i = 0; i < sizeof(tp_net_versions) / sizeof(tp_net_versions[0]); i++) {
		table = dlsym(dl, tp_net_versions[i].sym);
		if (table)
			break;
	}
	if (!table) {
		dlclose(dl);
		snprintf(why, why_len, "no ncclNetPlugin_v5..v12 symbol");
		return 1;
	}
	f = calloc(1, sizeof(*f));
	if (!f) {
		dlclose(dl);
		return tp__error(TCPX_P2P_ENOMEM, "loading %s: out of memory", path);
	}
	f->net.ops = tp_net_versions[i].ops;
	f->net.table = table;
	f->net.abi = tp_net_versions[i].abi;
	f->net.dl = dl;
	f->net.file = f;
	resolved_path(dl, path, f->net.path, sizeof(f->net.path));
	base = strrchr(f->net.path, '/');
	f->net.name = ((const struct tp_net_head *)table)->name;
	if (!f->net.name)
		f->net.name = base ? base + 1 : f->net.path;
	f->net.max_requests = max_requests(&f->net);
	f->next = tp_net_list;
	tp_net_list = f;
	*out = f;
	return 0;
}

/* "path (why)" onto the list of files tried, truncating quietly. */
static void note_tried(char *tried, size_t len, const char *path, const char *why)
{
	size_t used = strlen(tried);

	if (used < len)
		snprintf(tried + used, len - used, "%s%s (%s)", used ? "; " : "", path, why);
	TP_DEBUG("net", "plugin %s not used: %s", path, why);
}

/* The files to try, in order, with room for the names they are made of. */
struct tp_search {
	const char *cand[TP_CAND_MAX];
	int n;
	int emu;        /* the last candidate is the bundled emulator */
	const char *by; /* what chose the candidates, for the detail */
	char names[2048];
	size_t used;
};

/* prefix + name + suffix as the next candidate. */
static void add_cand(struct tp_search *sr, const char *prefix, const char *name,
		     const char *suffix)
{
	size_t room = sizeof(sr->names) - sr->used;
	int n;

	if (sr->n >= TP_CAND_MAX)
		return;
	n = snprintf(sr->names + sr->used, room, "%s%s%s", prefix, name, suffix);
	if (n < 0 || (size_t)n >= room)
		return;
	sr->cand[sr->n++] = sr->names + sr->used;
	sr->used += (size_t)n + 1;
}

/*
 * NCCL_NET_PLUGIN as NCCL reads it: a comma-separated list, each entry
 * tried as given (a path, or a file name for the dynamic linker's search)
 * and then, when it is a bare name (no '/', not lib*.so), as
 * libnccl-net-<name>.so.  "none" names no plugin.
 */
static void add_nccl_names(struct tp_search *sr, const char *list)
{
	char copy[1024], *save = NULL, *item;
	size_t len;

	snprintf(copy, sizeof(copy), "%s", list);
	for (item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		add_cand(sr, "", item, "");
		len = strlen(item);
		if (!strchr(item, '/') &&
		    (strncmp(item, "lib", 3) || len < 3 || strcmp(item + len - 3, ".so")))
			add_cand(sr, "libnccl-net-", item, ".so");
	}
}

static void build_search(struct tp_search *sr, const char *explicit_path, char *tried,
			 size_t tried_len)
{
	const char *nccl = getenv("NCCL_NET_PLUGIN");
	char bundled[PATH_MAX];
	size_t i;

	memset(sr, 0, sizeof(*sr));
	if (explicit_path && *explicit_path) {
		sr->by = "TCPX_P2P_PLUGIN";
		add_cand(sr, "", explicit_path, "");
		return;
	}
	if (nccl && *nccl && strcasecmp(nccl, "none")) {
		sr->by = "NCCL_NET_PLUGIN";
		add_nccl_names(sr, nccl);
		return;
	}
	sr->by = "the default search";
	if (!nccl || !*nccl) {
		for (i = 0; i < sizeof(tp_tcpx_paths) / sizeof(tp_tcpx_paths[0]); i++)
			add_cand(sr, "", tp_tcpx_paths[i], "");
		add_cand(sr, "", TP_NCCL_DEFAULT_PLUGIN, "");
	} else {
		note_tried(tried, tried_len, "NCCL_NET_PLUGIN=none", "no external plugin");
	}
	if (!bundled_path(bundled, sizeof(bundled))) {
		add_cand(sr, "", bundled, "");
		sr->emu = 1;
	} else {
		note_tried(tried, tried_len, TP_EMU_PLUGIN_FILE, "cannot locate libtcpx_p2p itself");
	}
}

static void warn_fallback(const struct tp_net *net)
{
	if (!atomic_exchange(&tp_fallback_warned, 1))
		TP_WARN("net", "no NCCL net plugin found, using the bundled TCP emulator %s, "
			"which is much slower than GPUDirect-TCPX (tried: %s). Name the plugin "
			"with TCPX_P2P_PLUGIN or NCCL_NET_PLUGIN; TCPX_P2P_REQUIRE_PLUGIN=1 makes "
			"this an error", net->path, net->tried[0] ? net->tried : "nothing");
	else
		TP_INFO("net", "no NCCL net plugin found, using the bundled TCP emulator %s",
			net->path);
}

int tp__net_load(const char *explicit_path, int require, struct tp_net **out)
{
	char why[TP_WHY_MAX], tried[TP_TRIED_MAX];
	struct tp_net_file *f = NULL;
	struct tp_search *sr;
	int i, rc;

	if (!out)
		return tp__error(TCPX_P2P_EINVAL, "plugin load: NULL output");
	tp__log_init();
	sr = malloc(sizeof(*sr));
	if (!sr)
		return tp__error(TCPX_P2P_ENOMEM, "plugin load: out of memory");
	tried[0] = '\0';
	build_search(sr, explicit_path, tried, sizeof(tried));

	pthread_mutex_lock(&tp_net_lock);
	for (i = 0; i < sr->n; i++) {
		int last_resort = sr->emu && i == sr->n - 1;

		if (last_resort && require) {
			rc = tp__error(TCPX_P2P_ENOPLUGIN,
				       "no NCCL net plugin could be loaded and "
				       "TCPX_P2P_REQUIRE_PLUGIN=1 forbids the bundled emulator %s; "
				       "tried %s", sr->cand[i], tried[0] ? tried : "nothing");
			goto unlock;
		}
		rc = open_plugin(sr->cand[i], &f, why, sizeof(why));
		if (rc < 0)
			goto unlock;
		if (rc > 0) {
			note_tried(tried, sizeof(tried), sr->cand[i], why);
			continue;
		}
		rc = acquire(f, out);
		if (rc)
			goto unlock;
		(*out)->fallback = last_resort;
		snprintf((*out)->tried, sizeof((*out)->tried), "%s", tried);
		if (last_resort)
			warn_fallback(*out);
		goto unlock;
	}
	rc = tp__error(TCPX_P2P_ENOPLUGIN, "no NCCL net plugin could be loaded (%s); tried %s",
		       sr->by, tried);
unlock:
	pthread_mutex_unlock(&tp_net_lock);
	free(sr);
	return rc;
}

/* The file and its dl handle stay for the life of the process: plugins
 * (TCPX included) start helper threads in init and on connect that are never
 * joined, so dlclose could unmap code those threads still run.  NCCL never
 * unloads its net plugin for the same reason.  A later load of the file
 * finds it and reuses it without calling a once-per-process init again. */
void tp__net_unload(struct tp_net *net)
{
	if (!net)
		return;
	if (net->ops->finalize)
		net->ops->finalize(net);
	pthread_mutex_lock(&tp_net_lock);
	if (net->file->refs > 0)
		net->file->refs--;
	pthread_mutex_unlock(&tp_net_lock);
	free(net);
}

int tp__net_cap_windows(const struct tp_net *net, int *send_window, int *recv_window)
{
	int cap = net->max_requests;

	if (*send_window > cap || *recv_window > cap) {
		TP_INFO("net", "windows lowered to %d requests per comm for %s (ABI v%d)", cap,
			net->name, net->abi);
		if (*send_window > cap)
			*send_window = cap;
		if (*recv_window > cap)
			*recv_window = cap;
	}
	return cap;
}
