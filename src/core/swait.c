/* Streams that wait for transfers (tcpx_p2p_stream_wait).  A wait takes a
 * slot of the session: a word of pinned, mapped host memory that the
 * application's stream waits on, on the GPU, and that the library sets
 * when the transfer ends (complete or failed), and an event recorded on
 * that stream after the wait.  The slot is used again once its word was
 * set and its event passed: until then the GPU may still read the word. */
#include <stdlib.h>

#include "core/core.h"
#include "util/error.h"
#include "util/log.h"

#define TP_SWAIT_SLOTS 1024u

enum { SW_FREE, SW_PENDING, SW_RETIRING };

struct tp_swait {
	pthread_mutex_t lock;
	uint32_t *word;                   /* TP_SWAIT_SLOTS words, pinned and mapped */
	tp_dev_event *ev[TP_SWAIT_SLOTS]; /* created when the slot is first used */
	uint8_t state[TP_SWAIT_SLOTS];
	unsigned next;                    /* where the search for a free slot starts */
};

void tp__swait_destroy(struct tp_swait *w)
{
	unsigned i;

	if (!w)
		return;
	/* Every transfer has ended (its conn is gone), so every word is set;
	 * a stream that has not read it yet still will. */
	for (i = 0; i < TP_SWAIT_SLOTS; i++) {
		if (w->state[i] == SW_RETIRING && tp__dev_event_sync(w->ev[i]))
			TP_WARN("stream", "waiting for a stream to pass its wait: %s",
				tcpx_p2p_last_error());
		tp__dev_event_destroy(w->ev[i]);
	}
	tp__dev_host_free(w->word);
	pthread_mutex_destroy(&w->lock);
	free(w);
}

static int swait_get(struct tcpx_p2p_session *s, struct tp_swait **out)
{
	struct tp_swait *w;
	int rc = 0;

	pthread_mutex_lock(&s->lock);
	w = s->swait;
	if (!w) {
		w = calloc(1, sizeof(*w));
		rc = w ? 0 : tp__error(TCPX_P2P_ENOMEM, "stream_wait: out of memory");
		if (!rc && pthread_mutex_init(&w->lock, NULL)) {
			free(w);
			w = NULL;
			rc = tp__error(TCPX_P2P_ENOMEM, "stream_wait: mutex init failed");
		}
		if (!rc)
			rc = tp__dev_host_alloc((void **)&w->word, TP_SWAIT_SLOTS * sizeof(uint32_t));
		if (rc && w) {
			pthread_mutex_destroy(&w->lock);
			free(w);
		}
		if (!rc)
			s->swait = w;
	}
	pthread_mutex_unlock(&s->lock);
	*out = w;
	return rc;
}

/* A free slot, its word cleared (w->lock held). */
static int slot_take(struct tp_swait *w, unsigned *out)
{
	unsigned k, i;
	int done, rc;

	for (k = 0; k < TP_SWAIT_SLOTS; k++) {
		i = (w->next + k) % TP_SWAIT_SLOTS;
		if (w->state[i] == SW_RETIRING && !tp__dev_event_query(w->ev[i], &done) && done)
			w->state[i] = SW_FREE;
		if (w->state[i] != SW_FREE)
			continue;
		if (!w->ev[i]) {
			rc = tp__dev_event_create(&w->ev[i]);
			if (rc)
				return rc;
		}
		w->next = i + 1;
		__atomic_store_n(&w->word[i], 0u, __ATOMIC_RELAXED);
		*out = i;
		return 0;
	}
	return tp__error(TCPX_P2P_EAGAIN, "stream_wait: %u stream waits not yet passed",
			 TP_SWAIT_SLOTS);
}

void tp__swait_end(struct tcpx_p2p_session *s, struct tcpx_p2p_xfer *x)
{
	struct tp_swait *w = s->swait;
	unsigned i = x->swait - 1;

	pthread_mutex_lock(&w->lock);
	__atomic_store_n(&w->word[i], 1u, __ATOMIC_RELEASE);
	w->state[i] = SW_RETIRING;
	pthread_mutex_unlock(&w->lock);
	x->swait = 0;
}

/* Queue the wait for slot i on stream (w->lock held). */
static int slot_wait(struct tp_swait *w, unsigned i, void *stream)
{
	int rc = tp__dev_stream_wait_word(stream, &w->word[i], 1);

	if (!rc)
		rc = tp__dev_event_record_on(w->ev[i], stream);
	if (rc) {
		/* A wait queued without its event: let it pass, and keep the
		 * slot until the session ends. */
		__atomic_store_n(&w->word[i], 1u, __ATOMIC_RELEASE);
		w->state[i] = SW_RETIRING;
		return rc;
	}
	w->state[i] = SW_PENDING;
	return 0;
}

int tcpx_p2p_stream_wait(tcpx_p2p_xfer *x, void *stream, unsigned flags)
{
	struct tcpx_p2p_session *s;
	struct tcpx_p2p_conn *c;
	struct tp_swait *w;
	unsigned i = 0;
	void *ctx;
	int rc;

	if (!x || flags)
		return tp__error(TCPX_P2P_EINVAL, "stream_wait: NULL xfer or flags 0x%x", flags);
	c = x->c;
	if (!c) /* failed, and its conn destroyed */
		return 0;
	s = c->s;
	if (s->cfg.gpu < 0)
		return tp__error(TCPX_P2P_ENOTSUP, "stream_wait: the session has no GPU (gpu -1)");
	ctx = tp__gpu_save(s);
	rc = tp__session_use_gpu(s);
	if (!rc)
		rc = swait_get(s, &w);
	if (rc)
		goto restore;
	/* Under the conn's lock, where transfers end: x cannot end between
	 * the look at done and the slot being its. */
	pthread_mutex_lock(&c->lock);
	if (__atomic_load_n(&x->done, __ATOMIC_ACQUIRE))
		goto unlock;
	if (x->swait) {
		rc = tp__error(TCPX_P2P_EBUSY, "stream_wait: a stream already waits for this "
			       "transfer (let others wait for that stream: cudaEventRecord, "
			       "cudaStreamWaitEvent)");
		goto unlock;
	}
	pthread_mutex_lock(&w->lock);
	rc = slot_take(w, &i);
	if (!rc)
		rc = slot_wait(w, i, stream);
	pthread_mutex_unlock(&w->lock);
	if (!rc)
		x->swait = i + 1;
unlock:
	pthread_mutex_unlock(&c->lock);
restore:
	tp__dev_ctx_restore(ctx);
	return rc;
}
