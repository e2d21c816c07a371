/* The library's one logging family: level, replaceable sink, env set-up. */
#include <pthread.h>
#include <stdint.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/log.h"
#include "util/log_level.h"
#include "util/error.h"

#define TP_LOG_LINE 1024

int tp__log_level = TCPX_P2P_LOG_WARN;

static const char *const tp_level_names[] = { "none", "warn", "info", "debug", "trace" };
static const char *const tp_level_tags[] = { "NONE", "WARN", "INFO", "DEBUG", "TRACE" };
#define TP_NLEVELS ((int)(sizeof(tp_level_names) / sizeof(tp_level_names[0])))

static void tp_default_sink(int level, const char *subsys, const char *msg, void *arg);

/* The sink is called with the lock held: user sinks need not be
 * thread-safe, and set_log() returning means the old sink is no longer in
 * use (its arg may be freed). */
static pthread_mutex_t tp_sink_lock = PTHREAD_MUTEX_INITIALIZER;
static tcpx_p2p_log_fn tp_sink = tp_default_sink;
static void *tp_sink_arg;
static pthread_once_t tp_log_once = PTHREAD_ONCE_INIT;

int tp__log_level_parse(const char *text, int *level)
{
	int i;

	if (!text)
		return -1;
	for (i = 0; i < TP_NLEVELS; i++) {
		if (!strcasecmp(text, tp_level_names[i]) ||
		    (text[0] == '0' + i && text[1] == '\0')) {
			*level = i;
			return 0;
		}
	}
	return -1;
}

const char *tp__log_level_name(int level)
{
	if (level < 0 || level >= TP_NLEVELS)
		return NULL;
	return tp_level_names[level];
}

static void tp_default_sink(int level, const char *subsys, const char *msg, void *arg)
{
	fprintf(stderr, "%s\n", msg);
}

static const char *tp_basename(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

__attribute__((format(printf, 5, 0)))
static void tp_log_emit(int level, const char *subsys, const char *file, int line,
			const char *fmt, va_list ap)
{
	char buf[TP_LOG_LINE];
	int n;

	n = snprintf(buf, sizeof(buf), "tcpx_p2p %s %s %s:%d ", tp_level_tags[level], subsys,
		     tp_basename(file), line);
	if (n < 0)
		return;
	if ((size_t)n < sizeof(buf))
		vsnprintf(buf + n, sizeof(buf) - (size_t)n, fmt, ap);

	pthread_mutex_lock(&tp_sink_lock);
	tp_sink(level, subsys, buf, tp_sink_arg);
	pthread_mutex_unlock(&tp_sink_lock);
}

static void tp_log_early(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Used while the once-routine runs, where tp__log would wait on itself. */
static void tp_log_early(int level, const char *fmt, ...)
{
	va_list ap;

	if (level > tp__log_level)
		return;
	va_start(ap, fmt);
	tp_log_emit(level, "log", __FILE__, __LINE__, fmt, ap);
	va_end(ap);
}

static void tp_log_init_once(void)
{
	const char *val = getenv("TCPX_P2P_LOG_LEVEL");
	const char *alias = getenv("UCCL_TCPX_DEBUG");
	int level;

	if (val && *val) {
		if (tp__log_level_parse(val, &level) == 0) {
			__atomic_store_n(&tp__log_level, level, __ATOMIC_RELAXED);
		} else {
			tp_log_early(TCPX_P2P_LOG_WARN,
				     "TCPX_P2P_LOG_LEVEL=\"%s\" is not valid: expected "
				     "none|warn|info|debug|trace or 0..4; keeping warn", val);
		}
		return;
	}
	if (alias && *alias) {
		/* UCCL's switch was "set to anything but 0 for debug output". */
		char *end;
		long v = strtol(alias, &end, 10);

		if (*end != '\0' || v != 0)
			__atomic_store_n(&tp__log_level, TCPX_P2P_LOG_DEBUG, __ATOMIC_RELAXED);
		tp_log_early(TCPX_P2P_LOG_INFO,
			     "UCCL_TCPX_DEBUG is deprecated; use TCPX_P2P_LOG_LEVEL=debug");
	}
}

void tp__log_init(void)
{
	pthread_once(&tp_log_once, tp_log_init_once);
}

void tp__log(int level, const char *subsys, const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	tp__log_init();
	/* The caller's check ran before the environment may have been read. */
	if (level <= TCPX_P2P_LOG_NONE || level >= TP_NLEVELS || level > tp__log_level)
		return;
	va_start(ap, fmt);
	tp_log_emit(level, subsys ? subsys : "-", file ? file : "?", line, fmt, ap);
	va_end(ap);
}

/* Call sites seen, by (site, line); a full table lets new sites through
 * unlimited rather than hold back lines it cannot count. */
#define TP_LOG_SITES 256

static struct {
	const char *site;
	int line;
	unsigned long seen, held;
	time_t last;
} tp_sites[TP_LOG_SITES];
static pthread_mutex_t tp_sites_lock = PTHREAD_MUTEX_INITIALIZER;

int tp__log_site_allow(const char *site, int line, time_t now, unsigned long *held)
{
	uintptr_t h = ((uintptr_t)site >> 4) * 31u + (unsigned)line;
	int allow = 1;

	*held = 0;
	pthread_mutex_lock(&tp_sites_lock);
	for (unsigned i = 0; i < TP_LOG_SITES; i++) {
		unsigned k = (unsigned)((h + i) % TP_LOG_SITES);

		if (tp_sites[k].site && (tp_sites[k].site != site || tp_sites[k].line != line))
			continue;
		if (!tp_sites[k].site) {
			tp_sites[k].site = site;
			tp_sites[k].line = line;
		}
		if (++tp_sites[k].seen <= TP_LOG_SITE_BURST) {
			tp_sites[k].last = now;
		} else if (now - tp_sites[k].last >= TP_LOG_SITE_PERIOD) {
			*held = tp_sites[k].held;
			tp_sites[k].held = 0;
			tp_sites[k].last = now;
		} else {
			tp_sites[k].held++;
			allow = 0;
		}
		break;
	}
	pthread_mutex_unlock(&tp_sites_lock);
	return allow;
}

int tcpx_p2p_set_log(tcpx_p2p_log_fn fn, void *arg, int level)
{
	if (level < TCPX_P2P_LOG_NONE || level > TCPX_P2P_LOG_TRACE)
		return tp__error(TCPX_P2P_EINVAL, "log level %d out of range 0..4", level);

	pthread_mutex_lock(&tp_sink_lock);
	tp_sink = fn ? fn : tp_default_sink;
	tp_sink_arg = fn ? arg : NULL;
	pthread_mutex_unlock(&tp_sink_lock);

	/* Read the environment now, into the new sink, so that it cannot
	 * later override the level the caller asks for here. */
	tp__log_init();
	/* TP_LOG reads the level without a lock: store only real changes, so
	 * that re-installing a sink at the same level races with nothing. */
	if (__atomic_load_n(&tp__log_level, __ATOMIC_RELAXED) != level)
		__atomic_store_n(&tp__log_level, level, __ATOMIC_RELAXED);
	return 0;
}
