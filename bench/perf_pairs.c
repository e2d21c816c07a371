/* tcpx_perf multi-session mode: one process drives npairs sessions (a GPU
 * each, or host memory), as NCCL does with every GPU of a node.  Each pair
 * is a thread running perf_run_pair with its own session and conns to the
 * peer's pair of the same index; the threads of one peer meet at a group
 * barrier before every timed iteration so the pairs transfer at once.  The
 * sessions share the one loaded plugin (src/net/plugin_load.c loads and
 * initialises a plugin file once per process). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "perf.h"

int perf_group_sync(struct perf_group *g)
{
	int gen, rc;

	pthread_mutex_lock(&g->lock);
	gen = g->generation;
	if (!g->failed && ++g->arrived == g->o->npairs) {
		g->arrived = 0;
		g->generation++;
		pthread_cond_broadcast(&g->cond);
	}
	while (!g->failed && g->generation == gen)
		pthread_cond_wait(&g->cond, &g->lock);
	rc = g->generation != gen ? 0 : -1;
	pthread_mutex_unlock(&g->lock);
	return rc;
}

struct pair_arg {
	struct perf_group *g;
	int pair;
};

static void *pair_thread(void *arg)
{
	struct pair_arg *a = arg;
	struct perf_group *g = a->g;
	int rc = perf_run_pair(g, a->pair);

	pthread_mutex_lock(&g->lock);
	if (rc && !g->failed) {
		g->failed = 1;
		g->rc = rc;
	}
	g->running--;
	pthread_cond_broadcast(&g->cond);
	pthread_mutex_unlock(&g->lock);
	return NULL;
}

/* Wait until every pair thread finished; after a failure give the rest
 * PERF_STOP_GRACE_MS.  Returns the number still running. */
static int supervise(struct perf_group *g)
{
	struct timespec until;
	int left;

	pthread_mutex_lock(&g->lock);
	while (g->running > 0 && !g->failed)
		pthread_cond_wait(&g->cond, &g->lock);
	perf_deadline(&until, PERF_STOP_GRACE_MS);
	while (g->running > 0)
		if (pthread_cond_timedwait(&g->cond, &g->lock, &until) == ETIMEDOUT)
			break;
	left = g->running;
	pthread_mutex_unlock(&g->lock);
	return left;
}

int perf_run_pairs(const struct perf_opts *o, int role, int report, perf_listening_fn *listening,
		   void *arg)
{
	struct perf_group g = { .o = o, .role = role, .report = report, .listening = listening,
				.arg = arg, .first = 1 };
	size_t n = (size_t)o->npairs, times = n * (size_t)o->sweep.iters;
	struct pair_arg args[PERF_MAX_PAIRS];
	pthread_t th[PERF_MAX_PAIRS];
	int k, started = 0, left, rc = -1;

	g.t0 = calloc(times, sizeof(*g.t0));
	g.t1 = calloc(times, sizeof(*g.t1));
	g.pi = calloc(n, sizeof(*g.pi));
	g.rows = calloc(n, sizeof(*g.rows));
	if (!g.t0 || !g.t1 || !g.pi || !g.rows) {
		perf_error("tcpx_perf: out of memory for %d pairs\n", o->npairs);
		goto free_arrays;
	}
	pthread_mutex_init(&g.lock, NULL);
	pthread_cond_init(&g.cond, NULL);
	for (k = 0; k < o->npairs; k++) {
		args[k].g = &g;
		args[k].pair = k;
		pthread_mutex_lock(&g.lock);
		g.running++;
		pthread_mutex_unlock(&g.lock);
		if (pthread_create(&th[k], NULL, pair_thread, &args[k])) {
			perf_error("tcpx_perf: cannot start the thread of pair %d\n", k);
			pthread_mutex_lock(&g.lock);
			g.running--;
			g.failed = 1;
			g.rc = -1;
			pthread_cond_broadcast(&g.cond);
			pthread_mutex_unlock(&g.lock);
			break;
		}
		started++;
	}
	left = supervise(&g);
	if (left > 0) {
		fprintf(stderr, "tcpx_perf: a pair failed; %d pair%s still blocked (waiting for "
			"the peer in set-up?) %d ms later: exiting\n", left, left > 1 ? "s are" : " is",
			PERF_STOP_GRACE_MS);
		fflush(NULL);
		/* Those threads cannot be joined; let them go with the process. */
		for (k = 0; k < started; k++)
			pthread_detach(th[k]);
		_exit(1);
	}
	for (k = 0; k < started; k++)
		pthread_join(th[k], NULL);
	rc = g.failed ? (g.rc ? g.rc : -1) : 0;
	pthread_cond_destroy(&g.cond);
	pthread_mutex_destroy(&g.lock);
free_arrays:
	free(g.rows);
	free(g.pi);
	free(g.t1);
	free(g.t0);
	return rc;
}
