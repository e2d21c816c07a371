/* What every benchmark here shares: number parsing and result statistics
 * (no dependency on the library, so nccl_pair uses it too). */
#ifndef TP_BENCH_UTIL_H
#define TP_BENCH_UTIL_H

#include <stddef.h>

/* "64M", "512K", "1G", "4096", "2MiB": K/M/G are powers of 2^10. */
int bench_parse_size(const char *s, size_t *out);
/* Whole decimal number in [lo, hi], nothing after it. */
int bench_parse_int(const char *s, int lo, int hi, int *out);

/* The size sweep and iteration flags every benchmark takes, as in
 * nccl-tests: -s/--size, -b/--min-bytes, -e/--max-bytes, -f/--step-factor,
 * -n/--iters, -w/--warmup. */
struct bench_sweep {
	size_t min_bytes, max_bytes;
	double factor;
	int iters, warmup;
};

#define BENCH_SWEEP_SHORTOPTS "s:b:e:f:n:w:"
#define BENCH_SWEEP_LONGOPTS                                                       \
	{ "size", 1, NULL, 's' }, { "min-bytes", 1, NULL, 'b' },                   \
	{ "max-bytes", 1, NULL, 'e' }, { "step-factor", 1, NULL, 'f' },             \
	{ "iters", 1, NULL, 'n' }, { "warmup", 1, NULL, 'w' }
#define BENCH_SWEEP_USAGE                                                          \
	"  -s, --size N           one size (K/M/G = 2^10/2^20/2^30)\n"                 \
	"  -b, --min-bytes N      sweep start (default 64M)\n"                         \
	"  -e, --max-bytes N      sweep end\n"                                         \
	"  -f, --step-factor F    sweep multiplier (default 2)\n"                      \
	"  -n, --iters N          timed iterations per size (default 20)\n"            \
	"  -w, --warmup N         untimed iterations first (default 3)\n"

void bench_sweep_defaults(struct bench_sweep *w);
/* Option c with its argument: 1 handled, 0 not a sweep option, -1 bad
 * value (reported on stderr under prog's name). */
int bench_sweep_flag(struct bench_sweep *w, int c, const char *arg, const char *prog);
/* After parsing: max below min means just min. */
void bench_sweep_finish(struct bench_sweep *w);
/* The size after `size` (at least size + 1). */
size_t bench_sweep_next(const struct bench_sweep *w, size_t size);

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

/* Seconds on CLOCK_MONOTONIC. */
double bench_now_s(void);

struct rusage;
/* The CPU time (user + system, µs) and context switches this process
 * spent between two getrusage(RUSAGE_SELF) readings, per unit of work:
 * "%.1f voluntary, %.1f involuntary context switches, %.1f us of CPU (user
 * %.1f, system %.1f)", the --switches line of tcpx_perf and tcp_probe. */
void bench_rusage_line(char *buf, size_t len, const struct rusage *a, const struct rusage *b,
		       double units);

#endif
