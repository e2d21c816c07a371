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
struct tp_wseg;


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
	uint64_t id;        /* the initiator's number for ctl messages */
	bool queued;        /* in its direction's chunk stream */
	bool chunks_done;   /* every chunk retired */
	bool need_ack;      /* completes only once the peer answered (ack) */
	bool acked;
	int err;            /* first error, 0 while fine */
	bool done;          /* complete or failed */
	bool released;      /* failed and released: the conn frees it at destroy */
	bool conn_failed;   /* failed with its conn: listed until conn_destroy */
	int64_t t_post;     /* when it was made (its latency in the stats) */
	/* Stalls (live.c): chunks retired at the last look, and since when
	 * that count stands; stalled is read unlocked (atomic). */
	uint64_t stall_mark;
	int64_t t_moved;
	bool stalled;
	int64_t deadline_ns; /* tcpx_p2p_xfer_deadline's; 0: none */
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
/* x has ended (complete or failed): the one place done is set, so that
 * the stats count every end. */
void tp__xfer_mark_done(struct tcpx_p2p_conn *c, struct tcpx_p2p_xfer *x);
/* Check params (NULL allowed) for a call that may or may not carry a notification. */
int tp__params_check(const tcpx_p2p_xfer_params *p, bool notif_ok, const char *what);
/* Post x on c: take its regions, queue it (and its announcement) and make a
 * first pass.  On failure x is freed. */
int tp__xfer_post(struct tcpx_p2p_conn *c, struct tcpx_p2p_xfer *x, const void *notif,
		  size_t notif_len, const struct tp_wseg *rseg, size_t nrseg,
		  tcpx_p2p_xfer **out);
void tp__xlist_push(struct tp_xlist *l, struct tcpx_p2p_xfer *x);
void tp__xlist_remove(struct tp_xlist *l, struct tcpx_p2p_xfer *x);

#endif
