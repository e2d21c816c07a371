/* Destroyed connections finishing their close handshake (api/destroy.c says
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

#include "core/close/close.h"
#include "core/conn.h"
#include "core/ctl.h"
#include "core/session.h"
#include "util/error.h"

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

	rc = tp__close_step(c, moved, &pending);
	if (rc) {
		snprintf(reason, len, "the close handshake failed: %s (%s)", tcpx_p2p_strerror(rc),
			 c->ctl->close_why);
		return reason;
	}
	rc = tp__close_drain(c, moved);
	if (rc) {
		snprintf(reason, len, "the data channels could not be drained: %s (%s)",
			 tcpx_p2p_strerror(rc), tcpx_p2p_last_error());
		return reason;
	}
	if (tp__ctl_close_done(c) && tp__close_drained(c))
		return "";
	if (tp__deadline_passed(c->closing.deadline)) {
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
		tp__close_finish(c, end);
		/* Only now: session_destroy reads 0 as "all finished". */
		__atomic_sub_fetch(&s->nclosing, 1, __ATOMIC_RELEASE);
	}
	left = s->closing.head != NULL;
	tp__dev_ctx_restore(ctx);
	pthread_mutex_unlock(&s->close_lock);
	return left;
}

bool tp__close_linger(struct tcpx_p2p_conn *c)
{
	struct tcpx_p2p_session *s = c->s;
	const char *end = NULL;
	char reason[320];
	bool moved;

	c->closing.deadline = tp__deadline_ms(s->cfg.close_timeout_ms);
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
		tp__close_finish(c, end);
		return false;
	}
	pthread_mutex_lock(&s->close_lock);
	tp_list_append(&s->closing, c, elink);
	__atomic_add_fetch(&s->nclosing, 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&s->close_lock);
	return true;
}
