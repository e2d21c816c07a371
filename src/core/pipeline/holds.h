/* Stream holds (holds.c): the callers' CUDA streams held by hold kernels
 * (tcpx_p2p_stream_wait), and the job queue those kernels perform the
 * session's device work from while any stream is held (tp_device.h says
 * why).  The session's device queue (devq.c) owns one, made at the first
 * stream wait; every call here is made under the device queue's lock. */
#ifndef TP_CORE_HOLDS_H
#define TP_CORE_HOLDS_H

#include <stdbool.h>
#include <stdint.h>

#include "device/tp_device.h"

/* How long a session's end waits for a held stream to reach its hold
 * kernel (work the caller queued before it) before it leaves the queue's
 * memory to the kernel rather than free it under it; also the bound on
 * waiting for the kernels to make room in the queue. */
#define TP_HOLD_EXIT_MS 10000

/* What a hold kernel may find in the queue's memory: kept apart from the
 * device queue so that a session whose hold never started can leave it
 * behind. */
struct tp_holds {
	struct tp_swq q;
	tp_dev_event *ord;                /* the session's stream, at a hold */
	tp_dev_event *done[TP_SWQ_SLOTS]; /* after each slot's hold kernel */
	bool busy[TP_SWQ_SLOTS];          /* its kernel may still run */
	bool held[TP_SWQ_SLOTS];          /* its word not yet set */
	bool lost[TP_SWQ_SLOTS];          /* released, its end unknowable: never reused */
	int live;                         /* slots held */
	/* Jobs published, and every job below `low` done: its queue slot free,
	 * whatever the launches before it (retired in order) are waiting for. */
	uint64_t published, low;
	uint64_t drained;                 /* jobs below it left to the drain */
	/* Pinned host memory given up while a stream was held, freed with the
	 * session: cudaFreeHost waits for the whole GPU, a hold kernel (of any
	 * session) included, and these are old copy lists, few and small. */
	void **later;
	size_t nlater, later_cap;
};

int tp__holds_create(struct tp_holds **out);
/* Release every hold (their session is going) and free the queue once
 * each kernel ended (bounded by TP_HOLD_EXIT_MS; else left allocated);
 * st, the session's stream, is synchronised for a drain first.  NULL h:
 * nothing. */
void tp__holds_destroy(struct tp_holds *h, tp_dev_stream *st);

/* Hold the caller's `stream` after all work now on st (the session's
 * stream): *slot names the hold.  EAGAIN when TP_SWQ_SLOTS are held. */
int tp__holds_take(struct tp_holds *h, tp_dev_stream *st, void *stream, int *slot);
/* Let the hold in slot go.  True when it was the last and jobs no kernel
 * claimed are left: the caller drains them (tp__holds_drain). */
bool tp__holds_release(struct tp_holds *h, int slot);

/* Jobs [first, first + n) all stamped done by the kernels that claimed
 * them (they finish in any order). */
bool tp__holds_jobs_done(const struct tp_holds *h, uint64_t first, uint32_t n);
/* Did a kernel meet a record outside its chunk since the last call? */
bool tp__holds_bad(struct tp_holds *h);
/* Free places in the queue, once the done jobs at its low end are retired. */
uint32_t tp__holds_room(struct tp_holds *h);
/* Publish one job (its seq is stamped here), then, after the last of a
 * launch's, the queue's tail (tp__holds_commit). */
void tp__holds_push(struct tp_holds *h, const struct tp_swq_job *job);
void tp__holds_commit(struct tp_holds *h);
/* Jobs no hold kernel claimed go to a drain kernel on st (it claims as the
 * holds do, so the two may run at once).  0 (also for NULL h), or the
 * launch's error (the jobs are then left to the holds). */
int tp__holds_drain(struct tp_holds *h, tp_dev_stream *st);

/* Pinned host memory p given up while a stream is held: kept, to be freed
 * with the holds (true; leaked with a warning if out of memory), or false
 * when nothing is held (NULL h included) and the caller frees it now. */
bool tp__holds_keep(struct tp_holds *h, void *p);

#endif
