/* Log level names, shared by log.c (which applies TCPX_P2P_LOG_LEVEL) and
 * config.c (which validates and describes it). */
#ifndef TP_UTIL_LOG_LEVEL_H
#define TP_UTIL_LOG_LEVEL_H

/* "none|warn|info|debug|trace" (any case) or "0".."4"; 0 or -1. */
int tp__log_level_parse(const char *text, int *level);
/* "none".."trace", or NULL for a level out of range. */
const char *tp__log_level_name(int level);

#endif
