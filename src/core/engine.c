/* The session-wide progress engine.  TCPX moves bytes only inside test()
 * (docs/tcpx.md, plugin contract rule 12), so a connection nobody progresses stands still: every
 * wait, test and progress call therefore drives every connection of the
 * session, not only the one it is about, and an optional thread per
 * session does the same on its own so that callers may post and return.
 *
 * Locking: the engine's rwlock guards the list of conns.  A pass holds it
 * for reading and takes each conn's lock with trylock (a conn another
 * thread holds is being progressed by that thread, or is posting), except
 * the conn the caller waits on, which it locks.  Creating and destroying a
 * conn take the list for writing; nothing holds a conn lock while taking
 * the list, so the order list -> conn never inverts. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/close/close.h"
#include "core/conn.h"
#include "core/engine.h"
#include "core/pass.h"
#include "core/session.h"
#include "core/stats.h"
#include "util/error.h"
#include "util/log.h"

/* Waiters in thread mode re-check at least this often. */
#define TP_WAIT_SLICE_NS 10000000

struct tp_engine {
	pthread_rwlock_t list_lock;
	TP_LIST(struct tcpx_p2p_conn) conns; /* through elink */
	unsigned nconns;
	/* Destroyed conns no pass reaches any more whose counters are not
	 * folded into gone yet (conn_destroy between the two). */
	TP_LIST(struct tcpx_p2p_conn) leaving; /* through elink */
	unsigned nleaving;
	unsigned rr; /* where the next pass starts (fairness) */
	/* The counters of the conns removed so far (stats.c), and how many. */
	struct tp_stats gone;
	int ngone;

	/* Completion notices for waiters while the thread progresses. */
	pthread_mutex_t done_lock;
	pthread_cond_t done_cv;
	uint64_t completions;

	/* The progress thread (TCPX_P2P_PROGRESS_THREAD), or else, with
	 * heartbeats on, the keepalive thread; tid is the one that runs. */
	bool threaded;
	bool keepalive;
	pthread_t tid;
	pid_t pid; /* the process that started it */
	int64_t last_pass_ns; /* when a pass last started (atomic) */
	pthread_mutex_t work_lock;
	pthread_cond_t work_cv;
	bool stop;
	uint64_t kicks; /* posts seen; the thread sleeps only when idle */
};

static struct timespec abs_time(int64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000), (long)(ns % 1000000000) };

	return ts;
}

void tp__engine_notify(struct tcpx_p2p_session *s, uint64_t n)
{
	struct tp_engine *e = s->engine;

	if (!n || !e->threaded)
		return;
	pthread_mutex_lock(&e->done_lock);
	e->completions += n;
	pthread_cond_broadcast(&e->done_cv);
	pthread_mutex_unlock(&e->done_lock);
}

void tp__engine_pass(struct tcpx_p2p_session *s, struct tcpx_p2p_conn *own,
		     struct tp_progress *st)
{
	struct tp_engine *e = s->engine;
	struct tcpx_p2p_conn *c, *start;
	struct tp_progress one;
	uint64_t completed = 0, before;
	unsigned i, skip;

	*st = (struct tp_progress){ 0 };
	__atomic_store_n(&e->last_pass_ns, tp__now_ns(), __ATOMIC_RELAXED);
	pthread_rwlock_rdlock(&e->list_lock);
	st->conns = e->nconns != 0;
	/* Start each pass one conn further along, so that no conn always
	 * goes last when passes are cut short by contention. */
	skip = __atomic_fetch_add(&e->rr, 1, __ATOMIC_RELAXED);
	start = e->conns.head;
	for (i = e->nconns ? skip % e->nconns : 0; i && start; i--)
		start = start->elink.next;
	c = start;
	while (c) {
		if (c == own) {
			pthread_mutex_lock(&c->lock);
		} else if (pthread_mutex_trylock(&c->lock)) {
			/* Another thread has it; it may have work all the same. */
			st->busy = true;
			goto next;
		}
		before = c->completed;
		tp__progress(c, &one);
		completed += c->completed - before;
		pthread_mutex_unlock(&c->lock);
		st->moved |= one.moved;
		st->pending |= one.pending;
		st->busy |= one.busy;
next:
		c = c->elink.next ? c->elink.next : e->conns.head;
		if (c == start)
			break;
	}
	pthread_rwlock_unlock(&e->list_lock);
	tp__engine_notify(s, completed);
	/* Destroyed conns finishing their close (close/list.c). */
	if (tp__close_pass(s, false, &st->moved))
		st->conns = true;
}

