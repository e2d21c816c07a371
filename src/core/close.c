/* Destroyed connections finishing their close handshake (conn.c says
 * what it is).  The caller's conn_destroy returns at once; the conn then
 * sits on its session's closing list, driven by every pass of the session
 * (waits, progress calls, the progress thread) and by session_destroy,
 * until both CLOSEs went through and every control request completed, or
 * until close_timeout_ms passes (the peer did not answer: the comms are
 * closed anyway, and a warning says so).
 *
 * One thread drives the list at a time (close_lock); a pass that finds it
 * taken moves on, as engine passes do with a busy conn. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/core.h"
#include "core/ctl.h"
#include "util/log.h"

/* Passes a destroy makes on its own, at most, until the CLOSE and its
 * empty frames are in the plugin's hands (so that a peer destroyed next in
 * the same thread finds them) and nothing moves any more. */
#define TP_CLOSE_EAGER_PASSES 64

/* One pass of one closing conn.  Returns NULL while it is to go on, ""
 * once closed cleanly, else why it must close now (in reason). */
static const char *step(struct tcpx_p2p_conn *c, bool *moved, char *reason, size_t len)
{
	bool pending = false;
	int rc;

	rc = tp__ctl_close_step(c, moved, &pending);
	if (rc) {
		snprintf(reason, len, "the close handshake failed: %s (%s)", tcpx_p2p_strerror(rc),
			 tp__ctl_close_why(c));
		return reason;
	}
	rc = tp__data_drain(c, moved);
	if (rc) {
		snprintf(reason, len, "the data channels could not be drained: %s (%s)",
			 tcpx_p2p_strerror(rc), tcpx_p2p_last_error());
		return reason;
	}
	if (tp__ctl_close_done(c) && tp__data_drained(c))
		return "";
	if (tp__deadline_passed(c->close_deadline)) {
		snprintf(reason, len, "the peer did not answer the close within %d ms "
			 "(close_timeout_ms)", c->s->cfg.close_timeout_ms);
		return reason;
	}
	return NULL;
}

bool tp__close_pass(struct tcpx_p2p_session *s, bool wait, bool *moved)
{
	struct tcpx_p2p_conn *c, *next;
	const char *end;
	char reason[320];
	bool left;
	void *ctx;

	if (!__atomic_load_n(&s->nclosing, __ATOMIC_ACQUIRE))
		return false;
	if (wait)
		pthread_mutex_lock(&s->close_lock);
	else if (pthread_mutex_trylock(&s->close_lock))
		return true;
	ctx = tp__gpu_save(s);
	for (c = s->closing.head; c; c = next) {
		next = c->elink.next;
		end = step(c, moved, reason, sizeof(reason));
		if (!end)
			continue;
		tp_list_remove(&s->closing, c, elink);
		tp__conn_finish(c, end);
		/* Only now: session_destroy reads 0 as "all finished". */
		__atomic_sub_fetch(&s->nclosing, 1, __ATOMIC_RELEASE);
	}
	left = s->closing.head != NULL;
	tp__dev_ctx_restore(ctx);
	pthread_mutex_unlock(&s->close_lock);
	return left;
}

bool tp__close_drain(struct tcpx_p2p_conn *c)
{
	struct tcpx_p2p_session *s = c->s;
	tp_deadline deadline = tp__deadline_ms(s->cfg.close_timeout_ms);
	struct tp_backoff b = { 0 };
	struct tp_progress st, one;

	for (;;) {
		/* Out of the engine's list, but a caller's thread may still
		 * look at one of its xfers. */
		pthread_mutex_lock(&c->lock);
		tp__progress(c, &st);
		pthread_mutex_unlock(&c->lock);
		if (!tp__conn_caller_inflight(c))
			return true;
		if (c->drain_failed || tp__deadline_passed(deadline))
			return false;
		/* Like every wait of the library: the session's other
		 * connections move meanwhile, whatever the peer does. */
		tp__engine_pass(s, NULL, &one);
		st.moved |= one.moved;
		st.pending |= one.pending;
		tp__close_drive_others(s, &st);
		tp__backoff(&b, &st);
	}
}

