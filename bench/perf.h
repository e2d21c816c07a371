/* tcpx_perf: options, one peer's run, and reporting. */
#ifndef TP_BENCH_PERF_H
#define TP_BENCH_PERF_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "bench_mem.h"
#include "bench_util.h"
#include "tcpx_p2p.h"

enum perf_mode { PERF_SERVER, PERF_CLIENT, PERF_LOOPBACK, PERF_AUTO };

#define PERF_MAX_CONNS 64
#define PERF_MAX_INFLIGHT 64 /* --inflight: transfers posted at once per conn */
#define PERF_MAX_PAIRS 64
#define PERF_KV_MAX_SIZES 16

/* tcpx_perf kv: the KV-cache mover (perf_kv.c).  The pool of each peer is
 * layers x 2 (K, V) x pool_blocks / (2 layers) blocks; a batch moves
 * `blocks` blocks, blocks / (2 layers) block ids in every layer's K and V. */
struct perf_kv_opts {
	int on;                              /* "tcpx_perf kv ..." */
	int layers;                          /* --layers */
	size_t block[PERF_KV_MAX_SIZES];     /* --block-size list, one table row each */
	int nblock;
	int blocks;                          /* --blocks: per batch */
	int pool_blocks;                     /* --pool-blocks (0: 4 x blocks) */
	int read;                            /* --op read */
	int prep;                            /* --prep: post, prepared and strided forms */
	uint64_t seed;                       /* --seed */
};

struct perf_opts {
	enum perf_mode mode;
	const char *host;     /* client: peer to dial */
	const char *bind;     /* server: address to listen on */
	uint16_t port;
	struct bench_sweep sweep;
	int cuda;             /* --mem cuda */
	int pinned;           /* --mem pinned: mapped host memory, session on --gpu */
	int pin;              /* --mem pin: malloc'd host memory the library page-locks at
			       * registration (TCPX_P2P_MR_PIN), session on --gpu */
	int gpu[2];           /* server/client GPU (loopback: both) */
	int verify, bidir, dump_config, quiet;
	int stats;            /* --stats: print the session's counters after the run */
	int switches;         /* --switches: context switches per transfer, per size */
	int numa;             /* node, BENCH_NUMA_AUTO (the GPU's) or BENCH_NUMA_OFF */
	int conns;            /* connections between the peers, 1..PERF_MAX_CONNS */
	int inflight;         /* each conn's share as this many transfers at once */
	const char *json;     /* file for results, "-" = stdout */
	int timeout_ms;
	tcpx_p2p_config cfg;  /* library settings after env + flags */
	/* Multi-session mode (--pairs N or --gpus LIST): npairs sessions in
	 * this process, a thread each; pair k listens on port + k (server) or
	 * dials pair_ports[k] when set, else port + k (client). */
	int multi;
	int npairs;                       /* 1 unless multi */
	int pair_gpu[PERF_MAX_PAIRS];     /* --gpus; -1 with --pairs (host memory) */
	const uint16_t *pair_ports;       /* loopback: the server pairs' ports */
	int sized;                        /* a sweep size flag was given */
	struct perf_kv_opts kv;
};

/* After the first failure of a run, how long the rest of it (the other
 * side of a loopback, the other pairs) gets to unwind on its own before the
 * process exits without it. */
#define PERF_STOP_GRACE_MS 500

/* Report an error (perf_fail.c): printed if it is the run's first or comes
 * from the thread that failed first; the first also calls the hook. */
void perf_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
typedef void perf_failure_fn(void *arg);
/* Called once, on the run's first failure (loopback: wakes its supervisor). */
void perf_on_failure(perf_failure_fn *fn, void *arg);
/* Test builds: -1 (said why) when TCPX_P2P_PERF_TEST_FAIL names this role
 * ("server"/"client") and point ("connect": the server once it listens,
 * the client before it dials; "run": the first timed iteration); else 0. */
int perf_test_fail(int role, const char *point);
/* ts = CLOCK_REALTIME ms from now, for pthread_cond_timedwait. */
void perf_deadline(struct timespec *ts, int ms);

/* Parse argv (and TCPX_P2P_PERF_* / launcher environment).
 * Returns 0, 1 when the program should exit successfully (--help), or -1. */
int perf_parse(int argc, char **argv, struct perf_opts *o);
void perf_dump_config(const struct perf_opts *o, FILE *f);