void tp__post_pass_unlock(struct tcpx_p2p_conn *c)
{
	struct tp_progress st;
	uint64_t before = c->completed;

	/* Post what fits now; errors land on the xfers and the conn. */
	tp__progress(c, &st);
	before = c->completed - before;
	pthread_mutex_unlock(&c->lock);
	tp__engine_notify(c->s, before);
	tp__engine_kick(c->s);
}

bool tp__engine_threaded(const struct tcpx_p2p_session *s)
{
	return s->engine->threaded;
}

uint64_t tp__engine_completions(struct tcpx_p2p_session *s)
{
	struct tp_engine *e = s->engine;
	uint64_t n;

	pthread_mutex_lock(&e->done_lock);
	n = e->completions;
	pthread_mutex_unlock(&e->done_lock);
	return n;
}

void tp__engine_wait_completion(struct tcpx_p2p_session *s, uint64_t seen, tp_deadline deadline)
{
	struct tp_engine *e = s->engine;
	struct timespec ts;

	/* Waiters re-check at least this often whatever they were told. */
	if (deadline - tp__now_ns() > TP_WAIT_SLICE_NS)
		deadline = tp__now_ns() + TP_WAIT_SLICE_NS;
	ts = abs_time(deadline);
	pthread_mutex_lock(&e->done_lock);
	while (e->completions == seen && !tp__deadline_passed(deadline))
		if (pthread_cond_timedwait(&e->done_cv, &e->done_lock, &ts) == ETIMEDOUT)
			break;
	pthread_mutex_unlock(&e->done_lock);
}

void tp__engine_kick(struct tcpx_p2p_session *s)
{
	struct tp_engine *e = s->engine;

	if (!e->threaded)
		return;
	pthread_mutex_lock(&e->work_lock);
	e->kicks++;
	pthread_cond_signal(&e->work_cv);
	pthread_mutex_unlock(&e->work_lock);
}

/* Progress until stopped.  While no transfer is pending anywhere in the
 * session, sleep on the work condition (a post wakes it): for ever when
 * the session has no connection, else for the back-off's time, since a
 * peer may announce a write, a read or a send on a control channel at any
 * moment and TCPX moves those bytes only inside test(). */
static void *progress_main(void *arg)
{
	struct tcpx_p2p_session *s = arg;
	struct tp_engine *e = s->engine;
	struct tp_backoff b = { 0 };
	struct tp_progress st;
	struct timespec until;
	uint64_t kicks = 0;

	if (tp__session_use_gpu(s))
		TP_WARN("progress", "progress thread: cannot select gpu %d: %s", s->cfg.gpu,
			tcpx_p2p_last_error());
	for (;;) {
		pthread_mutex_lock(&e->work_lock);
		if (e->stop) {
			pthread_mutex_unlock(&e->work_lock);
			break;
		}
		kicks = e->kicks;
		pthread_mutex_unlock(&e->work_lock);
		tp__engine_pass(s, NULL, &st);
		if (st.busy || st.pending) {
			tp__backoff(&b, &st);
			continue;
		}
		if (st.moved || b.idle == 0) {
			b.idle = 1;
			b.idle_since = tp__now_ns();
		}
		until = abs_time(tp__now_ns() + tp__backoff_sleep_ns(&b));
		pthread_mutex_lock(&e->work_lock);
		while (!e->stop && e->kicks == kicks) {
			if (!st.conns)
				pthread_cond_wait(&e->work_cv, &e->work_lock);
			else if (pthread_cond_timedwait(&e->work_cv, &e->work_lock, &until))
				break;
		}
		pthread_mutex_unlock(&e->work_lock);
	}
	return NULL;
}

