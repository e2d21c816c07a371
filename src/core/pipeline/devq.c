/* The session's device queue: its one CUDA stream, a ring of events, and
 * the bookkeeping that gates the next stage on device work having
 * finished: receive unpacks (irecvConsumed waits for them), the scatters
 * and gathers of copy lists, and the control channel's frame copies.
 * Launches are numbered and "launch L done" means every launch up to L is
 * done: on the stream they finish in order, and poll_events advances over
 * them in order whatever ran them.
 *
 * While a caller's stream is held (tcpx_p2p_stream_wait), launches that
 * the hold kernels can perform (every operand reached by the GPU) are
 * published to them as jobs instead (the holds and their job queue:
 * holds.c), and the last release drains what they left.  Also here:
 * reading a comm's unpack handle (tp__unpack_prepare). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/conn.h"
#include "core/pipeline/comm.h"
#include "core/pipeline/devq.h"
#include "core/pipeline/holds.h"
#include "core/pipeline/window.h"
#include "core/session.h"
#include "util/error.h"
#include "util/log.h"
#include "util/time.h"

_Static_assert(TP_WINDOW_SLOTS == TP_UNPACK_QUEUE_DEPTH,
	       "window slot k % 16 doubles as the meta-ring slot");

#define TP_EVENT_RING 256
struct tp_devq {
	pthread_mutex_t lock;
	tp_dev_stream *stream;
	tp_dev_event *ev[TP_EVENT_RING];
	tp_dev_event *fence; /* wait_all's: the stream's work so far */
	/* per launch: jobs [first, first + njobs) when it was published, else
	 * njobs = 0 and its event */
	struct {
		uint64_t first;
		uint32_t njobs;
	} as_jobs[TP_EVENT_RING];
	uint64_t launched;  /* last launch number handed out (first is 1) */
	uint64_t completed; /* every launch <= completed has finished */
	struct tp_holds *holds; /* made at the first stream wait */
	int kernels_rc; /* loading the kernels failed: no stream is held */
	bool bad; /* a kernel met a record outside its chunk: the next report fails */
};

void tp__devq_destroy(struct tp_devq *q)
{
	int i;

	if (!q)
		return;
	/* the holds first: the stream's last work may be a drain of theirs */
	tp__holds_destroy(q->holds, q->stream);
	if (q->stream)
		tp__dev_stream_sync(q->stream);
	for (i = 0; i < TP_EVENT_RING; i++)
		tp__dev_event_destroy(q->ev[i]);
	tp__dev_event_destroy(q->fence);
	tp__dev_stream_destroy(q->stream);
	pthread_mutex_destroy(&q->lock);
	free(q);
}

static int devq_create(struct tcpx_p2p_session *s, struct tp_devq **out)
{
	struct tp_devq *q = calloc(1, sizeof(*q));
	int i, rc;

	if (!q)
		return tp__error(TCPX_P2P_ENOMEM, "unpack: out of memory");
	if (pthread_mutex_init(&q->lock, NULL)) {
		free(q);
		return tp__error(TCPX_P2P_ENOMEM, "unpack: mutex init failed");
	}
	rc = tp__session_use_gpu(s);
	if (!rc)
		rc = tp__dev_stream_create(&q->stream);
	/* Loaded now, not by a first launch mid-transfer (tp_device.h); a GPU
	 * the kernels were not built for fails at their launch, if any comes
	 * (the d2d and host variants launch none). */
	if (!rc && (q->kernels_rc = tp__dev_kernels_load()))
		TP_WARN("unpack", "loading the library's kernels: %s", tcpx_p2p_last_error());
	for (i = 0; !rc && i < TP_EVENT_RING; i++)
		rc = tp__dev_event_create(&q->ev[i]);
	if (!rc)
		rc = tp__dev_event_create(&q->fence);
	if (rc) {
		tp__devq_destroy(q);
		return rc;
	}
	*out = q;
	return 0;
}

