/* The item protocol: each side announces every item of its data stream
 * on the control channel before its bytes flow, and answers the peer's
 * (docs/architecture.md, "Control channel and announcements"):
 *   inbound.c   the peer's messages: decoding, the answers to this side's
 *   inqueue.c   the in-queue of the peer's announcements: matching, numbering
 *   announce.c  this side's announcements and answers
 *   export.c    resolving a peer's segments against the exports (exporting
 *               and importing: api/export.c)
 *   notif.c     notifications: waiting for their data, the session's queue
 * First what the rest of the core calls, then what these files share. */
#ifndef TP_CORE_ITEMS_H
#define TP_CORE_ITEMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/ctl.h"
#include "tcpx_p2p.h"

struct tcpx_p2p_conn;
struct tcpx_p2p_xfer;

int tp__items_create(struct tcpx_p2p_conn *c);
void tp__items_destroy(struct tcpx_p2p_conn *c);
int tp__items_progress(struct tcpx_p2p_conn *c, bool *moved);
bool tp__items_busy(const struct tcpx_p2p_conn *c);
/* An in-write landed: answer the initiator (non-zero: the answer could
 * not be queued, which fails the conn). */
int tp__items_in_write_done(struct tcpx_p2p_conn *c, struct tcpx_p2p_xfer *x);
/* Room for x's announcement (EAGAIN: control bytes or the notification's
 * credits; EINVAL: too many remote segments, a notification too long). */
int tp__items_room(struct tcpx_p2p_conn *c, const struct tcpx_p2p_xfer *x, size_t notif_len,
		   size_t nrseg);
/* The control bytes of x's announcement (0 for a receive). */
size_t tp__items_announce_bytes(const struct tcpx_p2p_xfer *x, size_t notif_len, size_t nrseg);
/* Queue the control message that announces x (nothing for a receive); a
 * write's or read's nrseg remote segments come encoded (rwire,
 * TP_WSEG_BYTES each: tp__rsegs_encode); reserved: its room was checked and
 * its credits spent (a gated post). */
int tp__items_announce(struct tcpx_p2p_conn *c, struct tcpx_p2p_xfer *x, const void *notif,
		       size_t notif_len, const unsigned char *rwire, size_t nrseg, bool reserved);
/* tcpx_p2p_notify's work (api/notif.c, conn lock held): room checked, the
 * NOTIF queued or gated behind gated announcements, its credits spent. */
int tp__items_notify(struct tcpx_p2p_conn *c, const void *msg, size_t len);
/* Queue a NOTIF message (its credits spent by the caller). */
int tp__items_notif_msg(struct tcpx_p2p_conn *c, const void *msg, size_t len);
/* Give back what a notification of len bytes spent: it never went out. */
void tp__items_notif_refund(struct tcpx_p2p_conn *c, size_t len);
/* Tell the peer that this side's read id is cancelled (TP_CTL_CANCEL). */
int tp__items_send_cancel(struct tcpx_p2p_conn *c, uint64_t id);
/* The notifications the peer holds for c and the longest it takes (its
 * blob's max_notifs, max_notif_bytes). */
void tp__items_set_credits(struct tcpx_p2p_conn *c, uint32_t n, uint32_t max_bytes);
/* Drop the session's delivered notifications that came on c. */
void tp__items_drop_notifs(struct tcpx_p2p_conn *c);
/* The peer's CLOSE arrived: deliver the notifications it sent that can
 * still be (every receive item announced before them landed). */
void tp__items_close_notes(struct tcpx_p2p_conn *c);
/* The conn failed: drop what waits inbound (the notifications counted in
 * the stats' notifs_dropped). */
void tp__items_fail(struct tcpx_p2p_conn *c);
/* ... and queue the notification (len 0) that tells notif_poll of it. */
void tp__items_tell_failed(struct tcpx_p2p_conn *c);
/* One of the library's own items ends: give back what it counted. */
void tp__items_end(struct tcpx_p2p_conn *c, const struct tcpx_p2p_xfer *x);

/* hosted.c: the peer's transfers hosted here.  hosted_fail (for
 * tp__engine_each): a conn whose hosted transfers hold f->mr is failed
 * (ECANCELED) and closed with the peer; counted in f.  hosted_release (a
 * failed conn's pass): once its close drained, its hosted transfers let
 * go of their regions. */
