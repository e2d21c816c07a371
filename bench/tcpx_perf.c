/* tcpx_perf: point-to-point bandwidth and latency through libtcpx_p2p.
 * Exit status: 0 success, 1 error or verification mismatch, 2 usage,
 * 77 --mem cuda, pinned or pin without a usable GPU. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_mem.h"
#include "perf.h"

/* Loopback: both peers in this process, a thread each, watched from main.
 * The first failure of either (perf_error) starts the stop: the other side
 * gets PERF_STOP_GRACE_MS to unwind, which it does at once where the
 * failing side closed its conns; one still blocked then, in an accept or a
 * dial for a peer that will never come, goes with the process. */
struct loopback {
	struct perf_opts side[2]; /* server (receiver), client */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int listening;   /* server pairs listening */
	int running;     /* sides started and not returned */
	int server_done; /* the server side returned */
	int failed;      /* either side failed */
	uint16_t port[PERF_MAX_PAIRS];
	int rc[2];
};

struct side_arg {
	struct loopback *lb;
	int role;
};

static void on_listening(void *arg, int pair, uint16_t port)
{
	struct loopback *lb = arg;

	pthread_mutex_lock(&lb->lock);
	lb->port[pair] = port;
	lb->listening++;
	pthread_cond_broadcast(&lb->cond);
	pthread_mutex_unlock(&lb->lock);
}

static void on_failure(void *arg)
{
	struct loopback *lb = arg;

	pthread_mutex_lock(&lb->lock);
	lb->failed = 1;
	pthread_cond_broadcast(&lb->cond);
	pthread_mutex_unlock(&lb->lock);
}

/* The server reports, in the kv mode the client (the initiator, which
 * times the batches). */
static int run_side(struct loopback *lb, int role)
{
	const struct perf_opts *o = &lb->side[role];
	perf_listening_fn *listening = role ? NULL : on_listening;

	if (o->kv.on)
		return perf_kv_run(o, role, role == 1, listening, lb);
	if (o->multi)
		return perf_run_pairs(o, role, role == 0, listening, lb);
	return perf_run(o, role, role == 0, listening, lb);
}

static void *side_thread(void *arg)
{
	struct side_arg *a = arg;
	struct loopback *lb = a->lb;
	int rc = run_side(lb, a->role);

	pthread_mutex_lock(&lb->lock);
	lb->rc[a->role] = rc;
	lb->failed |= rc != 0;
	lb->server_done |= a->role == 0;
	lb->running--;
	pthread_cond_broadcast(&lb->cond);
	pthread_mutex_unlock(&lb->lock);
	return NULL;
}

static int start_side(struct loopback *lb, struct side_arg *a, pthread_t *th)
{
	pthread_mutex_lock(&lb->lock);
	lb->running++;
	pthread_mutex_unlock(&lb->lock);
	if (pthread_create(th, NULL, side_thread, a) == 0)
		return 0;
	perf_error("tcpx_perf: loopback: cannot start the %s thread\n",
		   a->role ? "client" : "server");
	pthread_mutex_lock(&lb->lock);
	lb->running--;
	lb->failed = 1;
	pthread_mutex_unlock(&lb->lock);
	return -1;
}

/* Wait until both sides returned, or after a failure until the grace ends.
 * Returns the number of sides still running. */
static int supervise(struct loopback *lb)
{
	struct timespec until;
	int left;

	pthread_mutex_lock(&lb->lock);
	while (lb->running > 0 && !lb->failed)
		pthread_cond_wait(&lb->cond, &lb->lock);
	perf_deadline(&until, PERF_STOP_GRACE_MS);
	while (lb->running > 0)
		if (pthread_cond_timedwait(&lb->cond, &lb->lock, &until) == ETIMEDOUT)
			break;
	left = lb->running;
	pthread_mutex_unlock(&lb->lock);
	return left;
}

/* In multi-session mode the server's pairs listen on ports of their own
 * and the client's pair k dials pair k's. */
static int run_loopback(const struct perf_opts *o)
{
	struct loopback lb = { .side = { *o, *o } };
	struct side_arg arg[2] = { { &lb, 0 }, { &lb, 1 } };
	pthread_t th[2];
	int started = 0, ready, k;

	lb.side[0].bind = "127.0.0.1";
	lb.side[0].port = 0;
	lb.side[1].host = "127.0.0.1";
	lb.side[1].pair_ports = lb.port;
	pthread_mutex_init(&lb.lock, NULL);
	pthread_cond_init(&lb.cond, NULL);
	perf_on_failure(on_failure, &lb);
	if (start_side(&lb, &arg[0], &th[0]) == 0)
		started = 1;
	pthread_mutex_lock(&lb.lock);
	while (started && lb.listening < o->npairs && !lb.server_done && !lb.failed)
		pthread_cond_wait(&lb.cond, &lb.lock);
	ready = started && lb.listening == o->npairs && !lb.failed;
	pthread_mutex_unlock(&lb.lock);
	lb.side[1].port = lb.port[0];
	if (ready && start_side(&lb, &arg[1], &th[1]) == 0)
		started = 2;
	if (supervise(&lb) > 0) {
		/* A side still blocked cannot be joined: both go with the process
		 * (detached, so that a finished one is not a leak), the first
		 * error already printed. */
		for (k = 0; k < started; k++)
			pthread_detach(th[k]);
		fflush(NULL);
		_exit(1);
	}
	for (k = 0; k < started; k++)
		pthread_join(th[k], NULL);
	perf_on_failure(NULL, NULL);
	return lb.failed || !ready || lb.rc[0] || lb.rc[1] ? -1 : 0;
}

/* A server given --port 0 tells where it listens: the client needs it. */
static void print_listening(void *arg, int pair, uint16_t port)
{
	(void)arg;
	(void)pair;
	fprintf(stderr, "tcpx_perf: listening on port %u\n", (unsigned)port);
	fflush(stderr);
}

int main(int argc, char **argv)
{
	perf_listening_fn *listening;
	struct perf_opts o;
	int rc = perf_parse(argc, argv, &o);

	if (rc)
		return rc > 0 ? 0 : 2;
	/* A network program: a peer that goes away must not end this one
	 * through a plugin's send without MSG_NOSIGNAL (TCPX's). */
	signal(SIGPIPE, SIG_IGN);
	if (o.dump_config) {
		perf_dump_config(&o, stdout);
		return 0;
	}
	if (perf_mem_on_gpu(&o) && bench_gpu_count() == 0) {
		fprintf(stderr, "tcpx_perf: --mem %s: no usable CUDA device, skipping\n",
			perf_mem_name(&o));
		return 77;
	}
	switch (o.mode) {
	case PERF_LOOPBACK:
		rc = run_loopback(&o);
		break;
	case PERF_SERVER:
		listening = o.port ? NULL : print_listening;
		if (o.kv.on)
			rc = perf_kv_run(&o, 0, 1, listening, NULL);
		else if (o.multi)
			rc = perf_run_pairs(&o, 0, 1, NULL, NULL);
		else
			rc = perf_run(&o, 0, 1, listening, NULL);
		break;
	default:
		if (o.kv.on)
			rc = perf_kv_run(&o, 1, 1, NULL, NULL);
		else if (o.multi)
			rc = perf_run_pairs(&o, 1, 1, NULL, NULL);
		else
			rc = perf_run(&o, 1, 1, NULL, NULL);
		break;
	}
	return rc ? 1 : 0;
}