/* Called by a server (pair `pair`, 0 in the single mode) once it listens. */
typedef void perf_listening_fn(void *arg, int pair, uint16_t port);

/* Run one peer: role 0 = server (receiver), 1 = client (sender).  Prints
 * the table when `report` is set.  Returns 0, a TCPX_P2P_E* code, or -1
 * (verification). */
int perf_run(const struct perf_opts *o, int role, int report, perf_listening_fn *listening,
	     void *arg);

/* The kv mode's peer: role 0 = target (exports its pool, is written to or
 * read from), 1 = initiator (posts the batches; reports).  Returns as
 * perf_run. */
int perf_kv_run(const struct perf_opts *o, int role, int report, perf_listening_fn *listening,
		void *arg);

/* What one peer's run reports besides the rows. */
struct perf_peer_info {
	int role;                     /* 0 server, 1 client */
	tcpx_p2p_session_info session;
	int numa_node;                /* bound node, -1 none */
	const char *numa_why;
	double setup_ms;              /* first dial/accept until all conns exist */
};

/* The pairs of one peer in multi-session mode: their threads meet at
 * perf_group_sync before every timed iteration, so all pairs transfer at
 * once, and record when each iteration started and ended. */
struct perf_group {
	const struct perf_opts *o;
	int role, report;
	perf_listening_fn *listening;
	void *arg;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int arrived, generation;
	int failed;                 /* a pair failed: every sync returns -1 */
	int running;                /* pair threads not yet finished */
	int rc;                     /* the first failing pair's code */
	double *t0, *t1;            /* [pair * iters + it], seconds */
	struct perf_peer_info *pi;  /* per pair, once connected */
	struct bench_row *rows;     /* per pair, the current size */
	FILE *json;
	int first;                  /* no JSON record written yet */
};

/* Run o->npairs sessions of one peer, a thread each, and report the per-pair
 * table with the aggregate.  Returns 0 or the first pair's failure; exits
 * the process (status 1) when, after a failure, pairs stay blocked in
 * set-up (an accept or dial cannot be interrupted). */
int perf_run_pairs(const struct perf_opts *o, int role, int report, perf_listening_fn *listening,
		   void *arg);
/* One pair's thread body (perf_run.c). */
int perf_run_pair(struct perf_group *g, int pair);
/* 0 once every pair arrived; -1 when a pair failed. */
int perf_group_sync(struct perf_group *g);
/* Reporter: after every pair stored its row of this size. */
void perf_group_report(struct perf_group *g, size_t size);
void perf_group_header(struct perf_group *g);

void perf_print_header(const struct perf_opts *o, const struct perf_peer_info *pi);
/* --stats: the session's counters (tcpx_p2p_session_stats), as comment lines. */
void perf_print_stats(const struct perf_opts *o, int role, const tcpx_p2p_stats *st);
void perf_print_row(const struct perf_opts *o, const struct bench_row *r);
int perf_json_open(const struct perf_opts *o, FILE **f);
/* pair < 0: the single mode's record; else that pair's record. */
void perf_json_row(FILE *f, const struct perf_opts *o, const struct perf_peer_info *pi,
		   const struct bench_row *r, int first, int pair);
/* Multi-session mode: the aggregate over all pairs. */
void perf_json_aggregate(FILE *f, const struct perf_opts *o, const struct perf_group *g,
			 const struct bench_row *r);
void perf_json_close(FILE *f);

/* --mem as given: "host", "cuda", "pinned" or "pin"; the bench_mem kind;
 * whether the session needs a GPU; the registration options. */
static inline const char *perf_mem_name(const struct perf_opts *o)
{
	return o->cuda ? "cuda" : o->pinned ? "pinned" : o->pin ? "pin" : "host";
}

static inline int perf_mem_on_gpu(const struct perf_opts *o)
{
	return o->cuda || o->pinned || o->pin;
}

static inline const tcpx_p2p_mr_params *perf_mr_params(const struct perf_opts *o)
{
	static const tcpx_p2p_mr_params pin = { sizeof(tcpx_p2p_mr_params), TCPX_P2P_MR_PIN };

	return o->pin ? &pin : NULL;
}

static inline enum bench_mem perf_mem_kind(const struct perf_opts *o)
{
	return o->cuda ? BENCH_CUDA : o->pinned ? BENCH_PINNED : BENCH_HOST;
}

#endif