struct tcpx_p2p_mr;
struct tp_hosted_fail {
	const struct tcpx_p2p_mr *mr;
	unsigned holding, failed; /* conns whose hosted transfers hold it; failed now */
	uint64_t completed;       /* the caller's transfers that ended with them */
};
void tp__items_hosted_fail(struct tcpx_p2p_conn *c, void *arg);
void tp__items_hosted_release(struct tcpx_p2p_conn *c);
/* tcpx_p2p_conn_in_deadline's work (c->lock held): each hosted transfer,
 * those under way and those accepted later, must end within ns (0: no
 * deadline). */
void tp__items_in_deadline(struct tcpx_p2p_conn *c, int64_t ns);
/* tcpx_p2p_conn_hosted's (c->lock held): the first max hosted transfers
 * described in out; returns how many there are. */
int tp__items_hosted_list(struct tcpx_p2p_conn *c, tcpx_p2p_hosted *out, int max);

/* inbound.c: one message from the peer (its header checked, the body for
 * size only); chan: an item's first channel. */
int tp__items_on_msg(struct tcpx_p2p_conn *c, unsigned type, unsigned chan,
		     const unsigned char *body, size_t len);

/* ---- shared by the item protocol's files ---- */

/* inbound.c, for inqueue.c: why a refusal was made (its log text); free a
 * queued announcement; the transfer waiting for the answer to item id. */
const char *tp__items_refusal(uint64_t why);
struct tp_in;
void tp__items_in_free(struct tcpx_p2p_conn *c, struct tp_in *in);
struct tcpx_p2p_xfer *tp__items_find_answer(struct tcpx_p2p_conn *c, uint64_t id);

/* An answer's status on the wire (its own numbers, not the API's). */
enum tp_ack_status {
	TP_ACK_OK = 0,
	TP_ACK_MISMATCH = 1, /* a send's total differs from the receive's: value = the receive's */
	TP_ACK_REFUSED = 2,  /* a one-sided transfer refused: value = enum tp_refusal */
	TP_ACK_CANCELED = 3, /* (blob version 10) a send whose receive was cancelled here, or a
			      * read cancelled before it was served: value = 0 */
};

/* Why a target refused a one-sided transfer (the ack's value).  Every
 * reason a peer could learn something from by probing (does this export
 * exist, is this its key, how long is it, what does it allow, is it still
 * there) is one answer. */
enum tp_refusal {
	TP_REFUSE_DENIED = 1, /* no live export of the target allows it */
	TP_REFUSE_MIXED = 2,  /* host and CUDA exports in one transfer */
	TP_REFUSE_TOTAL = 3,  /* segment lengths do not add up to the total */
	TP_REFUSE_MEMORY = 4, /* the target had no memory for the segment list */
	TP_REFUSE_SHORT = 5,  /* fewer bytes arrived than the write announced */
};

struct tp_export {
	uint64_t mr_id;   /* looked up at each use: deregistration revokes */
	size_t off, len;  /* the exported range of the region */
	unsigned char key[TP_KEY_BYTES];
	unsigned access;
	int type;
	bool revoked;     /* tcpx_p2p_mr_unexport */
	/* resolve(): the message that last named it, and its region then */
	uint64_t stamp;
	struct tcpx_p2p_mr *mr;
};

struct tp_in {
	unsigned type;
	unsigned chan;      /* an item's first channel (the sender's choice) */
	uint64_t id, len;
	uint32_t nseg;
	struct tp_wseg *seg;
	uint32_t notif_len;
	unsigned char *notif;
	bool cancelled;     /* a read request the peer cancelled before it was served */
	struct tp_in *next;
};

/* A notification waiting until every receive item below mark landed;
 * of_write: it came with the in-write that ends at mark (and is dropped if
 * that fails). */
struct tp_note {
	uint64_t mark;
	bool of_write;
	size_t len;
	struct tp_note *next;
	unsigned char msg[];
};

/* A conn's one-sided state.  What the peer makes this side hold is
 * counted against the session's peer_max_* settings: segs (remote segments
 * of queued announcements and of accepted items) and held (the peer's
 * notifications, from the message that brought them until notif_poll takes
 * them or they are dropped: queued with their announcement, waiting for
 * their data, or in the session's queue).
 *
 * Notifications are flow-controlled (notif.c): each side may have at most
 * the other's peer_max_notifs held there.  credits is what this side may
 * still send (conn lock); the receiver gives back the slots that were
 * freed (freed: atomic, counted where held drops) in CREDIT messages. */
