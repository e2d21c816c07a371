/* Stream holds and their job queue: a caller's stream held by a hold
 * kernel until the transfer it waits for ends, the slots of those kernels,
 * and the jobs they perform meanwhile (published in order, stamped done in
 * any order).  The device queue (devq.c) decides what becomes a job and
 * numbers its launches; everything here runs under its lock. */
#include <stdlib.h>

#include "core/pipeline/holds.h"
#include "util/error.h"
#include "util/log.h"
#include "util/time.h"

static void free_later(struct tp_holds *h)
{
	for (size_t i = 0; i < h->nlater; i++)
		tp__dev_host_free(h->later[i]);
	h->nlater = 0;
}

void tp__holds_destroy(struct tp_holds *h, tp_dev_stream *st)
{
	int64_t end = tp__now_ns() + (int64_t)TP_HOLD_EXIT_MS * TP_NS_PER_MS;
	int i, done;
	bool left = false;

	if (!h)
		return;
	/* Every word first (transfers still held: their session is going),
	 * then the waits: a hold queued behind another on one stream ends
	 * only after it. */
	for (i = 0; i < TP_SWQ_SLOTS; i++)
		if (h->busy[i])
			__atomic_store_n(&h->q.word[i], 1, __ATOMIC_RELEASE);
	for (i = 0; i < TP_SWQ_SLOTS; i++) {
		int64_t ms = (end - tp__now_ns()) / TP_NS_PER_MS;

		if (h->busy[i] && (h->lost[i] || tp__dev_event_wait(h->done[i], ms > 0 ? (int)ms : 0,
								     &done) || !done))
			left = true;
	}
	if (!left && st)
		tp__dev_stream_sync(st); /* a drain */
	if (left) {
		TP_WARN("unpack", "a held stream never reached its hold in %d ms: its memory is "
			"left allocated", TP_HOLD_EXIT_MS);
		return;
	}
	free_later(h);
	free(h->later);
	for (i = 0; i < TP_SWQ_SLOTS; i++)
		tp__dev_event_destroy(h->done[i]);
	tp__dev_event_destroy(h->ord);
	tp__dev_swq_destroy(&h->q);
	free(h);
}

int tp__holds_create(struct tp_holds **out)
{
	struct tp_holds *h = calloc(1, sizeof(*h));
	int i, rc;

	if (!h)
		return tp__error(TCPX_P2P_ENOMEM, "stream wait: out of memory");
	rc = tp__dev_swq_create(&h->q);
	if (rc) {
		free(h);
		return rc;
	}
	rc = tp__dev_event_create(&h->ord);
	for (i = 0; !rc && i < TP_SWQ_SLOTS; i++)
		rc = tp__dev_event_create(&h->done[i]);
	if (rc) {
		tp__holds_destroy(h, NULL);
		return rc;
	}
	*out = h;
	return 0;
}

/* A free slot: one whose kernel is known to have ended. */
static int free_slot(struct tp_holds *h, int *slot)
{
	int i, done, rc;

	for (i = 0; i < TP_SWQ_SLOTS; i++) {
		if (h->lost[i])
			continue;
		if (h->busy[i] && !h->held[i]) {
			rc = tp__dev_event_query(h->done[i], &done);
			if (rc)
				return rc;
			h->busy[i] = !done;
		}
		if (!h->busy[i]) {
			*slot = i;
			return 0;
		}
	}
	return tp__error(TCPX_P2P_EAGAIN, "stream wait: %d streams held already (release "
			 "some: their transfers must end)", TP_SWQ_SLOTS);
}

int tp__holds_take(struct tp_holds *h, tp_dev_stream *st, void *stream, int *slot)
{
	int rc, i = -1, launched = 0;

	rc = free_slot(h, &i);
	if (!rc) {
		__atomic_store_n(&h->q.word[i], 0, __ATOMIC_SEQ_CST);
		rc = tp__dev_swait_hold(st, stream, &h->q, i, h->ord, h->done[i], &launched);
	}
	if (!rc) {
		h->busy[i] = h->held[i] = true;
		h->live++;
		*slot = i;
	} else if (launched) {
		/* queued, but its end cannot be observed: released at once, its
		 * slot never reused (a new word 0 could hold it again) */
		__atomic_store_n(&h->q.word[i], 1, __ATOMIC_RELEASE);
		h->busy[i] = h->lost[i] = true;
	}
	return rc;
}

bool tp__holds_release(struct tp_holds *h, int slot)
{
	__atomic_store_n(&h->q.word[slot], 1, __ATOMIC_RELEASE);
	h->held[slot] = false;
	return --h->live == 0 && h->drained < h->published;
}

/* Is job i done?  Its slot's stamp is i + 1 once it is, and grows by
 * TP_SWQ_CAP with each later job in the slot, which is published only after
 * job i is done (tp__holds_room): a stamp past i + 1 means done as well. */
static bool job_done(const struct tp_holds *h, uint64_t i)
{
	return __atomic_load_n(&h->q.done[i % TP_SWQ_CAP], __ATOMIC_ACQUIRE) >= i + 1;
}

bool tp__holds_jobs_done(const struct tp_holds *h, uint64_t first, uint32_t n)
{
	for (uint64_t i = first; i < first + n; i++)
		if (!job_done(h, i))
			return false;
	return true;
}

bool tp__holds_bad(struct tp_holds *h)
{
	return __atomic_exchange_n(h->q.err, 0, __ATOMIC_ACQ_REL) != 0;
}

uint32_t tp__holds_room(struct tp_holds *h)
{
	while (h->low < h->published && job_done(h, h->low))
		h->low++;
	return TP_SWQ_CAP - (uint32_t)(h->published - h->low);
}

void tp__holds_push(struct tp_holds *h, const struct tp_swq_job *job)
{
	uint64_t i = h->published++;
	struct tp_swq_job *j = &h->q.job[i % TP_SWQ_CAP];

	*j = *job;
	j->seq = 0;
	/* the stamp last: a kernel that claims it finds the job whole */
	__atomic_store_n(&j->seq, i + 1, __ATOMIC_RELEASE);
}

void tp__holds_commit(struct tp_holds *h)
{
	__atomic_store_n(h->q.tail, h->published, __ATOMIC_RELEASE);
}

int tp__holds_drain(struct tp_holds *h, tp_dev_stream *st)
{
	int rc;

	if (!h || h->drained >= h->published)
		return 0;
	rc = tp__dev_swq_drain(st, &h->q, h->published);
	if (!rc)
		h->drained = h->published;
	return rc;
}

bool tp__holds_keep(struct tp_holds *h, void *p)
{
	if (!h || !h->live)
		return false;
	if (h->nlater == h->later_cap) {
		size_t cap = h->later_cap ? 2 * h->later_cap : 16;
		void **v = realloc(h->later, cap * sizeof(*v));

		if (v) {
			h->later = v;
			h->later_cap = cap;
		}
	}
	if (h->nlater < h->later_cap)
		h->later[h->nlater++] = p;
	else /* leaked rather than a free that waits for the hold */
		TP_WARN("unpack", "out of memory: %p stays allocated", p);
	return true;
}
