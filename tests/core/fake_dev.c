/* A device seam on the CPU for tests of the layers above it: streams are
 * threads that run their operations in order, "device memory" is host
 * memory, kernels are memcpy, and the stream-wait kernels run the same
 * claim-perform-stamp protocol as swait.cu.  Counters tell a test where
 * work ran.  Not for data-path speed: for order, completion and bytes. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device/tp_device.h"
#include "fake_dev.h"
#include "util/error.h"
#include "util/time.h"

struct fake_counts fake_counts;
int fake_holds_paused;
int fake_lists_gated;

struct op {
	void (*fn)(struct op *);
	struct op *next;
	tp_dev_stream *st;
	void *a, *b;
	uint64_t n, m;
	struct tp_copy *list; /* owned copies of a list read at enqueue */
	struct tp_unpack_job job[TP_UNPACK_MAX_JOBS];
};

struct tp_dev_stream {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct op *head, *tail;
	int busy, stop;
	pthread_t thread;
};

struct tp_dev_event {
	int done; /* 1: every operation before the record ran (atomic) */
	uint64_t gen;
};

static void *worker(void *arg)
{
	tp_dev_stream *s = arg;

	pthread_mutex_lock(&s->lock);
	for (;;) {
		struct op *o;

		while (!s->head && !s->stop)
			pthread_cond_wait(&s->cond, &s->lock);
		if (!s->head)
			break;
		o = s->head;
		s->head = o->next;
		if (!s->head)
			s->tail = NULL;
		s->busy = 1;
		pthread_mutex_unlock(&s->lock);
		o->fn(o);
		free(o->list);
		free(o);
		pthread_mutex_lock(&s->lock);
		s->busy = 0;
		pthread_cond_broadcast(&s->cond);
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

static struct op *op_new(tp_dev_stream *s, void (*fn)(struct op *))
{
	struct op *o = calloc(1, sizeof(*o));

	o->fn = fn;
	o->st = s;
	return o;
}

static void push(tp_dev_stream *s, struct op *o)
{
	pthread_mutex_lock(&s->lock);
	if (s->tail)
		s->tail->next = o;
	else
		s->head = o;
	s->tail = o;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

int tp__dev_stream_create(tp_dev_stream **out)
{
	tp_dev_stream *s = calloc(1, sizeof(*s));

	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	pthread_create(&s->thread, NULL, worker, s);
	*out = s;
	return 0;
}

int tp__dev_stream_sync(tp_dev_stream *s)
{
	pthread_mutex_lock(&s->lock);
	while (s->head || s->busy)
		pthread_cond_wait(&s->cond, &s->lock);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

void tp__dev_stream_destroy(tp_dev_stream *s)
{
	if (!s)
		return;
	tp__dev_stream_sync(s);
	pthread_mutex_lock(&s->lock);
	s->stop = 1;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	pthread_join(s->thread, NULL);
	free(s);
}

int tp__dev_stream_error(tp_dev_stream *s, int *bad)
{
	(void)s;
	*bad = 0;
	return 0;
}

int tp__dev_event_create(tp_dev_event **e)
{
	*e = calloc(1, sizeof(**e));
	(*e)->done = 1;
	return 0;
}

void tp__dev_event_destroy(tp_dev_event *e)
{
	free(e);
}

static void ev_set(struct op *o)
{
	tp_dev_event *e = o->a;

	if (__atomic_load_n(&e->gen, __ATOMIC_ACQUIRE) == o->n) /* its latest record */
		__atomic_store_n(&e->done, 1, __ATOMIC_RELEASE);
}

int tp__dev_event_record(tp_dev_event *e, tp_dev_stream *s)
{
	struct op *o = op_new(s, ev_set);

	__atomic_store_n(&e->done, 0, __ATOMIC_RELEASE);
	o->a = e;
	o->n = __atomic_add_fetch(&e->gen, 1, __ATOMIC_ACQ_REL);
	push(s, o);
	return 0;
}

int tp__dev_event_query(tp_dev_event *e, int *done)
{
	*done = __atomic_load_n(&e->done, __ATOMIC_ACQUIRE);
	return 0;
}

int tp__dev_user_event_query(void *event, int *done)
{
	struct fake_uevent *e = event;
	int st = __atomic_load_n(&e->state, __ATOMIC_ACQUIRE);

	__atomic_add_fetch(&e->queries, 1, __ATOMIC_RELAXED);
	if (st == FAKE_EV_FAILED)
		return tp__error(TCPX_P2P_ECUDA, "cudaEventQuery (the transfer's event): fake "
				 "failure (cuda error 719)");
	*done = st == FAKE_EV_DONE;
	return 0;
}

int tp__dev_event_wait(tp_dev_event *e, int timeout_ms, int *done)
{
	int64_t end = tp__now_ns() + (int64_t)timeout_ms * TP_NS_PER_MS;

	while (!(*done = __atomic_load_n(&e->done, __ATOMIC_ACQUIRE)) && tp__now_ns() < end)
		usleep(100);
	return 0;
}

static void unpack_one(const struct tp_unpack_job *j)
{
	for (uint32_t i = 0; i < j->cnt; i++)
		memcpy(j->dst + j->recs[i].dst_off, j->bounce + j->recs[i].src_off, j->recs[i].len);
}

static void run_unpack(struct op *o)
{
	for (uint64_t i = 0; i < o->n; i++)
		unpack_one(&o->job[i]);
	__atomic_add_fetch(&fake_counts.on_stream, 1, __ATOMIC_RELAXED);
}

int tp__dev_unpack_kernel(tp_dev_stream *s, const struct tp_unpack_job *jobs, int njobs)
{
	struct op *o = op_new(s, run_unpack);

	memcpy(o->job, jobs, (size_t)njobs * sizeof(*jobs));
	o->n = (uint64_t)njobs;
	push(s, o);
	return 0;
}

int tp__dev_unpack_d2d(tp_dev_stream *s, const struct tp_unpack_job *job)
{
	return tp__dev_unpack_kernel(s, job, 1);
}

int tp__dev_unpack_host(tp_dev_stream *s, const struct tp_unpack_job *job)
{
	return tp__dev_unpack_kernel(s, job, 1);
}

static void run_list(struct op *o)
{
	const struct tp_copy *l = o->list ? o->list : o->a;

	while (__atomic_load_n(&fake_lists_gated, __ATOMIC_ACQUIRE))
		usleep(20);
	for (uint64_t i = 0; i < o->n; i++)
		memcpy(l[i].dst, l[i].src, l[i].len);
	__atomic_add_fetch(&fake_counts.on_stream, 1, __ATOMIC_RELAXED);
}

int tp__dev_copy_kernel(tp_dev_stream *s, const struct tp_copy *list, uint32_t n)
{
	struct op *o = op_new(s, run_list);

	o->a = (void *)list; /* read when it runs, as the kernel does */
	o->n = n;
	push(s, o);
	return 0;
}

int tp__dev_copy_async(tp_dev_stream *s, const struct tp_copy *list, uint32_t n)
{
	struct op *o = op_new(s, run_list);

	o->list = malloc((n ? n : 1) * sizeof(*list)); /* read now, as the host does */
	memcpy(o->list, list, n * sizeof(*list));
	o->n = n;
	push(s, o);
	return 0;
}

/* ---- stream waits: swait.cu's protocol, one CPU thread per "kernel" ---- */

int tp__dev_swq_create(struct tp_swq *q)
{
	memset(q, 0, sizeof(*q));
	q->job = calloc(TP_SWQ_CAP, sizeof(*q->job));
	q->done = calloc(TP_SWQ_CAP, sizeof(*q->done));
	q->tail = calloc(1, sizeof(*q->tail));
	q->word = calloc(TP_SWQ_SLOTS, sizeof(*q->word));
	q->err = calloc(1, sizeof(*q->err));
	q->head = calloc(1, sizeof(*q->head));
	return 0;
}

void tp__dev_swq_destroy(struct tp_swq *q)
{
	free(q->job);
	free((void *)q->done);
	free((void *)q->tail);
	free((void *)q->word);
	free((void *)q->err);
	free(q->head);
	memset(q, 0, sizeof(*q));
}

static void perform(const struct tp_swq_job *j)
{
	if (j->kind == TP_SWQ_UNPACK) {
		struct tp_unpack_job u = { .recs = j->src, .cnt = j->cnt, .bounce = j->bounce,
					   .dst = j->dst, .len = (uint32_t)j->len };
		unpack_one(&u);
	} else if (j->kind == TP_SWQ_LIST) {
		const struct tp_copy *l = j->src;

		for (uint32_t i = 0; i < j->cnt; i++)
			memcpy(l[i].dst, l[i].src, l[i].len);
	} else {
		memcpy(j->dst, j->src, j->len);
	}
}

/* a = the queue, n = slot (hold) or until (drain), m = 1 for a drain */
static void run_swait(struct op *o)
{
	struct tp_swq *q = o->a;
	uint64_t until = o->m ? o->n : UINT64_MAX;

	for (;;) {
		uint64_t h, t;

		if (!o->m && __atomic_load_n(&q->word[o->n], __ATOMIC_ACQUIRE))
			return;
		h = __atomic_load_n(q->head, __ATOMIC_ACQUIRE);
		t = __atomic_load_n(q->tail, __ATOMIC_ACQUIRE);
		if (o->m && h >= until)
			return;
		if (h < t && h < until && !(__atomic_load_n(&fake_holds_paused, __ATOMIC_ACQUIRE) && !o->m)) {
			unsigned long long want = h;

			if (!__atomic_compare_exchange_n(q->head, &want, h + 1, 0, __ATOMIC_ACQ_REL,
							 __ATOMIC_ACQUIRE))
				continue;
			struct tp_swq_job j = q->job[h % TP_SWQ_CAP];

			if (__atomic_load_n(&q->job[h % TP_SWQ_CAP].seq, __ATOMIC_ACQUIRE) != h + 1)
				__atomic_store_n(q->err, 1, __ATOMIC_RELEASE);
			else
				perform(&j);
			__atomic_add_fetch(o->m ? &fake_counts.by_drain : &fake_counts.by_hold, 1,
					   __ATOMIC_RELAXED);
			__atomic_store_n(&q->done[h % TP_SWQ_CAP], h + 1, __ATOMIC_RELEASE);
			continue;
		}
		usleep(20);
	}
}

static void wait_event(struct op *o)
{
	tp_dev_event *e = o->a;

	while (!__atomic_load_n(&e->done, __ATOMIC_ACQUIRE))
		usleep(20);
}

int tp__dev_swait_hold(tp_dev_stream *s, void *stream, struct tp_swq *q, int slot,
		       tp_dev_event *ord, tp_dev_event *done, int *launched)
{
	tp_dev_stream *us = stream;
	struct op *o;

	*launched = 1;

	tp__dev_event_record(ord, s);
	o = op_new(us, wait_event);
	o->a = ord;
	push(us, o);
	o = op_new(us, run_swait);
	o->a = q;
	o->n = (uint64_t)slot;
	push(us, o);
	__atomic_add_fetch(&fake_counts.holds, 1, __ATOMIC_RELAXED);
	return tp__dev_event_record(done, us);
}

int tp__dev_swq_drain(tp_dev_stream *s, struct tp_swq *q, uint64_t until)
{
	struct op *o = op_new(s, run_swait);

	o->a = q;
	o->n = until;
	o->m = 1;
	push(s, o);
	__atomic_add_fetch(&fake_counts.drains, 1, __ATOMIC_RELAXED);
	return 0;
}

/* ---- the rest of the seam: one GPU, host memory throughout ---- */

int tp__dev_count(int *n) { *n = 1; return 0; }
int tp__dev_set(int gpu) { return gpu == 0 ? 0 : tp__error(TCPX_P2P_EINVAL, "fake GPU %d", gpu); }
void *tp__dev_ctx_save(void) { return NULL; }
void tp__dev_ctx_restore(void *ctx) { (void)ctx; }
bool tp__dev_host_mapped(const void *p, size_t len) { (void)p; (void)len; return true; }
int tp__dev_host_pin(void *p, size_t len) { (void)p; (void)len; return 0; }
int tp__dev_host_unpin(void *p) { (void)p; return 0; }
int tp__dev_pci_bus_id(int gpu, char *buf, int len)
{
	(void)gpu;
	strncpy(buf, "0000:00:00.0", (size_t)len);
	return 0;
}
int tp__dev_ptr_is_device(const void *p, int *is_dev) { (void)p; *is_dev = 0; return 0; }
int tp__dev_ptr_via_gpu(const void *p, int *via_gpu) { (void)p; *via_gpu = 0; return 0; }
int tp__dev_memcpy(void *dst, const void *src, size_t n) { memcpy(dst, src, n); return 0; }
int tp__dev_kernels_load(void) { return 0; }
int tp__dev_stream_check(void *stream) { (void)stream; return 0; }
int tp__dev_host_alloc(void **p, size_t n) { *p = calloc(1, n); return *p ? 0 : TCPX_P2P_ENOMEM; }
void tp__dev_host_free(void *p) { free(p); }
int tp__dev_malloc(void **p, size_t n) { *p = calloc(1, n); return *p ? 0 : TCPX_P2P_ENOMEM; }
void tp__dev_free(void *p) { free(p); }
