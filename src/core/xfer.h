/* A transfer (xfer.c: its life, posting, completion and waiting). */
#ifndef TP_CORE_XFER_H
#define TP_CORE_XFER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/pipeline/comm.h"
#include "tcpx_p2p.h"
#include "util/list.h"

struct tcpx_p2p_conn;
struct tcpx_p2p_mr;
struct tp_cq;
struct tp_segs_shared;


/* What an xfer is.  The first four are the caller's; the others are the
 * library's own items on the target side of one-sided transfers (and the
 * receiver's discard of a send nobody matched), freed when they end. */
enum tp_op {
	TP_OP_SEND,     /* send / sendv */
	TP_OP_RECV,     /* recv / recvv */
	TP_OP_WRITE,    /* write: a send item the target acknowledges */
	TP_OP_READ,     /* read: a receive item the target's response fills */
	TP_OP_IN_WRITE, /* target: receive of a peer's write into exported memory */
	TP_OP_IN_READ,  /* target: send of the bytes a peer reads */
	TP_OP_DISCARD,  /* receive of bytes that go nowhere (refused or mismatched) */
};

/* One of the library's own items: no caller holds it, nothing reports it. */
static inline bool tp_op_internal(enum tp_op op)
{
	return op >= TP_OP_IN_WRITE;
}

/*
 * Where a transfer is in its life.  Every state names the conn lists it is
 * on, and tp__xfer_set_state (xfer_state.c) is the one place it changes,
 * against the table of legal moves there:
 *
 *   NEW                   made, not yet posted; on no list
 *   GATED                 a send, write or read held back, unannounced, until
 *                         the caller's CUDA event completed and every
 *                         announcement posted before it went out (c->gates)
 *   UNMATCHED             a receive waiting for the peer's send (c->unmatched)
 *   STREAMING             its chunks in its direction's stream (c->dir[d]), no
 *                         answer awaited: a receive, a read after its response,
 *                         a send or write answered before its last chunk, and
 *                         the library's own items (freed where they end)
 *   STREAMING_UNANSWERED  a send or write: its chunks in the stream and the
 *                         peer's answer not in yet (c->dir[d] and c->answers)
 *   UNANSWERED            only the peer's answer awaited (c->answers): a read
 *                         before its response or refusal, a send or write
 *                         whose chunks all retired
 *   SETTLING              a complete receive or read, held until this side owes
 *                         the peer no control bytes (c->settling)
 *   DONE                  complete or failed: test and wait see it
 *
 * A send's chunks and its answer finish in either order, which is why two
 * states stream: the answer moves STREAMING_UNANSWERED to STREAMING, the
 * last chunk moves it to UNANSWERED, and whichever comes second completes it.
 *
 * Three facts stay flags beside the state, because they do not say where a
 * transfer is: conn_failed (DONE with its connection, it stays on the lists
 * it was on, holding its regions, until conn_destroy closed the comms),
 * released (the caller let go of such a one; the close frees it) and
 * stalled (what the stall scan last saw of a pending one).
 * Folded in, conn_failed and released would split DONE, and stalled every
 * pending state, adding states but not one move of their own.
 */
enum tp_xfer_state {
	TP_XS_NEW,
	TP_XS_GATED,
	TP_XS_UNMATCHED,
	TP_XS_STREAMING,
	TP_XS_STREAMING_UNANSWERED,
	TP_XS_UNANSWERED,
	TP_XS_SETTLING,
	TP_XS_DONE,
};

/* One segment of a transfer; start is its offset in the packed stream. */
struct tp_vseg {
	struct tcpx_p2p_mr *mr;
	size_t off, len;
	size_t start;
};

