/* The session's completion queue and the file descriptor that tells an
 * event loop something ended (cq.h).
 *
 * The fd is an eventfd, made on the first tcpx_p2p_session_fd.  It is
 * written once per clear: `signalled` says a write is outstanding, so an end
 * costs an atomic exchange, not a system call, while the fd is already
 * readable.  tcpx_p2p_completions reads the fd, then clears the flag (tp__cq_clear),
 * both *before* it drives and takes the queue (tp__cq_take), and an end is queued *before* the
 * flag is looked at, so an end is never both missed by the drain and left
 * unsignalled. */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "core/cq.h"
#include "core/session.h"
#include "core/xfer.h"
#include "util/error.h"

int tp__cq_init(struct tp_cq *q)
{
	memset(q, 0, sizeof(*q));
	q->fd = -1;
	if (pthread_mutex_init(&q->lock, NULL))
		return tp__error(TCPX_P2P_ENOMEM, "session_create: mutex init failed");
	return 0;
}

void tp__cq_fini(struct tp_cq *q)
{
	struct tcpx_p2p_xfer *x;

	while ((x = q->ended.head)) {
		tp_list_remove(&q->ended, x, clink);
		__atomic_store_n(&x->cq, NULL, __ATOMIC_RELAXED);
	}
	if (q->fd >= 0)
		close(q->fd);
	pthread_mutex_destroy(&q->lock);
}

static void signal_fd(struct tp_cq *q)
{
	uint64_t one = 1;
	int fd = __atomic_load_n(&q->fd, __ATOMIC_ACQUIRE);

	if (fd < 0 || __atomic_exchange_n(&q->signalled, 1, __ATOMIC_ACQ_REL))
		return;
	/* Fails only with the counter at its maximum: readable all the same. */
	(void)!write(fd, &one, sizeof(one));
}

void tp__cq_push(struct tcpx_p2p_session *s, struct tcpx_p2p_xfer *x)
{
	struct tp_cq *q = &s->cq;

	pthread_mutex_lock(&q->lock);
	tp_list_append(&q->ended, x, clink);
	__atomic_store_n(&x->cq, q, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&q->lock);
	signal_fd(q);
}

void tp__cq_forget(struct tcpx_p2p_xfer *x)
{
	struct tp_cq *q = __atomic_load_n(&x->cq, __ATOMIC_ACQUIRE);

	if (!q)
		return;
	pthread_mutex_lock(&q->lock);
	if (__atomic_load_n(&x->cq, __ATOMIC_RELAXED)) {
		tp_list_remove(&q->ended, x, clink);
		__atomic_store_n(&x->cq, NULL, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&q->lock);
}

void tp__cq_wake(struct tcpx_p2p_session *s)
{
	signal_fd(&s->cq);
}

int tp__cq_fd(struct tp_cq *q, int *fd)
{
	int rc = 0;

	pthread_mutex_lock(&q->lock);
	if (q->fd < 0) {
		int efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);

		if (efd < 0) {
			rc = tp__error(TCPX_P2P_ENET, "session_fd: eventfd: %s", strerror(errno));
			goto unlock;
		}
		__atomic_store_n(&q->fd, efd, __ATOMIC_RELEASE);
		/* Ends queued before the fd existed are reported by it too. */
		if (q->ended.head) {
			__atomic_store_n(&q->signalled, 0, __ATOMIC_RELAXED);
			pthread_mutex_unlock(&q->lock);
			signal_fd(q);
			*fd = efd;
			return 0;
		}
	}
	*fd = q->fd;
unlock:
	pthread_mutex_unlock(&q->lock);
	return rc;
}

void tp__cq_clear(struct tp_cq *q)
{
	uint64_t count;
	int fd;

	/* Cleared first: what this call's own pass finds (a notification,
	 * which it does not take) signals the fd again.  The counter is read
	 * before the flag is cleared: an end queued in between found the flag
	 * still set and wrote nothing, and is taken after the pass
	 * (tp__cq_take); one queued after
	 * writes again.  (Clearing the flag first would let such a write be
	 * swallowed by the read, leaving the flag set and the fd silent for
	 * good.)  Read on every call, so that no count outlives its flag. */
	fd = __atomic_load_n(&q->fd, __ATOMIC_ACQUIRE);
	if (fd >= 0) {
		(void)!read(fd, &count, sizeof(count));
		__atomic_store_n(&q->signalled, 0, __ATOMIC_RELEASE);
	}
}

int tp__cq_take(struct tp_cq *q, tcpx_p2p_completion *out, int max)
{
	struct tcpx_p2p_xfer *x;
	int got = 0;

	pthread_mutex_lock(&q->lock);
	while (got < max && (x = q->ended.head)) {
		tp_list_remove(&q->ended, x, clink);
		__atomic_store_n(&x->cq, NULL, __ATOMIC_RELAXED);
		out[got].xfer = x;
		out[got].user_data = x->user_data;
		out[got].status = x->err;
		got++;
	}
	/* Left for the next call: keep the fd readable so it comes. */
	if (q->ended.head) {
		pthread_mutex_unlock(&q->lock);
		signal_fd(q);
	} else {
		pthread_mutex_unlock(&q->lock);
	}
	return got;
}
