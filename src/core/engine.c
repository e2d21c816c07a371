/* The session-wide progress engine.  TCPX moves bytes only inside test()
 * (docs/tcpx.md, plugin contract rule 12), so a connection nobody progresses stands still: every
 * wait, test and progress call therefore drives every connection of the
 * session, not only the one it is about, and an optional thread per
 * session does the same on its own so that callers may post and return
 * (that thread, and the engine's creation and end: engine_thread.c).
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

#include "core/close/close.h"
#include "core/conn.h"
#include "core/engine.h"
#include "core/engine_state.h"
#include "core/pass.h"
#include "core/session.h"
#include "core/stats.h"
#include "util/error.h"
#include "util/log.h"

/* Waiters in thread mode re-check at least this often. */
#define TP_WAIT_SLICE_NS 10000000

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
		     struct tp_pass_result *st)
{
	struct tp_engine *e = s->engine;
	struct tcpx_p2p_conn *c, *start;
	struct tp_pass_result one;
	uint64_t completed = 0, before;
	unsigned i, skip;

	*st = (struct tp_pass_result){ 0 };
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
		tp__pass_conn(c, &one);
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

void tp__engine_each(struct tcpx_p2p_session *s,
		     void (*fn)(struct tcpx_p2p_conn *c, void *arg), void *arg)
{
	struct tp_engine *e = s->engine;

	pthread_rwlock_rdlock(&e->list_lock);
	for (struct tcpx_p2p_conn *c = e->conns.head; c; c = c->elink.next)
		fn(c, arg);
	pthread_rwlock_unlock(&e->list_lock);
}

void tp__post_pass_unlock(struct tcpx_p2p_conn *c)
{
	struct tp_pass_result st;
	uint64_t before = c->completed;

	/* Post what fits now; errors land on the xfers and the conn.  Host
	 * gathers wait for the next pass: the progress thread's (kicked
	 * below), or the caller's wait. */
	c->posting = true;
	c->post_gather = TP_POST_GATHER_BYTES;
	tp__pass_conn(c, &st);
	c->posting = false;
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
	ts = tp__abs_time(deadline);
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

void tp__engine_stats(struct tcpx_p2p_session *s, struct tp_stats *sum, int *nconns)
{
	struct tp_engine *e = s->engine;
	struct tcpx_p2p_conn *c;

	pthread_rwlock_rdlock(&e->list_lock);
	*sum = e->gone;
	*nconns = e->ngone + (int)e->nconns + (int)e->nleaving;
	for (int l = 0; l < 2; l++)
		for (c = l ? e->leaving.head : e->conns.head; c; c = c->elink.next) {
			pthread_mutex_lock(&c->lock);
			tp__stats_add(sum, &c->stats);
			pthread_mutex_unlock(&c->lock);
		}
	pthread_rwlock_unlock(&e->list_lock);
}