struct tcpx_p2p_xfer {
	struct tcpx_p2p_conn *c;   /* NULL once its (failed) conn was destroyed */
	enum tp_op op;
	enum tp_dir dir;    /* which chunk stream carries its bytes */
	struct tp_vseg *seg; /* nseg segments (seg1 when there is one) */
	size_t nseg;
	struct tp_vseg seg1;
	struct tp_segs_shared *shared; /* seg's owner when a prepared list's: vec.c */
	/* The regions it holds (their inflight counts) while it may touch
	 * them: one entry per run of segments in one region, or per export a
	 * peer's transfer names (held1 when there is one). */
	struct tcpx_p2p_mr **held;
	size_t nheld;
	struct tcpx_p2p_mr *held1;
	int mtype;          /* TCPX_P2P_MEM_* of every segment (0: no bytes) */
	bool mapped;        /* every segment's region is mapped host memory */
	size_t len;         /* total bytes */
	size_t chunk;       /* bytes per chunk of this transfer (tp_chunk_size) */
	uint64_t first_seq, nchunks, retired;
	unsigned chan0;     /* the channel of its first chunk: the sender's choice, announced */
	uint64_t id;        /* the initiator's number for ctl messages */
	enum tp_xfer_state state; /* tp__xfer_set_state only; DONE is read unlocked */
	int err;            /* first error, 0 while fine */
	bool released;      /* failed and released: the conn frees it at destroy */
	/* tcpx_p2p_xfer_cancel took effect: its chunks not yet prepared go
	 * out empty (a send) or land nowhere (a receive), and nothing more is
	 * unpacked into its segments. */
	bool cancelled;
	uint64_t prepared;  /* chunks prepared (stream.c) */
	/* A receive: the peer's sends that come before it and go nowhere, as
	 * many as receives before it were cancelled while unmatched. */
	uint32_t skip_before;
	bool conn_failed;   /* failed with its conn: listed until conn_destroy */
	int64_t t_post;     /* when it was made (its latency in the stats) */
	/* Stalls (live.c): chunks retired at the last look, and since when
	 * that count stands; stalled is read unlocked (atomic). */
	uint64_t stall_mark;
	int64_t t_moved;
	bool stalled;
	int64_t deadline_ns; /* tcpx_p2p_xfer_deadline's; 0: none */
	int hold;           /* tcpx_p2p_stream_wait's slot + 1 until DONE; 0: none */
	uint64_t user_data; /* params.user_data, handed back with its completion */
	struct tp_cq *cq;   /* the session's completion queue while it is on it (atomic) */
	TP_LINK(struct tcpx_p2p_xfer) clink; /* the completion queue (cq.c) */
	TP_LINK(struct tcpx_p2p_xfer) dlink; /* the direction's active list */
	TP_LINK(struct tcpx_p2p_xfer) wlink; /* a waiting list of the conn (unmatched, answers,
					      * settling) */
	TP_LINK(struct tcpx_p2p_xfer) llink; /* the conn's caller-held xfers (until release) */
	char why[160];      /* detail of err when it is this transfer's own */
};

/* A list of xfers through wlink (llink for live). */
struct tp_xlist {
	struct tcpx_p2p_xfer *head, *tail;
};

/* xfer_state.c: move x to state to (conn lock held).  A move the table does
 * not allow is a bug of the library's: it is logged as an internal error,
 * and made all the same. */
void tp__xfer_set_state(struct tcpx_p2p_xfer *x, enum tp_xfer_state to);
/* The one move of a transfer (conn lock held): its state and, with it, the
 * conn list the state names (c->unmatched, c->answers, c->settling; see
 * enum tp_xfer_state), left and joined together.  One failed with its conn
 * keeps its list as it becomes DONE (conn_failed). */
void tp__xfer_move(struct tcpx_p2p_conn *c, struct tcpx_p2p_xfer *x, enum tp_xfer_state to);
#if TP_TEST_HOOKS
extern bool tp__xfer_illegal_stops; /* test-hook builds: an illegal move aborts */
#endif
const char *tp__xfer_state_name(enum tp_xfer_state s);

/* x has ended (complete or failed): the one way into DONE (tp__xfer_move),
 * so that the stats count every end. */
void tp__xfer_mark_done(struct tcpx_p2p_conn *c, struct tcpx_p2p_xfer *x);
void tp__xlist_push(struct tp_xlist *l, struct tcpx_p2p_xfer *x);
void tp__xlist_remove(struct tp_xlist *l, struct tcpx_p2p_xfer *x);

/* xfer.c: the life of a transfer (conn lock held). */
struct tcpx_p2p_xfer *tp__xfer_new(enum tp_op op, enum tp_dir dir);
void tp__xfer_free(struct tcpx_p2p_xfer *x);
/* Every chunk of x retired (an in-write's are answered by inqueue.c):
 * complete it, or wait for the peer's answer. */
void tp__xfer_chunks_done(struct tcpx_p2p_conn *c, struct tcpx_p2p_xfer *x);
/* Finish x with err (0: success); the library's own items are freed.  A
 * receive or read is reported done only once this side owes the peer no
 * control bytes (tp__xfer_settle, at the end of every pass). */
void tp__xfer_complete(struct tcpx_p2p_conn *c, struct tcpx_p2p_xfer *x, int err);
void tp__xfer_settle(struct tcpx_p2p_conn *c);
/* Check params (NULL allowed) for a call that may or may not carry a
 * notification; *event (event may be NULL): its event (NULL: none, or a
 * struct_size before it). */
int tp__params_check(const tcpx_p2p_xfer_params *p, bool notif_ok, const char *what,
		     void **event);
/* params.event and params.user_data, NULL and 0 when params is NULL or
 * older than the field. */
void *tp__params_event(const tcpx_p2p_xfer_params *p);
uint64_t tp__params_user_data(const tcpx_p2p_xfer_params *p);
#endif
