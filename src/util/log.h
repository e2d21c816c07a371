/* One logging family for the library: TP_WARN/INFO/DEBUG/TRACE(subsys, ...). */
#ifndef TP_UTIL_LOG_H
#define TP_UTIL_LOG_H

#include <time.h>

#include "tcpx_p2p.h"
#include "util/time.h"

extern int tp__log_level; /* enum tcpx_p2p_log_level; read without a lock */

void tp__log(int level, const char *subsys, const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

/* Reads TCPX_P2P_LOG_LEVEL (alias UCCL_TCPX_DEBUG) once per process. */
void tp__log_init(void);

/* Repeats of one call site of someone else's code (a plugin's log line):
 * the first TP_LOG_SITE_BURST lines pass, later ones are counted, and once
 * per TP_LOG_SITE_PERIOD seconds a line may pass again, carrying the count
 * of those held back since (*held).  `site` and `line` name the call site.
 * 1: log it; 0: drop it. */
#define TP_LOG_SITE_BURST 10
#define TP_LOG_SITE_PERIOD 10
int tp__log_site_allow(const char *site, int line, time_t now, unsigned long *held);

#define TP_LOG(lvl, ss, ...)                                                     \
	do {                                                                     \
		if ((lvl) <= __atomic_load_n(&tp__log_level, __ATOMIC_RELAXED))  \
			tp__log((lvl), (ss), __FILE__, __LINE__, __VA_ARGS__);   \
	} while (0)

#define TP_WARN(ss, ...) TP_LOG(TCPX_P2P_LOG_WARN, ss, __VA_ARGS__)
#define TP_INFO(ss, ...) TP_LOG(TCPX_P2P_LOG_INFO, ss, __VA_ARGS__)
#define TP_DEBUG(ss, ...) TP_LOG(TCPX_P2P_LOG_DEBUG, ss, __VA_ARGS__)
#ifdef NDEBUG
#define TP_TRACE(ss, ...) ((void)0)
#else
#define TP_TRACE(ss, ...) TP_LOG(TCPX_P2P_LOG_TRACE, ss, __VA_ARGS__)
#endif

/* Rate-limited warning for the data path: at most one line per second per
 * call site (racy by design: an occasional extra line is harmless). */
#define TP_WARN_RL(ss, ...)                                                      \
	do {                                                                     \
		static time_t tp__rl_last;                                       \
		time_t tp__rl_now = tp__now_s();                                 \
		if (tp__rl_now != tp__rl_last) {                                 \
			tp__rl_last = tp__rl_now;                                \
			TP_WARN(ss, __VA_ARGS__);                                \
		}                                                                \
	} while (0)

#endif
