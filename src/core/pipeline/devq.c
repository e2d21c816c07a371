/* The session's device queue: its one CUDA stream, a ring of events, and
 * the bookkeeping that gates the next stage on device work having
 * finished: receive unpacks (irecvConsumed waits for them), the scatters
 * and gathers of copy lists, and the control channel's frame copies.
 * Launches are numbered; all run on one stream, so they finish in order
 * and "launch L done" means every launch up to L is done.  Also here:
 * reading a comm's unpack handle (tp__unpack_prepare). */
#include <stdlib.h>
#include <string.h>

#include "core/conn.h"
#include "core/pipeline/comm.h"
#include "core/pipeline/devq.h"
#include "core/pipeline/window.h"
#include "core/session.h"
#include "util/error.h"
#include "util/log.h"

_Static_assert(TP_WINDOW_SLOTS == TP_UNPACK_QUEUE_DEPTH,
	       "window slot k % 16 doubles as the meta-ring slot");

#define TP_EVENT_RING 256

struct tp_devq {
	pthread_mutex_t lock;
	tp_dev_stream *stream;
	tp_dev_event *ev[TP_EVENT_RING];
	uint64_t launched;  /* last launch number handed out (first is 1) */
	uint64_t completed; /* every launch <= completed has finished */
};

void tp__devq_destroy(struct tp_devq *q)
{
	int i;

	if (!q)
		return;
	if (q->stream)
		tp__dev_stream_sync(q->stream);
	for (i = 0; i < TP_EVENT_RING; i++)
		tp__dev_event_destroy(q->ev[i]);
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
	for (i = 0; !rc && i < TP_EVENT_RING; i++)
		rc = tp__dev_event_create(&q->ev[i]);
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

void tp__devq_drain(struct tcpx_p2p_session *s)
{
	struct tp_devq *q = s->devq;

	if (!q)
		return;
	pthread_mutex_lock(&q->lock);
	if (tp__session_use_gpu(s) || tp__dev_stream_sync(q->stream))
		TP_WARN("unpack", "draining the unpack stream: %s", tcpx_p2p_last_error());
	pthread_mutex_unlock(&q->lock);
}

/* Advance `completed` over finished launches; a kernel that met a record
 * outside its chunk (skipped it) fails whoever observes it. */
static int poll_events(struct tp_devq *q)
{
	int done, bad, rc;

	while (q->completed < q->launched) {
		rc = tp__dev_event_query(q->ev[(q->completed + 1) % TP_EVENT_RING], &done);
		if (rc)
			return rc;
		if (!done)
			break;
		q->completed++;
	}
	rc = tp__dev_stream_error(q->stream, &bad);
	if (!rc && bad)
		rc = tp__error(TCPX_P2P_EPLUGIN, "unpack: the plugin described a fragment outside "
			       "its chunk (sender and receiver lengths differ?)");
	return rc;
}

int tp__devq_done(struct tcpx_p2p_session *s, uint64_t launch, bool *done)
{
	struct tp_devq *q = s->devq;
	int rc = 0;

	pthread_mutex_lock(&q->lock);
	if (launch > q->completed)
		rc = poll_events(q);
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

/* Queue work on the session's stream (enqueue_fn) and number it with an
 * event: launch L done means every launch up to L is done. */
struct launch_work {
	struct tp_comm **cms;
	struct tp_slot **slots;
	int n;
	const struct tp_copy *list;
	uint32_t ncopies;
	bool kernel;
};

static int launch(struct tcpx_p2p_session *s, const struct launch_work *w, uint64_t *out)
{
	struct tp_devq *q;
	uint64_t l = 0;
	int rc;

	rc = devq_get(s);
	if (!rc)
		rc = tp__session_use_gpu(s);
	if (rc)
		return rc;
	q = s->devq;
	pthread_mutex_lock(&q->lock);
	rc = poll_events(q);
	/* Rare: TP_EVENT_RING launches in flight.  Wait for the oldest. */
	if (!rc && q->launched - q->completed >= TP_EVENT_RING) {
		TP_WARN_RL("unpack", "%d unpack launches in flight; waiting", TP_EVENT_RING);
		rc = tp__dev_stream_sync(q->stream);
		if (!rc)
			rc = poll_events(q);
	}
	if (!rc && w->slots)
		rc = enqueue(s, w->cms, w->slots, w->n);
	else if (!rc && w->kernel)
		rc = tp__dev_copy_kernel(q->stream, w->list, w->ncopies);
	else if (!rc)
		rc = tp__dev_copy_async(q->stream, w->list, w->ncopies);
	if (!rc) {
		l = q->launched + 1;
		rc = tp__dev_event_record(q->ev[l % TP_EVENT_RING], q->stream);
		if (!rc)
			q->launched = l;
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
		      bool kernel, uint64_t *launch_out)
{
	struct launch_work w = { .list = list, .ncopies = n, .kernel = kernel };

	return launch(s, &w, launch_out);
}
