/* tcpx_perf's failures.  Every error a peer reports goes through
 * perf_error: the first is printed and starts the stop of the run; later
 * ones from other threads are its consequences (a connection the failing
 * side closed, a dial it will never answer) and stay quiet, so the first
 * error is the one the user reads.  Loopback and multi-session runs give
 * the rest PERF_STOP_GRACE_MS to unwind after it, then exit: an accept or
 * a dial waiting for a peer that will never come cannot be interrupted. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "perf.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int failed;
static pthread_t first; /* the thread that failed first: it may say more */
static perf_failure_fn *hook;
static void *hook_arg;

void perf_error(const char *fmt, ...)
{
	perf_failure_fn *fn = NULL;
	va_list ap;
	int quiet;

	pthread_mutex_lock(&lock);
	quiet = failed && !pthread_equal(first, pthread_self());
	if (!failed) {
		failed = 1;
		first = pthread_self();
		fn = hook;
	}
	pthread_mutex_unlock(&lock);
	if (!quiet) {
		va_start(ap, fmt);
		vfprintf(stderr, fmt, ap);
		va_end(ap);
	}
	if (fn)
		fn(hook_arg);
}

void perf_on_failure(perf_failure_fn *fn, void *arg)
{
	pthread_mutex_lock(&lock);
	hook = fn;
	hook_arg = arg;
	pthread_mutex_unlock(&lock);
}

#if TP_PERF_TEST_HOOKS
/* TCPX_P2P_PERF_TEST_FAIL=ROLE:POINT (test builds only): that peer fails
 * there as if its GPU had gone, so the tests can check on a machine without
 * one that the other peer stops and this is the error shown. */
int perf_test_fail(int role, const char *point)
{
	const char *v = getenv("TCPX_P2P_PERF_TEST_FAIL");
	const char *name = role ? "client" : "server";
	size_t n = strlen(name);

	if (!v || strncmp(v, name, n) || v[n] != ':' || strcmp(v + n + 1, point))
		return 0;
	perf_error("tcpx_perf: %s: injected failure at %s (TCPX_P2P_PERF_TEST_FAIL)\n", name,
		   point);
	return -1;
}
#else
int perf_test_fail(int role, const char *point)
{
	return 0;
}
#endif

void perf_deadline(struct timespec *ts, int ms)
{
	clock_gettime(CLOCK_REALTIME, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (long)(ms % 1000) * 1000000;
	if (ts->tv_nsec >= 1000000000) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000;
	}
}