/* Without the progress thread, passes run only while the application
 * drives its session, and so do heartbeats: an application busy elsewhere
 * for the peer's dead_after_ms (setting up GPU memory on a loaded machine,
 * a long computation) would be presumed dead and lose its connections.
 * So this thread wakes every half heartbeat interval and, when no pass has
 * started since its last look, runs one: heartbeats go out, the peer's are
 * heard, and whatever else is ready moves.  While the application drives,
 * it only looks at a clock. */
static void *keepalive_main(void *arg)
{
	struct tcpx_p2p_session *s = arg;
	struct tp_engine *e = s->engine;
	int64_t period = (int64_t)s->cfg.heartbeat_ms * TP_NS_PER_MS / 2;
	struct tp_progress st;
	struct timespec until;
	bool gpu_selected = false;

	pthread_mutex_lock(&e->work_lock);
	while (!e->stop) {
		until = abs_time(tp__now_ns() + period);
		if (pthread_cond_timedwait(&e->work_cv, &e->work_lock, &until) != ETIMEDOUT ||
		    tp__now_ns() - __atomic_load_n(&e->last_pass_ns, __ATOMIC_RELAXED) < period)
			continue;
		pthread_mutex_unlock(&e->work_lock);
		if (!gpu_selected) {
			gpu_selected = true;
			if (tp__session_use_gpu(s))
				TP_WARN("progress", "keepalive thread: cannot select gpu %d: %s",
					s->cfg.gpu, tcpx_p2p_last_error());
		}
		tp__engine_pass(s, NULL, &st);
		pthread_mutex_lock(&e->work_lock);
	}
	pthread_mutex_unlock(&e->work_lock);
	return NULL;
}

static void engine_free(struct tp_engine *e)
{
	pthread_cond_destroy(&e->work_cv);
	pthread_mutex_destroy(&e->work_lock);
	pthread_cond_destroy(&e->done_cv);
	pthread_mutex_destroy(&e->done_lock);
	pthread_rwlock_destroy(&e->list_lock);
	free(e);
}

/* The engine's locks and condition variables: 0, or the error of the
 * first that could not be made (nothing left made). */
static int engine_locks_init(struct tp_engine *e)
{
	pthread_rwlockattr_t attr;
	pthread_condattr_t cattr;
	int rc;

	/* Writers (conn create/destroy) must not starve behind a progress
	 * thread that keeps the list read-locked most of the time. */
	rc = pthread_rwlockattr_init(&attr);
	if (rc)
		return rc;
	rc = pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	if (!rc)
		rc = pthread_rwlock_init(&e->list_lock, &attr);
	pthread_rwlockattr_destroy(&attr);
	if (rc)
		return rc;
	rc = pthread_mutex_init(&e->done_lock, NULL);
	if (rc)
		goto no_done_lock;
	/* Deadlines come from tp__now_ns(), a CLOCK_MONOTONIC time. */
	rc = pthread_condattr_init(&cattr);
	if (rc)
		goto no_cattr;
	rc = pthread_condattr_setclock(&cattr, CLOCK_MONOTONIC);
	if (rc)
		goto no_done_cv;
	rc = pthread_cond_init(&e->done_cv, &cattr);
	if (rc)
		goto no_done_cv;
	rc = pthread_mutex_init(&e->work_lock, NULL);
	if (rc)
		goto no_work_lock;
	rc = pthread_cond_init(&e->work_cv, &cattr);
	if (rc)
		goto no_work_cv;
	pthread_condattr_destroy(&cattr);
	return 0;
no_work_cv:
	pthread_mutex_destroy(&e->work_lock);
no_work_lock:
	pthread_cond_destroy(&e->done_cv);
no_done_cv:
	pthread_condattr_destroy(&cattr);
no_cattr:
	pthread_mutex_destroy(&e->done_lock);
no_done_lock:
	pthread_rwlock_destroy(&e->list_lock);
	return rc;
}

