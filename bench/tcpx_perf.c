/* tcpx_perf: point-to-point bandwidth and latency through libtcpx_p2p.
 * Exit status: 0 success, 1 error or verification mismatch, 2 usage,
 * 77 --mem cuda, pinned or pin without a usable GPU. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "bench_mem.h"
#include "perf.h"

struct loopback {
	const struct perf_opts *o;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int listening;   /* server pairs listening */
	int done;        /* the server side returned */
	uint16_t port[PERF_MAX_PAIRS];
	int rc;
};

static void on_listening(void *arg, int pair, uint16_t port)
{
	struct loopback *lb = arg;

	pthread_mutex_lock(&lb->lock);
	lb->port[pair] = port;
	lb->listening++;
	pthread_cond_signal(&lb->cond);
	pthread_mutex_unlock(&lb->lock);
}

static void *server_thread(void *arg)
{
	struct loopback *lb = arg;
	int rc;

	if (lb->o->kv.on)
		rc = perf_kv_run(lb->o, 0, 0, on_listening, lb);
	else if (lb->o->multi)
		rc = perf_run_pairs(lb->o, 0, 1, on_listening, lb);
	else
		rc = perf_run(lb->o, 0, 1, on_listening, lb);
	pthread_mutex_lock(&lb->lock);
	lb->rc = rc;
	lb->done = 1; /* wakes the client if a server pair never listened */
	pthread_cond_signal(&lb->cond);
	pthread_mutex_unlock(&lb->lock);
	return NULL;
}

/* Both peers in this process: the server (receiver) reports, in the kv
 * mode the client (the initiator, which times the batches).  In
 * multi-session mode the server's pairs listen on ports of their own and
 * the client's pair k dials pair k's. */
static int run_loopback(const struct perf_opts *o)
{
	struct perf_opts server = *o, client = *o;
	struct loopback lb = { .o = &server };
	pthread_t th;
	int rc, ready;

	server.bind = "127.0.0.1";
	server.port = 0;
	pthread_mutex_init(&lb.lock, NULL);
	pthread_cond_init(&lb.cond, NULL);
	if (pthread_create(&th, NULL, server_thread, &lb))
		return -1;
	pthread_mutex_lock(&lb.lock);
	while (lb.listening < o->npairs && !lb.done)
		pthread_cond_wait(&lb.cond, &lb.lock);
	ready = lb.listening == o->npairs;
	pthread_mutex_unlock(&lb.lock);
	client.host = "127.0.0.1";
	client.port = lb.port[0];
	client.pair_ports = lb.port;
	if (!ready)
		rc = -1;
	else if (o->kv.on)
		rc = perf_kv_run(&client, 1, 1, NULL, NULL);
	else if (o->multi)
		rc = perf_run_pairs(&client, 1, 0, NULL, NULL);
	else
		rc = perf_run(&client, 1, 0, NULL, NULL);
	pthread_join(th, NULL);
	return rc ? rc : lb.rc;
}

int main(int argc, char **argv)
{
	struct perf_opts o;
	int rc = perf_parse(argc, argv, &o);

	if (rc)
		return rc > 0 ? 0 : 2;
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
		if (o.kv.on)
			rc = perf_kv_run(&o, 0, 1, NULL, NULL);
		else if (o.multi)
			rc = perf_run_pairs(&o, 0, 1, NULL, NULL);
		else
			rc = perf_run(&o, 0, 1, NULL, NULL);
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