struct tp_items {
	struct tp_export *exp;
	uint32_t nexp, cap;
	struct tp_in *inq, *inq_tail;
	struct tp_note *notes, *notes_tail;
	uint64_t segs;
	uint32_t held, freed;
	uint32_t credits, credits_max; /* credits_max: the peer's peer_max_notifs */
	uint32_t peer_notif_bytes;     /* the peer's notif_max_bytes (its blob) */
	uint32_t bad_keys;
	uint64_t stamp;   /* resolve() calls so far */
	bool failed_told; /* the conn's failure is in the session's notification queue */
	/* notif_poll found this conn's oldest delivered notification too long
	 * for it in its poll number poll_skip (notif.c; the session's
	 * notif_lock) */
	uint64_t poll_skip;
};

struct tcpx_p2p_rmr {
	struct tcpx_p2p_conn *c;
	uint32_t idx;
	unsigned char key[TP_KEY_BYTES];
	size_t len;
	int type;
	unsigned access;
};

/* A delivered notification in the session's queue. */
struct tp_notif_node {
	struct tcpx_p2p_conn *c;
	size_t len;
	struct tp_notif_node *next;
	unsigned char msg[];
};

/* announce.c */
int tp__items_send_ack(struct tcpx_p2p_conn *c, uint64_t id, enum tp_ack_status status,
		       uint64_t value);

/* export.c: two keys equal, in constant time (how long a comparison takes
 * says nothing of the key). */
bool tp__items_key_equal(const unsigned char *a, const unsigned char *b);
/* export.c: an inbound write's or read's segments against this conn's
 * exports: 0 and x's segments, each region held, or a refusal reason. */
uint64_t tp__items_resolve(struct tcpx_p2p_conn *c, const struct tp_in *in, unsigned access,
			   struct tcpx_p2p_xfer *x, bool *bad_key);

/* notif.c */
/* What a notification of len bytes counts against peer_max_notifs and the
 * credits: one slot per started TCPX_P2P_NOTIF_MAX (1 KiB), so that the
 * bound keeps meaning memory (peer_max_notifs KiB) whatever the lengths. */
static inline uint32_t tp_notif_units(size_t len)
{
	return len <= TCPX_P2P_NOTIF_MAX ? 1u
					 : (uint32_t)((len + TCPX_P2P_NOTIF_MAX - 1) / TCPX_P2P_NOTIF_MAX);
}
/* A peer's message brings a notification of len bytes: counted against
 * peer_max_notifs (EPROTO beyond: a peer that ignores its credits). */
int tp__items_note_arrives(struct tcpx_p2p_conn *c, size_t len);
/* One the peer sent is gone without being taken (refused write). */
void tp__items_note_gone(struct tcpx_p2p_conn *c, size_t len);
/* Room for one more notification of len bytes at the peer: 0; EINVAL
 * (longer than the peer takes, or than all its credits); EAGAIN. */
int tp__items_notif_room(struct tcpx_p2p_conn *c, const char *what, size_t len);
void tp__items_notif_spend(struct tcpx_p2p_conn *c, size_t len);
/* The peer's CREDIT message. */
int tp__items_on_credit(struct tcpx_p2p_conn *c, uint32_t n);
/* Give back the freed slots, once enough of them are (a pass). */
int tp__items_credit_out(struct tcpx_p2p_conn *c);
int tp__items_add_note(struct tcpx_p2p_conn *c, uint64_t mark, bool of_write,
		       const unsigned char *msg, size_t len);
void tp__items_drop_note(struct tcpx_p2p_conn *c, uint64_t mark);
/* The peer closed: deliver the waiting notes whose items landed (the
 * answers owed no longer matter); true when none is left and no receive
 * item is in flight. */
bool tp__items_notes_close(struct tcpx_p2p_conn *c);
/* Append one to the session's queue now (counted in notifs_in). */
int tp__items_deliver(struct tcpx_p2p_conn *c, const unsigned char *msg, size_t len);
/* Deliver the notifications whose data has landed. */
int tp__items_notes_release(struct tcpx_p2p_conn *c, bool *moved);
/* notif_take (api/notif.c), after its pass: the session's oldest
 * notification into nb (*got 1), or 0 and nothing taken; returns the
 * length of one nb cannot hold (nothing taken), else 0. */
size_t tp__items_notif_take(tcpx_p2p_session *s, tcpx_p2p_notif_buf *nb, int *got);
/* notif_poll (api/notif.c), after its pass: up to max delivered
 * notifications into out, *n of them; returns how many conns wait for
 * notif_take with one too long for out. */
int tp__items_poll_queue(tcpx_p2p_session *s, tcpx_p2p_notif *out, int max, int *n);

#endif
