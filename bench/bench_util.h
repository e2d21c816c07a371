/* What every benchmark here shares: number parsing and result statistics
 * (no dependency on the library, so nccl_pair uses it too). */
#ifndef TP_BENCH_UTIL_H
#define TP_BENCH_UTIL_H

#include <stddef.h>

/* "64M", "512K", "1G", "4096", "2MiB": K/M/G are powers of 2^10. */
int bench_parse_size(const char *s, size_t *out);
/* Whole decimal number in [lo, hi], nothing after it. */
int bench_parse_int(const char *s, int lo, int hi, int *out);

/* One result row, as tcpx_perf and nccl_pair print it. */
struct bench_row {
	size_t size;
	int iters;
	double avg_us, p50_us, p99_us, gbps;
};

/* Fill r's statistics from r->iters per-iteration times in µs (sorted in
 * place); GB/s = bytes_per_iter / average time, 10^9 bytes/s.
 * Percentiles are nearest-rank. */
void bench_stats(struct bench_row *r, double *us, size_t bytes_per_iter);

#endif
