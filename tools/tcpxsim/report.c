/* What the simulator tells: stderr lines, contract violations, counters
 * (report.h). */
#include "report.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "settings.h"

struct tcpxsim_stats sim_stats;

static void (*hook)(int fd, int what);

void sim_say(const char *fmt, ...)
{
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n > sizeof(line) - 2)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	ssize_t k = write(STDERR_FILENO, line, (size_t)n);
	(void)k;
}

int sim_violation(int err, const char *fmt, ...)
{
	char what[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	STAT_ADD(violations, 1);
	sim_say("tcpxsim: contract violation: %s", what);
	if (sim_cfg.strict) {
		sim_say("tcpxsim: aborting (TCPXSIM_STRICT=0 makes this an error return)");
		abort();
	}
	errno = err;
	return -1;
}

void sim_test_hook(int fd, int what)
{
	void (*fn)(int, int) = __atomic_load_n(&hook, __ATOMIC_ACQUIRE);
	if (fn)
		fn(fd, what);
}

void tcpxsim_stats_get(struct tcpxsim_stats *out)
{
	uint64_t *to = (uint64_t *)out, *from = (uint64_t *)&sim_stats;
	for (size_t i = 0; i < sizeof(*out) / sizeof(uint64_t); i++)
		to[i] = __atomic_load_n(&from[i], __ATOMIC_RELAXED);
}

void tcpxsim_set_test_hook(void (*fn)(int fd, int what))
{
	__atomic_store_n(&hook, fn, __ATOMIC_RELEASE);
}
