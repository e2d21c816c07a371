/* The sessions of the process (close.h), driven while a close waits. */
#include <stdlib.h>

#include "core/close/close.h"
#include "core/engine.h"
#include "core/pass.h"
#include "core/session.h"

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

void tp__close_drive_others(struct tcpx_p2p_session *self, struct tp_pass_result *st)
{
	struct tcpx_p2p_session **held;
	struct tp_pass_result one;
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
	struct tp_pass_result st = { 0 };

	while (tp__close_pass(s, true, &st.moved)) {
		tp__close_drive_others(s, &st);
		tp__backoff(&b, &st);
		st = (struct tp_pass_result){ 0 };
	}
}
