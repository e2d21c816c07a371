/* The session-wide progress engine and its optional thread (engine.c), and
 * the back-off between passes that found nothing to do (backoff.c). */
#ifndef TP_CORE_ENGINE_H
#define TP_CORE_ENGINE_H

#include <stdbool.h>
#include <stdint.h>

#include "util/time.h"

struct tcpx_p2p_conn;
struct tcpx_p2p_session;
struct tp_pass_result;
struct tp_stats;

/* engine.c: the session-wide progress engine and the optional thread. */
int tp__engine_create(struct tcpx_p2p_session *s);
void tp__engine_destroy(struct tcpx_p2p_session *s);
void tp__engine_add(struct tcpx_p2p_session *s, struct tcpx_p2p_conn *c);
/* conn_destroy: out of the passes (remove), then, once its last transfers
 * were failed and counted, its counters folded into the session's (retire);
 * the session's statistics count it all along. */
void tp__engine_remove(struct tcpx_p2p_session *s, struct tcpx_p2p_conn *c);
void tp__engine_retire(struct tcpx_p2p_session *s, struct tcpx_p2p_conn *c);
/* tcpx_p2p_session_stats (api/stats.c): the counters of every conn the
 * session has had, summed into *sum, and how many conns that is. */
void tp__engine_stats(struct tcpx_p2p_session *s, struct tp_stats *sum, int *nconns);
/* Progress every conn of the session once; own (may be NULL) is waited
 * for, the others are skipped while another thread holds them. */
void tp__engine_pass(struct tcpx_p2p_session *s, struct tcpx_p2p_conn *own,
		     struct tp_pass_result *st);
/* fn on every conn in the passes (not those destroyed), the list held:
 * fn takes each conn's lock itself, never the session's around it. */
void tp__engine_each(struct tcpx_p2p_session *s,
		     void (*fn)(struct tcpx_p2p_conn *c, void *arg), void *arg);
/* After queuing something (c->lock held): a first pass, then, unlocked,
 * the engine told what completed in it and woken.  Returns with c unlocked. */
void tp__post_pass_unlock(struct tcpx_p2p_conn *c);
/* n xfers completed outside a pass: tell waiters (thread mode). */
void tp__engine_notify(struct tcpx_p2p_session *s, uint64_t n);
/* A transfer was posted: wake the progress thread. */
void tp__engine_kick(struct tcpx_p2p_session *s);
/* Completions so far, and waiting for the next (thread mode). */
bool tp__engine_threaded(const struct tcpx_p2p_session *s);
uint64_t tp__engine_completions(struct tcpx_p2p_session *s);
void tp__engine_wait_completion(struct tcpx_p2p_session *s, uint64_t seen, tp_deadline deadline);
/* Between passes that found nothing to do: spin, yield, then sleep. */
struct tp_backoff {
	unsigned idle;     /* passes in a row that found nothing to do */
	int64_t idle_since;
};
void tp__backoff(struct tp_backoff *b, const struct tp_pass_result *st);
/* backoff.c: how long the back-off sleeps now (1/16 of the idle time so far,
 * within [4 us, 1 ms]). */
int64_t tp__backoff_sleep_ns(const struct tp_backoff *b);

#endif