int tp__engine_create(struct tcpx_p2p_session *s)
{
	struct tp_engine *e = calloc(1, sizeof(*e));
	const char *what;
	int rc;

	if (!e)
		return tp__error(TCPX_P2P_ENOMEM, "session_create: out of memory");
	rc = engine_locks_init(e);
	if (rc) {
		free(e);
		return tp__error(TCPX_P2P_ENOMEM, "session_create: cannot create the progress "
				 "engine's locks: %s", strerror(rc));
	}
	s->engine = e;
	e->last_pass_ns = tp__now_ns();
	if (s->cfg.progress_thread)
		e->threaded = true;
	else if (s->cfg.heartbeat_ms > 0)
		e->keepalive = true;
	else
		return 0;
	what = e->threaded ? "progress" : "keepalive";
	e->pid = getpid();
	rc = pthread_create(&e->tid, NULL, e->threaded ? progress_main : keepalive_main, s);
	if (rc) {
		s->engine = NULL;
		engine_free(e);
		return tp__error(TCPX_P2P_ENOMEM, "session_create: cannot start the %s thread: %s",
				 what, strerror(rc));
	}
	return 0;
}

void tp__engine_destroy(struct tcpx_p2p_session *s)
{
	struct tp_engine *e = s->engine;

	if (!e)
		return;
	/* A forked child has none of its parent's threads (and may hold
	 * copies of locks they held): nothing to stop there. */
	if ((e->threaded || e->keepalive) && e->pid == getpid()) {
		pthread_mutex_lock(&e->work_lock);
		e->stop = true;
		pthread_cond_signal(&e->work_cv);
		pthread_mutex_unlock(&e->work_lock);
		pthread_join(e->tid, NULL);
	}
	s->engine = NULL;
	engine_free(e);
}

void tp__engine_add(struct tcpx_p2p_session *s, struct tcpx_p2p_conn *c)
{
	struct tp_engine *e = s->engine;

	pthread_rwlock_wrlock(&e->list_lock);
	tp_list_prepend(&e->conns, c, elink);
	e->nconns++;
	pthread_rwlock_unlock(&e->list_lock);
	/* A thread asleep for want of connections now has one to watch. */
	tp__engine_kick(s);
}

void tp__engine_remove(struct tcpx_p2p_session *s, struct tcpx_p2p_conn *c)
{
	struct tp_engine *e = s->engine;

	pthread_rwlock_wrlock(&e->list_lock);
	tp_list_remove(&e->conns, c, elink);
	e->nconns--;
	tp_list_prepend(&e->leaving, c, elink);
	e->nleaving++;
	pthread_rwlock_unlock(&e->list_lock);
}

void tp__engine_retire(struct tcpx_p2p_session *s, struct tcpx_p2p_conn *c)
{
	struct tp_engine *e = s->engine;

	pthread_rwlock_wrlock(&e->list_lock);
	tp_list_remove(&e->leaving, c, elink);
	e->nleaving--;
	pthread_mutex_lock(&c->lock);
	tp__stats_add(&e->gone, &c->stats);
	pthread_mutex_unlock(&c->lock);
	e->ngone++;
	pthread_rwlock_unlock(&e->list_lock);
}

static void engine_stats(struct tcpx_p2p_session *s, struct tp_stats *sum, int *nconns)
{
	struct tp_engine *e = s->engine;
	struct tcpx_p2p_conn *c;

	pthread_rwlock_rdlock(&e->list_lock);
	*sum = e->gone;
	*nconns = e->ngone + (int)e->nconns + (int)e->nleaving;
	for (c = e->conns.head; c; c = c->elink.next) {
		pthread_mutex_lock(&c->lock);
		tp__stats_add(sum, &c->stats);
		pthread_mutex_unlock(&c->lock);
	}
	for (c = e->leaving.head; c; c = c->elink.next) {
		pthread_mutex_lock(&c->lock);
		tp__stats_add(sum, &c->stats);
		pthread_mutex_unlock(&c->lock);
	}
	pthread_rwlock_unlock(&e->list_lock);
}

TCPX_P2P_API int tcpx_p2p_session_stats(tcpx_p2p_session *s, tcpx_p2p_stats *out)
{
	struct tp_stats st;
	int nconns, rc = tp__stats_check(s, out, "tcpx_p2p_session_stats");

	if (rc)
		return rc;
	engine_stats(s, &st, &nconns);
	tp__stats_export(&st, nconns, out);
	return 0;
}
