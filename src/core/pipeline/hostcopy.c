/* Host copies off the progress path.  The gathers and scatters of vectored
 * transfers in host memory run on a few worker threads per session, the
 * way device copies run on the session's CUDA stream, so that the thread
 * driving the plugin keeps testing (TCPX moves bytes only inside test())
 * while the bytes are copied.  Jobs complete in any order; each carries
 * its own done flag, which the progress pass polls. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/pipeline/hostcopy.h"
#include "core/session.h"
#include "util/error.h"
#include "util/log.h"

struct tp_hcopy {
	pthread_mutex_t lock;
	pthread_cond_t work;
	struct tp_hjob *head, *tail;
	bool stop;
	int nthreads;
	pthread_t tid[TP_HCOPY_MAX_THREADS];
};

static void run_job(struct tp_hjob *j)
{
	for (uint32_t i = 0; i < j->n; i++)
		memcpy(j->list[i].dst, j->list[i].src, j->list[i].len);
	__atomic_store_n(&j->done, true, __ATOMIC_RELEASE);
}

static void *worker(void *arg)
{
	struct tp_hcopy *h = arg;
	struct tp_hjob *j;

	pthread_mutex_lock(&h->lock);
	for (;;) {
		while (!h->head && !h->stop)
			pthread_cond_wait(&h->work, &h->lock);
		if (!h->head)
			break;
		j = h->head;
		h->head = j->next;
		if (!h->head)
			h->tail = NULL;
		pthread_mutex_unlock(&h->lock);
		run_job(j);
		pthread_mutex_lock(&h->lock);
	}
	pthread_mutex_unlock(&h->lock);
	return NULL;
}

void tp__hcopy_destroy(struct tp_hcopy *h)
{
	if (!h)
		return;
	pthread_mutex_lock(&h->lock);
	h->stop = true;
	pthread_cond_broadcast(&h->work);
	pthread_mutex_unlock(&h->lock);
	for (int i = 0; i < h->nthreads; i++)
		pthread_join(h->tid[i], NULL);
	pthread_cond_destroy(&h->work);
	pthread_mutex_destroy(&h->lock);
	free(h);
}

/* The CPUs the decisions below count.  TP_TEST_HOOKS builds (the test
 * scripts') take TCPX_P2P_TEST_CPUS instead, so that a 2-core CI machine
 * runs the copy threads too. */
static long ncpu(void)
{
	static long n;
	long v;

	if ((v = __atomic_load_n(&n, __ATOMIC_RELAXED)))
		return v;
	v = sysconf(_SC_NPROCESSORS_ONLN);
#if TP_TEST_HOOKS
	if (getenv("TCPX_P2P_TEST_CPUS"))
		v = atol(getenv("TCPX_P2P_TEST_CPUS"));
#endif
	v = v > 0 ? v : 1;
	__atomic_store_n(&n, v, __ATOMIC_RELAXED);
	return v;
}

/* Below 8 CPUs the copy threads would only compete with the progress
 * thread, the plugin's threads and the kernel's TCP copies for the same
 * cores (dev-2c: kv/contig 0.45-0.6 with one thread, 0.6 without). */
bool tp__hcopy_worth(size_t chunk_len)
{
	return chunk_len > TP_HCOPY_INLINE && ncpu() >= 8;
}

/* One worker per four CPUs, up to TP_HCOPY_MAX_THREADS. */
static int create(struct tp_hcopy **out)
{
	struct tp_hcopy *h = calloc(1, sizeof(*h));
	int n = ncpu() >= 8 ? (int)(ncpu() / 4) : 1, rc;

	if (!h)
		return tp__error(TCPX_P2P_ENOMEM, "host copies: out of memory");
	if (n > TP_HCOPY_MAX_THREADS)
		n = TP_HCOPY_MAX_THREADS;
	rc = pthread_mutex_init(&h->lock, NULL);
	if (rc)
		goto no_lock;
	rc = pthread_cond_init(&h->work, NULL);
	if (rc)
		goto no_cond;
	for (; h->nthreads < n; h->nthreads++) {
		rc = pthread_create(&h->tid[h->nthreads], NULL, worker, h);
		if (rc)
			break;
	}
	if (!h->nthreads) {
		tp__hcopy_destroy(h);
		return tp__error(TCPX_P2P_ENOMEM, "host copies: cannot start a thread");
	}
	TP_DEBUG("hcopy", "%d host copy thread(s)", h->nthreads);
	*out = h;
	return 0;
no_cond:
	pthread_mutex_destroy(&h->lock);
no_lock:
	free(h);
	return tp__error(TCPX_P2P_ENOMEM, "host copies: cannot create a lock: %s", strerror(rc));
}

int tp__hcopy_submit(struct tcpx_p2p_session *s, struct tp_hcopies *hc,
		     const struct tp_copy *list, uint32_t n)
{
	struct tp_hcopy *h;
	uint64_t total = 0, share, acc = 0;
	uint32_t i, first = 0;
	int rc = 0;

	pthread_mutex_lock(&s->lock);
	if (!s->hcopy)
		rc = create(&s->hcopy);
	h = s->hcopy;
	pthread_mutex_unlock(&s->lock);
	if (rc)
		return rc;
	/* One part per thread, cut at entries by bytes: a chunk is copied by
	 * every thread at once, so the first chunk of a transfer is gathered
	 * (and the last scattered) in a quarter of the time. */
	for (i = 0; i < n; i++)
		total += list[i].len;
	share = total / (uint64_t)h->nthreads + 1;
	hc->n = 0;
	for (i = 0; i < n; i++) {
		acc += list[i].len;
		if (acc >= share || i == n - 1) {
			struct tp_hjob *j = &hc->part[hc->n++];

			j->list = list + first;
			j->n = i + 1 - first;
			j->done = false;
			j->next = NULL;
			first = i + 1;
			acc = 0;
		}
	}
	pthread_mutex_lock(&h->lock);
	for (int k = 0; k < hc->n; k++) {
		if (h->tail)
			h->tail->next = &hc->part[k];
		else
			h->head = &hc->part[k];
		h->tail = &hc->part[k];
	}
	pthread_cond_broadcast(&h->work);
	pthread_mutex_unlock(&h->lock);
	return 0;
}

bool tp__hcopy_done(const struct tp_hcopies *hc)
{
	for (int k = 0; k < hc->n; k++)
		if (!__atomic_load_n(&hc->part[k].done, __ATOMIC_ACQUIRE))
			return false;
	return true;
}

/* Wait for a chunk's copies (conn teardown: the threads are still
 * working through the queue, so this ends). */
void tp__hcopy_wait(const struct tp_hcopies *hc)
{
	struct timespec ts = { 0, 20000 };

	while (!tp__hcopy_done(hc))
		nanosleep(&ts, NULL);
}
