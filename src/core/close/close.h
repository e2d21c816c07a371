/* Closing a connection, in one place (docs/architecture.md, "Closing a
 * connection"):
 *   exchange.c   both sides' CLOSE on the control channel: queuing ours
 *                (the data channels frozen, their request counts final),
 *                answering the peer's, and the close's part of a pass
 *   drain.c      the data requests either side still has with the plugin,
 *                completed by empty sends and throw-away receives
 *   finish.c     closing the comms and freeing the connection
 *   list.c       the session's closing list: destroyed connections whose
 *                handshake still runs, driven by the engine's passes
 *   sessions.c   the process's sessions, driven while a close waits (the
 *                peer may be one of them)
 *   (tcpx_p2p_conn_destroy, which starts a close: api/destroy.c)
 * The pass enters it through tp__close_in_pass; the engine through
 * tp__close_pass; the session through tp__close_register, _unregister
 * and _all. */
#ifndef TP_CORE_CLOSE_H
#define TP_CORE_CLOSE_H

#include <stdbool.h>
#include <stdint.h>

struct tcpx_p2p_conn;
struct tcpx_p2p_session;
struct tp_pass_result;

/* exchange.c */
/* Queue our CLOSE: no chunk is posted and no message follows it (0, or
 * ENOMEM). */
int tp__close_queue(struct tcpx_p2p_conn *c);
/* A pass has just failed c (mostly for a cause of the peer's: a protocol
 * error, its silence, a plugin error on a data channel; or this side's
 * own, such as memory): where the control channel
 * can still take it, our CLOSE goes out, best effort, so that the peer's
 * transfers fail at once rather than after its dead_after_ms.  Nothing
 * waits for the peer's answer: later passes only push the CLOSE out, and
 * conn_destroy closes the comms at once, as for any failed conn. */
void tp__close_tell(struct tcpx_p2p_conn *c);
/* The close's part of a pass over c (its control channel driven first):
 * a live conn whose peer's CLOSE just arrived answers it, failing what is
 * pending with ECLOSED; a failed conn that is closing drives its
 * handshake and drain.  0: c is live, the pass goes on; else the error the
 * pass ends with (c's own, or what the peer's CLOSE broke: EPROTO). */
int tp__close_in_pass(struct tcpx_p2p_conn *c, struct tp_pass_result *st);
/* One step of a closing conn's handshake (its first error sticks, its
 * detail in ctl->close_why). */
int tp__close_step(struct tcpx_p2p_conn *c, bool *moved, bool *pending);

/* drain.c */
/* A closing conn posts no more chunks: those prepared and not yet handed
 * to the plugin are dropped, so that each comm's count of requests
 * (issued) is final, as its CLOSE says. */
void tp__close_freeze(struct tcpx_p2p_conn *c);
/* The peer's CLOSE counts, checked (EPROTO beyond what it can have) and
 * turned into what each comm posts in all. */
int tp__close_counts(struct tcpx_p2p_conn *c);
/* Drive a closing conn's data channels once (test, consume, post what
 * the peer's count asks); 0 or the error that ends the draining. */
int tp__close_drain(struct tcpx_p2p_conn *c, bool *moved);
/* Every data request of both sides has completed. */
bool tp__close_drained(const struct tcpx_p2p_conn *c);

/* finish.c: close the comms of a destroyed conn (what is still posted
 * counts as an unclean close, said with reason) and free it. */
void tp__close_finish(struct tcpx_p2p_conn *c, const char *reason);
/* After the comms are closed (or at a clean destroy): the failed xfers
 * let go of their regions and the caller's xfers are detached. */
void tp__close_drop_xfers(struct tcpx_p2p_conn *c);

/* list.c */
/* Take c (destroyed, its CLOSE queued): drive it while it moves, then
 * leave it on the session's closing list (true), or finish it (false). */
bool tp__close_linger(struct tcpx_p2p_conn *c);
/* Drive every closing conn once and finish those done or out of time;
 * wait: take the list even if another thread drives it.  Returns whether
 * some remain; *moved, whether one advanced. */
bool tp__close_pass(struct tcpx_p2p_session *s, bool wait, bool *moved);

/* sessions.c */
/* One engine pass over every other session of the process. */
void tp__close_drive_others(struct tcpx_p2p_session *self, struct tp_pass_result *st);
/* session_destroy: drive until every closing conn is finished (and the
 * process's other sessions meanwhile: the peer may be one of them). */
void tp__close_all(struct tcpx_p2p_session *s);
/* The process's sessions, for tp__close_all (after create, before destroy). */
void tp__close_register(struct tcpx_p2p_session *s);
void tp__close_unregister(struct tcpx_p2p_session *s);

#endif
