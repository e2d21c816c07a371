/* Device unpack: the session's one CUDA stream, a ring of events, and the
 * bookkeeping that gates irecvConsumed on the unpack having finished.
 * Launches are numbered; all run on one stream, so they finish in order
 * and "launch L done" means every launch up to L is done. */
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "util/error.h"
#include "util/log.h"

_Static_assert(TP_WINDOW_SLOTS == TP_UNPACK_QUEUE_DEPTH,
	       "window slot k % 16 doubles as the meta-ring slot");

#define TP_EVENT_RING 256

struct tp_unpacker {
	pthread_mutex_t lock;
	tp_dev_stream *stream;
	tp_dev_event *ev[TP_EVENT_RING];
	uint64_t launched;  /* last launch number handed out (first is 1) */
	uint64_t completed; /* every launch <= completed has finished */
};

void tp__unpacker_destroy(struct tp_unpacker *u)
{
	int i;

	if (!u)
		return;
	if (u->stream)
		tp__dev_stream_sync(u->stream);
	for (i = 0; i < TP_EVENT_RING; i++)
		tp__dev_event_destroy(u->ev[i]);
	tp__dev_stream_destroy(u->stream);
	pthread_mutex_destroy(&u->lock);
	free(u);
}

static int unpacker_create(struct tcpx_p2p_session *s, struct tp_unpacker **out)
{
	struct tp_unpacker *u = calloc(1, sizeof(*u));
	int i, rc;

	if (!u)
		return tp__error(TCPX_P2P_ENOMEM, "unpack: out of memory");
	if (pthread_mutex_init(&u->lock, NULL)) {
		free(u);
		return tp__error(TCPX_P2P_ENOMEM, "unpack: mutex init failed");
	}
	rc = tp__session_use_gpu(s);
	if (!rc)
		rc = tp__dev_stream_create(&u->stream);
	for (i = 0; !rc && i < TP_EVENT_RING; i++)
		rc = tp__dev_event_create(&u->ev[i]);
	if (rc) {
		tp__unpacker_destroy(u);
		return rc;
	}
	*out = u;
	return 0;
}

static int unpacker_get(struct tcpx_p2p_session *s)
{
	int rc = 0;

	pthread_mutex_lock(&s->lock);
	if (!s->unpacker)
		rc = unpacker_create(s, &s->unpacker);
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
	tp__dev_ptr_is_device(cm->bounce, &on_dev);
	cm->bounce_on_device = on_dev;
	TP_DEBUG("unpack", "comm %p: meta %p, bounce %p on %s", cm->comm, (void *)cm->meta,
		 (void *)cm->bounce, on_dev ? "device" : "host");
	/* Host bounce into host buffers is a memcpy; a device bounce, or CUDA
	 * buffers (possible only with a gpu), need the stream. */
	if (!on_dev && s->cfg.gpu < 0)
		return 0;
	return unpacker_get(s);
}

void tp__unpack_drain(struct tcpx_p2p_session *s)
{
	struct tp_unpacker *u = s->unpacker;

	if (!u)
		return;
	pthread_mutex_lock(&u->lock);
	if (tp__session_use_gpu(s) || tp__dev_stream_sync(u->stream))
		TP_WARN("unpack", "draining the unpack stream: %s", tcpx_p2p_last_error());
	pthread_mutex_unlock(&u->lock);
}

/* Advance `completed` over finished launches; a kernel that met a record
 * outside its chunk (skipped it) fails whoever observes it. */
static int poll_events(struct tp_unpacker *u)
{
	int done, bad, rc;

	while (u->completed < u->launched) {
		rc = tp__dev_event_query(u->ev[(u->completed + 1) % TP_EVENT_RING], &done);
		if (rc)
			return rc;
		if (!done)
			break;
		u->completed++;
	}
	rc = tp__dev_stream_error(u->stream, &bad);
	if (!rc && bad)
		rc = tp__error(TCPX_P2P_EPLUGIN, "unpack: the plugin described a fragment outside "
			       "its chunk (sender and receiver lengths differ?)");
	return rc;
}

int tp__unpack_done(struct tcpx_p2p_session *s, uint64_t launch, bool *done)
{
	struct tp_unpacker *u = s->unpacker;
	int rc = 0;

	pthread_mutex_lock(&u->lock);
	if (launch > u->completed)
		rc = poll_events(u);
	*done = launch <= u->completed;
	pthread_mutex_unlock(&u->lock);
	return rc;
}

static int enqueue(struct tcpx_p2p_session *s, struct tp_comm **cms, struct tp_slot **slots,
		   int n)
{
	struct tp_unpack_job jobs[TP_UNPACK_MAX_JOBS];
	tp_dev_stream *st = s->unpacker->stream;
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
	struct tp_unpacker *u;
	uint64_t l = 0;
	int rc;

	rc = unpacker_get(s);
	if (!rc)
		rc = tp__session_use_gpu(s);
	if (rc)
		return rc;
	u = s->unpacker;
	pthread_mutex_lock(&u->lock);
	rc = poll_events(u);
	/* Rare: TP_EVENT_RING launches in flight.  Wait for the oldest. */
	if (!rc && u->launched - u->completed >= TP_EVENT_RING) {
		TP_WARN_RL("unpack", "%d unpack launches in flight; waiting", TP_EVENT_RING);
		rc = tp__dev_stream_sync(u->stream);
		if (!rc)
			rc = poll_events(u);
	}
	if (!rc && w->slots)
		rc = enqueue(s, w->cms, w->slots, w->n);
	else if (!rc && w->kernel)
		rc = tp__dev_copy_kernel(u->stream, w->list, w->ncopies);
	else if (!rc)
		rc = tp__dev_copy_async(u->stream, w->list, w->ncopies);
	if (!rc) {
		l = u->launched + 1;
		rc = tp__dev_event_record(u->ev[l % TP_EVENT_RING], u->stream);
		if (!rc)
			u->launched = l;
	}
	pthread_mutex_unlock(&u->lock);
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

int tp__unpack_copies(struct tcpx_p2p_session *s, const struct tp_copy *list, uint32_t n,
		      bool kernel, uint64_t *launch_out)
{
	struct launch_work w = { .list = list, .ncopies = n, .kernel = kernel };

	return launch(s, &w, launch_out);
}
