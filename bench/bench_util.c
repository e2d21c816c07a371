#include "bench_util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <time.h>

int bench_parse_size(const char *s, size_t *out)
{
	char *end;
	unsigned long long v;
	unsigned shift = 0;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *s == '-')
		return -1;
	switch (*end) {
	case 'G': case 'g': shift = 30; end++; break;
	case 'M': case 'm': shift = 20; end++; break;
	case 'K': case 'k': shift = 10; end++; break;
	default: break;
	}
	if (*end == 'i' && end[1] == 'B')
		end += 2;
	else if (*end == 'B')
		end++;
	if (*end || (shift && v > (~0ull >> shift)))
		return -1;
	*out = (size_t)(v << shift);
	return 0;
}

int bench_parse_int(const char *s, int lo, int hi, int *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		return -1;
	*out = (int)v;
	return 0;
}

void bench_sweep_defaults(struct bench_sweep *w)
{
	w->min_bytes = w->max_bytes = 64u << 20;
	w->factor = 2.0;
	w->iters = 20;
	w->warmup = 3;
}

static int bad(const char *prog, const char *opt, const char *val)
{
	fprintf(stderr, "%s: bad value for %s: '%s'\n", prog, opt, val);
	return -1;
}

int bench_sweep_flag(struct bench_sweep *w, int c, const char *arg, const char *prog)
{
	char *end;

	switch (c) {
	case 's':
		if (bench_parse_size(arg, &w->min_bytes))
			return bad(prog, "--size", arg);
		w->max_bytes = w->min_bytes;
		return 1;
	case 'b':
		return bench_parse_size(arg, &w->min_bytes) ? bad(prog, "--min-bytes", arg) : 1;
	case 'e':
		return bench_parse_size(arg, &w->max_bytes) ? bad(prog, "--max-bytes", arg) : 1;
	case 'f':
		w->factor = strtod(arg, &end);
		return *end || !(w->factor > 1.0) ? bad(prog, "--step-factor", arg) : 1;
	case 'n':
		return bench_parse_int(arg, 1, 1 << 24, &w->iters) ? bad(prog, "--iters", arg) : 1;
	case 'w':
		return bench_parse_int(arg, 0, 1 << 24, &w->warmup) ? bad(prog, "--warmup", arg) : 1;
	default:
		return 0;
	}
}

void bench_sweep_finish(struct bench_sweep *w)
{
	if (w->max_bytes < w->min_bytes)
		w->max_bytes = w->min_bytes;
}

size_t bench_sweep_next(const struct bench_sweep *w, size_t size)
{
	size_t n = (size_t)((double)(size ? size : 1) * w->factor);

	return n > size ? n : size + 1;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double pct(const double *v, int n, double p)
{
	int k = (int)(p / 100.0 * n + 0.999999) - 1;

	return v[k < 0 ? 0 : (k >= n ? n - 1 : k)];
}

void bench_stats(struct bench_row *r, double *us, size_t bytes_per_iter)
{
	double sum = 0;
	int i;

	for (i = 0; i < r->iters; i++)
		sum += us[i];
	qsort(us, (size_t)r->iters, sizeof(*us), cmp_double);
	r->avg_us = sum / r->iters;
	r->p50_us = pct(us, r->iters, 50);
	r->p99_us = pct(us, r->iters, 99);
	r->gbps = r->avg_us > 0 ? (double)bytes_per_iter / (r->avg_us * 1e3) : 0;
}

double bench_now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double tv_us(const struct timeval *tv)
{
	return (double)tv->tv_sec * 1e6 + (double)tv->tv_usec;
}

void bench_rusage_line(char *buf, size_t len, const struct rusage *a, const struct rusage *b,
		       double units)
{
	double user = (tv_us(&b->ru_utime) - tv_us(&a->ru_utime)) / units;
	double sys = (tv_us(&b->ru_stime) - tv_us(&a->ru_stime)) / units;

	snprintf(buf, len, "%.1f voluntary, %.1f involuntary context switches, %.1f us of CPU "
		 "(user %.1f, system %.1f)", (double)(b->ru_nvcsw - a->ru_nvcsw) / units,
		 (double)(b->ru_nivcsw - a->ru_nivcsw) / units, user + sys, user, sys);
}
