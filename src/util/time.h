/* The library's one clock and its one deadline convention.  A deadline is
 * a time of tp__now_ns() (CLOCK_MONOTONIC, in ns); TP_NO_DEADLINE, the
 * farthest time, is none, so "passed?" and "the earlier of two" need no
 * special case.  A timeout_ms below 0 means none, as in the public API. */
#ifndef TP_UTIL_TIME_H
#define TP_UTIL_TIME_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

typedef int64_t tp_deadline;

#define TP_NO_DEADLINE INT64_MAX
#define TP_NS_PER_MS 1000000

static inline int64_t tp__now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Whole seconds of the same clock, for rate limits. */
static inline time_t tp__now_s(void)
{
	return (time_t)(tp__now_ns() / 1000000000);
}

/* timeout_ms from now; none for timeout_ms < 0. */
static inline tp_deadline tp__deadline_ms(int timeout_ms)
{
	if (timeout_ms < 0)
		return TP_NO_DEADLINE;
	return tp__now_ns() + (int64_t)timeout_ms * TP_NS_PER_MS;
}

static inline bool tp__deadline_passed(tp_deadline d)
{
	return tp__now_ns() >= d;
}

/* What is left as a poll() timeout: -1 for none, 0 once passed (a last
 * non-blocking look), else rounded up to whole ms so that a wait never
 * spins, at most INT_MAX. */
static inline int tp__deadline_left_ms(tp_deadline d)
{
	int64_t now, ms;

	if (d == TP_NO_DEADLINE)
		return -1;
	now = tp__now_ns();
	if (now >= d)
		return 0;
	ms = (d - now + TP_NS_PER_MS - 1) / TP_NS_PER_MS;
	return ms > INT_MAX ? INT_MAX : (int)ms;
}

/* A condition variable whose timed waits count on this clock. */
static inline int tp__cond_init(pthread_cond_t *cv)
{
	pthread_condattr_t attr;
	int rc = pthread_condattr_init(&attr);

	if (rc)
		return rc;
	rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	if (!rc)
		rc = pthread_cond_init(cv, &attr);
	pthread_condattr_destroy(&attr);
	return rc;
}

/* A time of tp__now_ns() as the timespec of pthread_cond_timedwait on a
 * condition variable made by tp__cond_init. */
static inline struct timespec tp__abs_time(int64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000), (long)(ns % 1000000000) };

	return ts;
}

#endif