void tp__close_linger(struct tcpx_p2p_conn *c)
{
	struct tcpx_p2p_session *s = c->s;
	const char *end = NULL;
	char reason[320];
	bool moved;

	c->close_deadline = tp__deadline_ms(s->cfg.close_timeout_ms);
	/* Earlier closes move on here too: a session whose caller only makes
	 * and destroys conns (no waits) still finishes them. */
	moved = false;
	(void)tp__close_pass(s, false, &moved);
	for (int i = 0; i < TP_CLOSE_EAGER_PASSES && !end; i++) {
		moved = false;
		end = step(c, &moved, reason, sizeof(reason));
		if (!moved && tp__ctl_close_sent(c))
			break;
		if (!moved)
			sched_yield(); /* a plugin that said "not now" */
	}
	if (end) {
		tp__conn_finish(c, end);
		return;
	}
	pthread_mutex_lock(&s->close_lock);
	tp_list_append(&s->closing, c, elink);
	__atomic_add_fetch(&s->nclosing, 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&s->close_lock);
	/* A progress thread asleep for want of connections has one to close. */
	tp__engine_kick(s);
}

/* The sessions of this process.  A close waits for the peer's answer, and
 * the peer may be another session of this process that nobody drives
 * while this thread waits (two sessions in one program, destroyed one
 * after the other): session_destroy drives them too.  A session being
 * driven so is held (drivers), and leaves the list only once released:
 * the passes themselves run outside the list's lock, so a plugin call that
 * blocks there stalls no other thread's session_create or _destroy. */
static pthread_mutex_t sessions_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t sessions_cv = PTHREAD_COND_INITIALIZER;
static TP_LIST(struct tcpx_p2p_session) sessions;
static unsigned nsessions;

void tp__close_register(struct tcpx_p2p_session *s)
{
	pthread_mutex_lock(&sessions_lock);
	tp_list_append(&sessions, s, slink);
	nsessions++;
	pthread_mutex_unlock(&sessions_lock);
}

void tp__close_unregister(struct tcpx_p2p_session *s)
{
	pthread_mutex_lock(&sessions_lock);
	tp_list_remove(&sessions, s, slink);
	nsessions--;
	while (s->drivers)
		pthread_cond_wait(&sessions_cv, &sessions_lock);
	pthread_mutex_unlock(&sessions_lock);
}

void tp__close_drive_others(struct tcpx_p2p_session *self, struct tp_progress *st)
{
	struct tcpx_p2p_session **held;
	struct tp_progress one;
	unsigned n = 0;

	pthread_mutex_lock(&sessions_lock);
	held = nsessions > 1 ? malloc(nsessions * sizeof(*held)) : NULL;
	for (struct tcpx_p2p_session *o = sessions.head; held && o; o = o->slink.next) {
		if (o != self) {
			o->drivers++;
			held[n++] = o;
		}
	}
	pthread_mutex_unlock(&sessions_lock);
	for (unsigned i = 0; i < n; i++) {
		tp__engine_pass(held[i], NULL, &one);
		st->moved |= one.moved;
		st->pending |= one.pending;
	}
	if (!n) {
		free(held);
		return;
	}
	pthread_mutex_lock(&sessions_lock);
	for (unsigned i = 0; i < n; i++)
		held[i]->drivers--;
	pthread_cond_broadcast(&sessions_cv);
	pthread_mutex_unlock(&sessions_lock);
	free(held);
}

void tp__close_all(struct tcpx_p2p_session *s)
{
	struct tp_backoff b = { 0 };
	struct tp_progress st = { 0 };

	while (tp__close_pass(s, true, &st.moved)) {
		tp__close_drive_others(s, &st);
		tp__backoff(&b, &st);
		st = (struct tp_progress){ 0 };
	}
}
