/* The API floor: the library's public entry points on connections,
 * transfers, notifications and completions (docs/architecture.md, "Inside
 * src/core").
 *
 * Lock context: a function here is entered with no library lock held.  It
 * checks its arguments, takes the conn's lock (c->lock) or the session's,
 * queues work on the floors below and then drives the engine (one pass,
 * tp__post_pass_unlock, or a wait).  Nothing else in the library calls into
 * this folder: the floors below never drive the engine themselves; what
 * runs inside a pass returns or lists what it did, and the pass acts on it.
 *   post.c      send, recv, sendv, recvv (tp__xfer_post: every post's path)
 *   onesided.c  write, read
 *   prepared.c  prepared and strided lists
 *   wait.c      test, wait, wait_any, release, cancel, query, stream_wait,
 *               deadline
 *   conn.c      progress, conn_barrier
 *   destroy.c   conn_destroy (the close itself: close/)
 *   export.c    mr_export, mr_unexport, rmr_import, rmr_query, rmr_release
 *   stats.c     conn_stats, session_stats
 *   mr.c        mr_register, mr_register_ex, mr_deregister, mr_deregister_ex
 *               (the work is core/mr.c's, which the library's own buffers use)
 *   notif.c     notify, notif_poll, notif_take
 *   cq.c        completions, session_fd
 *   hosted.c    conn_hosted, conn_in_deadline (the work: items/hosted.c)
 * What these files share is below. */
#ifndef TP_CORE_API_H
#define TP_CORE_API_H

#include <stdbool.h>
#include <stddef.h>

#include "core/xfer.h"
#include "tcpx_p2p.h"

struct tcpx_p2p_conn;

/* A transfer kind's name in error details. */
static inline const char *tp__op_name(enum tp_op op)
{
	static const char *const names[] = { "send", "recv", "write", "read" };

	return op <= TP_OP_READ ? names[op] : "transfer";
}

/* post.c: post x on c: take its regions, queue it (and its announcement: a write's
 * or read's nrseg remote segments encoded at rwire), or gate it behind
 * event and the transfers gated before it (gate.c), and make a first pass.
 * On failure x is freed. */
int tp__xfer_post(struct tcpx_p2p_conn *c, struct tcpx_p2p_xfer *x, const void *notif,
		  size_t notif_len, const unsigned char *rwire, size_t nrseg, void *event,
		  tcpx_p2p_xfer **out);

/* onesided.c: n remote segments of a transfer that needs `need` access
 * (TCPX_P2P_ACCESS_*), checked against their imports (and, one_type, all
 * of one memory type) and encoded as a WRITE or READ_REQ carries them:
 * *wire (malloc'd, n * TP_WSEG_BYTES; NULL when n is 0) and their *total
 * bytes; the detail names `what`. */
int tp__rsegs_encode(struct tcpx_p2p_conn *c, unsigned need, const tcpx_p2p_rseg *remote,
		     size_t n, bool one_type, const char *what, unsigned char **wire,
		     size_t *total);
/* Post x, a write or read whose local segments are built, with the caller's
 * params (checked: tp__params_check) and its nrseg encoded remote segments:
 * the one path of tcpx_p2p_write, tcpx_p2p_read and a prepared list's
 * post.  On failure x is freed. */
int tp__one_sided_post(struct tcpx_p2p_conn *c, struct tcpx_p2p_xfer *x,
		       const tcpx_p2p_xfer_params *params, const unsigned char *wire, size_t nrseg,
		       tcpx_p2p_xfer **out);

/* notif.c: tcpx_p2p_notif_poll, one per version (the public name is
 * versioned by what its return value says). */
int tp__notif_poll_v010(tcpx_p2p_session *s, tcpx_p2p_notif *out, int max, int *n);
int tp__notif_poll_v03(tcpx_p2p_session *s, tcpx_p2p_notif *out, int max, int *n);

#endif
