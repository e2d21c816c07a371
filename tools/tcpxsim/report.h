/* What the simulator tells: lines on stderr, contract violations of the
 * program above it, its counters (tcpxsim_stats_get) and the test hook of
 * its own tests (tcpxsim_set_test_hook). */
#ifndef TCPXSIM_REPORT_H
#define TCPXSIM_REPORT_H

#include <stdint.h>

#include "tcpxsim.h"

#pragma GCC visibility push(hidden)

/* One line on stderr, written at once (no stdio buffer). */
void sim_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A breach of the devmem contract by the program above us.  Strict (the
 * default): it ends the process, loudly, as the test it is; else the call
 * fails with `err` (-1, errno set). */
int sim_violation(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The counters; atomic adds and loads only. */
extern struct tcpxsim_stats sim_stats;

/* Run the test hook, if one is set (`what`: 0 receive, 1 send). */
void sim_test_hook(int fd, int what);

#pragma GCC visibility pop

#define STAT_ADD(field, n) __atomic_fetch_add(&sim_stats.field, (uint64_t)(n), __ATOMIC_RELAXED)
#define STAT_SUB(field, n) __atomic_fetch_sub(&sim_stats.field, (uint64_t)(n), __ATOMIC_RELAXED)

#endif
