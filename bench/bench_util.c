#include "bench_util.h"

#include <errno.h>
#include <stdlib.h>

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