static int devq_get(struct tcpx_p2p_session *s)
{
	int rc = 0;

	pthread_mutex_lock(&s->lock);
	if (!s->devq)
		rc = devq_create(s, &s->devq);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

int tp__unpack_prepare(struct tcpx_p2p_session *s, struct tp_comm *cm)
{
	struct tp_unpack_handle h;
	int on_dev = 0, rc = 0;

	if (cm->devh.netDeviceType != NCCL_NET_DEVICE_UNPACK || !cm->devh.handle)
		return 0;
	if (cm->devh.netDeviceVersion != NCCL_NET_DEVICE_UNPACK_VERSION)
		return tp__error(TCPX_P2P_EPLUGIN, "plugin %s: unpack device handle version %d, "
				 "supported %d", s->net->name, cm->devh.netDeviceVersion,
				 NCCL_NET_DEVICE_UNPACK_VERSION);
	/* Read the handle once per comm; it lives in device memory on TCPX. */
	tp__dev_ptr_is_device(cm->devh.handle, &on_dev);
	if (on_dev)
		rc = tp__dev_memcpy(&h, cm->devh.handle, sizeof(h));
	else
		memcpy(&h, cm->devh.handle, sizeof(h));
	if (rc)
		return rc;
	/* TCPX can hand back a handle without a bounce buffer (an import it
	 * skipped); every record would then point into nothing. */
	if (!h.meta || !h.bounce_buf)
		return tp__error(TCPX_P2P_EPLUGIN, "plugin %s: unpack device handle without %s "
				 "(the plugin's receive memory import failed; see "
				 "docs/troubleshooting.md)", s->net->name,
				 h.meta ? "a bounce buffer" : "a meta ring");
	/* The ring is pinned, mapped host memory: under UVA its device alias
	 * is also its host address. */
	cm->meta = h.meta;
	cm->bounce = h.bounce_buf;
	cm->bounce_len = TP_META_BOUNCE_MAX;
	/* Where the pages are reached, not where they lie: TCPX maps its
	 * RxDM's buffer for its GPU only, and its sockets are steered into it
	 * whatever memory backs it, so host memory there (the simulator's
	 * TCPXSIM_BOUNCE=hostmap) is a device bounce to every path below:
	 * read by device copies and kernels, never by the CPU, and receives
	 * posted into device memory only (issue #28: a host-memory control
	 * receive made TCPX call recv() on its steered socket: EFAULT). */
	tp__dev_ptr_via_gpu(cm->bounce, &on_dev);
	cm->bounce_on_device = on_dev;
	TP_DEBUG("unpack", "comm %p: meta %p, bounce %p reached by the %s", cm->comm,
		 (void *)cm->meta, (void *)cm->bounce, on_dev ? "GPU" : "CPU");
	/* Host bounce into host buffers is a memcpy; a device bounce, or CUDA
	 * buffers (possible only with a gpu), need the stream. */
	if (!on_dev && s->cfg.gpu < 0)
		return 0;
	return devq_get(s);
}

static int poll_events(struct tp_devq *q);

/* Wait for every launch so far, at most TP_HOLD_EXIT_MS, jobs no hold
 * kernel claimed drained first (a launch done as jobs is known done by
 * their stamps, whoever performed them).  With no stream held, the stream
 * itself is waited for too (a fence after its last work); with streams
 * held it is not: one of them may share the stream's hardware queue and
 * block it until a release this wait would delay. */
static int wait_all(struct tp_devq *q)
{
	int64_t end = tp__now_ns() + (int64_t)TP_HOLD_EXIT_MS * TP_NS_PER_MS;
	struct tp_holds *h = q->holds;
	bool held = h && h->live;
	int rc = 0, idle = 0;

	if (tp__holds_drain(h, q->stream))
		TP_WARN("unpack", "launching a drain: %s (waiting for the holds alone)",
			tcpx_p2p_last_error());
	if (!held)
		rc = tp__dev_event_record(q->fence, q->stream);
	while (!rc) {
		rc = poll_events(q);
		if (!rc && q->completed == q->launched) {
			if (held)
				break;
			rc = tp__dev_event_query(q->fence, &idle);
			if (rc || idle)
				break;
		}
		if (tp__now_ns() >= end)
			return tp__error(TCPX_P2P_ETIMEDOUT, "unpack: device work still running "
					 "after %d ms (launches %llu of %llu done, jobs %llu of %llu, "
					 "%d streams held)", TP_HOLD_EXIT_MS,
					 (unsigned long long)q->completed,
					 (unsigned long long)q->launched,
					 (unsigned long long)(h ? h->low : 0),
					 (unsigned long long)(h ? h->published : 0), h ? h->live : 0);
		usleep(50);
	}
	return rc;
}

void tp__devq_drain(struct tcpx_p2p_session *s)
{
	struct tp_devq *q = s->devq;

	if (!q)
		return;
	pthread_mutex_lock(&q->lock);
	if (tp__session_use_gpu(s) || wait_all(q))
		TP_WARN("unpack", "draining the unpack stream: %s", tcpx_p2p_last_error());
	pthread_mutex_unlock(&q->lock);
}

/* Advance `completed` over finished launches, and note a kernel that met a
 * record outside its chunk (and skipped it) for take_bad. */
static int poll_events(struct tp_devq *q)
{
	int done, bad, rc;

	while (q->completed < q->launched) {
		unsigned k = (q->completed + 1) % TP_EVENT_RING;

		if (q->as_jobs[k].njobs) {
			done = tp__holds_jobs_done(q->holds, q->as_jobs[k].first,
						   q->as_jobs[k].njobs);
		} else {
			rc = tp__dev_event_query(q->ev[k], &done);
			if (rc)
				return rc;
		}
		if (!done)
			break;
		q->completed++;
	}
	/* both flags are taken when read: one bad record fails one report */
	rc = tp__dev_stream_error(q->stream, &bad);
	if (!rc && !bad && q->holds)
		bad = tp__holds_bad(q->holds);
	q->bad |= !rc && bad;
	return rc;
}

/* Report a bad record noted by poll_events, once, to whoever reports
 * device work's outcome to a transfer (tp__devq_done, launch). */
static int take_bad(struct tp_devq *q)
{
	if (!q->bad)
		return 0;
	q->bad = false;
	return tp__error(TCPX_P2P_EPLUGIN, "unpack: the plugin described a fragment outside its "
			 "chunk (sender and receiver lengths differ?)");
}

int tp__devq_done(struct tcpx_p2p_session *s, uint64_t launch, bool *done)
{
	struct tp_devq *q = s->devq;
	int rc = 0;

	pthread_mutex_lock(&q->lock);
	if (launch > q->completed)
		rc = poll_events(q);
	if (!rc)
		rc = take_bad(q);
	*done = launch <= q->completed;
	pthread_mutex_unlock(&q->lock);
	return rc;
}

static int enqueue(struct tcpx_p2p_session *s, struct tp_comm **cms, struct tp_slot **slots,
		   int n)
{
	struct tp_unpack_job jobs[TP_UNPACK_MAX_JOBS];
	tp_dev_stream *st = s->devq->stream;
	int i, nk = 0, rc;

	for (i = 0; i < n; i++) {
		struct tp_unpack_job j = {
			.recs = slots[i]->meta.rec,
			.cnt = slots[i]->meta.cnt,
			.bounce = cms[i]->bounce,
			.dst = slots[i]->buf,
			.len = slots[i]->len,
			.bounce_dev = cms[i]->bounce_on_device,
			.dst_pinned = slots[i]->dst_dev || slots[i]->dst_mapped,
		};

		/* The variant tp__copy_path chose for the slot. */
		if (slots[i]->path == TP_PATH_KERNEL) {
			jobs[nk++] = j;
			continue;
		}
		if (slots[i]->path == TP_PATH_STAGED)
			rc = tp__dev_unpack_host(st, &j);
		else
			rc = tp__dev_unpack_d2d(st, &j);
		if (rc)
			return rc;
	}
	return nk ? tp__dev_unpack_kernel(st, jobs, nk) : 0;
}

/* Device work of one launch. */
struct launch_work {
	struct tp_comm **cms;
	struct tp_slot **slots;
	int n;
	const struct tp_copy *list;
	uint32_t ncopies;
	enum tp_list_how how;
};

static int on_stream(struct tp_devq *q, struct tcpx_p2p_session *s,
		     const struct launch_work *w)
{
	if (w->slots)
		return enqueue(s, w->cms, w->slots, w->n);
	if (w->how == TP_LIST_KERNEL)
		return tp__dev_copy_kernel(q->stream, w->list, w->ncopies);
	return tp__dev_copy_async(q->stream, w->list, w->ncopies);
}

/* A slot the hold kernels can unpack: bounce pages and records the GPU
 * reads (a device bounce: its meta ring is read by the GPU too, as NCCL's
 * own unpack does) into memory the GPU writes.  The kernel variant always;
 * the d2d one, which also serves host bounce pages, only so; never host
 * staging. */
static bool slot_to_jobs(const struct tp_comm *cm, const struct tp_slot *sl)
{
	return sl->path == TP_PATH_KERNEL ||
	       (sl->path == TP_PATH_D2D && cm->bounce_on_device && !sl->multi &&
		(sl->dst_dev || sl->dst_mapped));
}

/* Jobs w makes for the hold kernels; 0 when part of it needs the stream (an
 * operand the GPU does not reach, or a variant the kernels lack). */
static uint32_t jobs_of(const struct launch_work *w)
{
	uint32_t k;

	if (!w->slots)
		return w->how == TP_LIST_KERNEL ? 1 : w->how == TP_LIST_MAPPED ? w->ncopies : 0;
	for (k = 0; k < (uint32_t)w->n; k++)
		if (!slot_to_jobs(w->cms[k], w->slots[k]))
			return 0;
	return (uint32_t)w->n;
}

/* Room for `need` more jobs, waiting (at most TP_HOLD_EXIT_MS) for the
 * kernels to retire earlier ones rather than sending w to the stream. */
static bool room_for(struct tp_devq *q, uint32_t need)
{
	int64_t end = tp__now_ns() + (int64_t)TP_HOLD_EXIT_MS * TP_NS_PER_MS;

	if (need > TP_SWQ_CAP)
		return false;
	for (;;) {
		if (need <= tp__holds_room(q->holds))
			return true;
		if (poll_events(q) || tp__now_ns() >= end)
			return false;
		usleep(50);
	}
}

/* Publish w as `need` jobs for the hold kernels. */
static void publish(struct tp_devq *q, const struct launch_work *w, uint32_t need)
{
	struct tp_swq_job j;
	uint32_t k;

	for (k = 0; k < need; k++) {
		if (w->slots)
			j = (struct tp_swq_job){ .kind = TP_SWQ_UNPACK,
						 .cnt = w->slots[k]->meta.cnt,
						 .src = w->slots[k]->meta.rec,
						 .bounce = w->cms[k]->bounce,
						 .dst = w->slots[k]->buf,
						 .len = w->slots[k]->len };
		else if (w->how == TP_LIST_KERNEL)
			j = (struct tp_swq_job){ .kind = TP_SWQ_LIST, .cnt = w->ncopies,
						 .src = w->list };
		else
			j = (struct tp_swq_job){ .kind = TP_SWQ_COPY, .src = w->list[k].src,
						 .dst = w->list[k].dst, .len = w->list[k].len };
		tp__holds_push(q->holds, &j);
	}
	tp__holds_commit(q->holds);
}

/* TP_EVENT_RING launches in flight (rare): wait for the oldest.  Jobs are
 * not on the stream, so with holds the wait polls, bounded. */
static int wait_oldest(struct tp_devq *q)
{
	int64_t end = tp__now_ns() + (int64_t)TP_HOLD_EXIT_MS * TP_NS_PER_MS;
	int rc;

	TP_WARN_RL("unpack", "%d unpack launches in flight; waiting", TP_EVENT_RING);
	if (!q->holds) {
		rc = tp__dev_stream_sync(q->stream);
		return rc ? rc : poll_events(q);
	}
	while (!(rc = poll_events(q)) && q->launched - q->completed >= TP_EVENT_RING) {
		if (tp__now_ns() >= end)
			return tp__error(TCPX_P2P_ETIMEDOUT, "unpack: %d launches in flight for "
					 "%d ms (a held stream that never reaches its hold?)",
					 TP_EVENT_RING, TP_HOLD_EXIT_MS);
		usleep(50);
	}
	return rc;
}

/* Queue w: as jobs while a stream is held and w allows, else on the stream
 * with an event.  Either way it gets the next number: launch L done means
 * every launch up to L is done. */
static int launch(struct tcpx_p2p_session *s, const struct launch_work *w, uint64_t *out)
{
	struct tp_devq *q;
	uint32_t njobs = 0;
	uint64_t l = 0;
	unsigned k;
	int rc;

	rc = devq_get(s);
	if (!rc)
		rc = tp__session_use_gpu(s);
	if (rc)
		return rc;
	q = s->devq;
	pthread_mutex_lock(&q->lock);
	rc = poll_events(q);
	if (!rc)
		rc = take_bad(q);
	if (!rc && q->launched - q->completed >= TP_EVENT_RING)
		rc = wait_oldest(q);
	k = (q->launched + 1) % TP_EVENT_RING;
	if (!rc && q->holds && q->holds->live)
		njobs = jobs_of(w);
	if (njobs && room_for(q, njobs)) {
		publish(q, w, njobs);
		q->as_jobs[k].first = q->holds->published - njobs;
	} else if (!rc) {
		if (q->holds && q->holds->live)
			TP_WARN_RL("unpack", "a stream is held and device work the holding kernels "
				   "cannot perform (%s) goes to the session's stream, which the "
				   "held stream may block (docs/api.md, stream waits)",
				   njobs ? "their queue stayed full" : "pageable memory or host "
				   "staging");
		njobs = 0;
		rc = on_stream(q, s, w);
		if (!rc)
			rc = tp__dev_event_record(q->ev[k], q->stream);
	}
	if (!rc) {
		q->as_jobs[k].njobs = njobs;
		l = ++q->launched;
	}
	pthread_mutex_unlock(&q->lock);
	if (!rc)
		*out = l;
	return rc;
}

int tp__unpack_start(struct tcpx_p2p_conn *c, struct tp_comm **cms, struct tp_slot **slots,
		     int n)
{
	struct launch_work w = { .cms = cms, .slots = slots, .n = n };
	uint64_t l;
	int i, rc;

	rc = launch(c->s, &w, &l);
	if (rc)
		return rc;
	for (i = 0; i < n; i++)
		slots[i]->launch = l;
	return 0;
}

int tp__devq_copies(struct tcpx_p2p_session *s, const struct tp_copy *list, uint32_t n,
		    enum tp_list_how how, uint64_t *launch_out)
{
	struct launch_work w = { .list = list, .ncopies = n, .how = how };

	return launch(s, &w, launch_out);
}

/* Stream holds (holds.c), under the queue's lock */

int tp__devq_hold(struct tcpx_p2p_session *s, void *stream, int *slot)
{
	struct tp_devq *q;
	int rc;

	rc = devq_get(s);
	if (rc)
		return rc;
	q = s->devq;
	if (q->kernels_rc)
		return tp__error(TCPX_P2P_ECUDA, "stream_wait: the library's kernels could not be "
				 "loaded on this GPU (warned when the session first used it)");
	pthread_mutex_lock(&q->lock);
	if (!q->holds)
		rc = tp__holds_create(&q->holds);
	if (!rc)
		rc = tp__holds_take(q->holds, q->stream, stream, slot);
	pthread_mutex_unlock(&q->lock);
	return rc;
}

void tp__devq_release(struct tcpx_p2p_session *s, int slot, bool failed)
{
	struct tp_devq *q = s->devq;

	pthread_mutex_lock(&q->lock);
	/* A failed transfer may still have device work queued that writes its
	 * buffer: the stream goes on only after it (bounded). */
	if (failed && q->completed < q->launched) {
		void *ctx = tp__gpu_save(s);

		if (wait_all(q))
			TP_WARN("unpack", "stream wait: releasing a failed transfer's stream before "
				"its device work ended: %s", tcpx_p2p_last_error());
		tp__dev_ctx_restore(ctx);
	}
	/* The last hold gone: jobs no kernel claimed are the stream's now,
	 * before anything queued on it later. */
	if (tp__holds_release(q->holds, slot)) {
		void *ctx = tp__gpu_save(s);

		if (tp__holds_drain(q->holds, q->stream))
			TP_WARN("unpack", "stream wait: draining the jobs left: %s",
				tcpx_p2p_last_error());
		tp__dev_ctx_restore(ctx);
	}
	pthread_mutex_unlock(&q->lock);
}

void tp__devq_host_free(struct tcpx_p2p_session *s, void *p)
{
	struct tp_devq *q = s->devq;
	bool kept = false;

	if (!p)
		return;
	if (q) {
		pthread_mutex_lock(&q->lock);
		kept = tp__holds_keep(q->holds, p);
		pthread_mutex_unlock(&q->lock);
	}
	if (!kept)
		tp__dev_host_free(p);
}
