/* The item protocol's entry points for the rest of the core (inbound.c,
 * announce.c, export.c, notif.c; what they share among themselves is in
 * rma.h). */
#ifndef TP_CORE_ITEMS_H
#define TP_CORE_ITEMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct tcpx_p2p_conn;
struct tcpx_p2p_xfer;
struct tp_wseg;

int tp__rma_create(struct tcpx_p2p_conn *c);
void tp__rma_destroy(struct tcpx_p2p_conn *c);
int tp__rma_progress(struct tcpx_p2p_conn *c, bool *moved);
bool tp__rma_busy(const struct tcpx_p2p_conn *c);
/* An in-write landed: answer the initiator (non-zero: the answer could
 * not be queued, which fails the conn). */
int tp__rma_in_write_done(struct tcpx_p2p_conn *c, struct tcpx_p2p_xfer *x);
/* Queue the control message that announces x (nothing for a receive). */
int tp__rma_announce(struct tcpx_p2p_conn *c, struct tcpx_p2p_xfer *x, const void *notif,
		     size_t notif_len, const struct tp_wseg *rseg, size_t nrseg);
/* The notifications the peer holds for c and the longest it takes (its
 * blob's max_notifs, max_notif_bytes). */
void tp__rma_set_credits(struct tcpx_p2p_conn *c, uint32_t n, uint32_t max_bytes);
/* Drop the session's delivered notifications that came on c. */
void tp__rma_drop_notifs(struct tcpx_p2p_conn *c);
/* The conn failed: drop what waits inbound. */
void tp__rma_fail(struct tcpx_p2p_conn *c);
/* ... and queue the notification (len 0) that tells notif_poll of it. */
void tp__rma_tell_failed(struct tcpx_p2p_conn *c);
/* One of the library's own items ends: give back what it counted. */
void tp__rma_item_end(struct tcpx_p2p_conn *c, const struct tcpx_p2p_xfer *x);

/* inbound.c: one message from the peer (type and body checked for size only). */
int tp__rma_on_msg(struct tcpx_p2p_conn *c, unsigned type, const unsigned char *body,
		   size_t len);

#endif
