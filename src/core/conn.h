/* A connection: nchan data channels (a send and a receive comm each), the
 * control channel, the chunk stream of each direction and what waits on
 * them (conn.c creates and fails one; close/ closes it). */
#ifndef TP_CORE_CONN_H
#define TP_CORE_CONN_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/gate.h"
#include "core/pipeline/comm.h"
#include "core/stats.h"
#include "core/xfer.h"
#include "net/net.h"
#include "util/list.h"
#include "util/time.h"

struct tcpx_p2p_session;

/* Bytes of host gathers a post's own pass does on the caller's thread
 * (c->posting): a small transfer starts at once, a large one's copies wait
 * for the next pass. */
#define TP_POST_GATHER_BYTES (64u << 10)

struct tp_direction {
	uint64_t next_seq;  /* seq of the next chunk to be created */
	uint32_t on[TCPX_P2P_MAX_CHANNELS]; /* chunks created on each channel (the send
					     * direction's bound the close's counts) */
	struct tcpx_p2p_xfer *head, *tail; /* xfers with chunks in flight, through dlink */
};

struct tp_ctl;   /* ctl.c: the control channel */
struct tp_wseg;  /* ctl.h: a remote segment on the wire */
struct tp_note;  /* notif.c: a notification waiting for its data */
struct tp_notif_node; /* notif.c: a delivered notification */
struct tp_items;  /* items.h: exports, inbound items, notifications */
struct tp_redial; /* setup/redial.c: a handle's re-dial */

/* What a connection's passes know of the peer's liveness (live.c).  heard
 * and said are set where a receive completes and a control frame is
 * posted (a store, not a clock read); the pass turns them into times. */
struct tp_live {
	bool heard, said;
	int64_t heard_ns;   /* the peer's last bytes seen, less the gaps nobody drove */
	int64_t said_ns;    /* our last control frame */
	int64_t pass_ns;    /* the previous liveness pass */
	uint64_t missed;    /* whole heartbeat intervals of the current silence, counted */
	int64_t scan_ns;    /* the last look for stalled transfers */
	int64_t deadline_ns; /* the earliest deadline of a pending transfer (0: none) */
	/* tcpx_p2p_conn_in_deadline: each of the peer's transfers hosted here
	 * must end within it of its acceptance (0: none) */
	int64_t in_deadline_ns;
	/* A failed conn's hosted transfers (the peer's) let go of their
	 * regions: its close drained (items/hosted.c) */
	bool hosted_free;
	/* The peer's control messages that carry no work (ctl_stream.c, tp__ctl_idle) */
	uint32_t idle_tokens;
	int64_t idle_ns;    /* when idle_tokens was last refilled */
};

/* What closing a connection keeps (close/). */
struct tp_conn_close {
	bool answered;      /* the peer's CLOSE was answered (close/exchange.c) */
	/* Our CLOSE only tells the peer that this side failed the conn for a
	 * cause of the peer's (close/exchange.c, tp__close_tell): nothing
	 * waits for its answer, and the comms close as a failed conn's do. */
	bool told;
	tp_deadline deadline; /* a destroyed conn's handshake ends by then (list.c) */
	bool drain_failed;  /* its data requests could not be drained (drain.c) */
	char *drain_buf;    /* host memory throw-away receives land in (a chunk per channel) */
	struct tcpx_p2p_mr *drain_mr;
};

struct tcpx_p2p_conn {
	struct tcpx_p2p_session *s;
	pthread_mutex_t lock;
	int nchan;
	struct tp_comm *send, *recv; /* nchan each */
	struct tp_direction dir[2];
	int err;            /* sticky failure; every later call reports it */
	char why[256];      /* its detail, for every thread that asks later */
	pthread_mutex_t rdv_lock; /* one barrier at a time on rdv_fd */
	int rdv_fd;         /* rendezvous socket for barriers, -1 if none */
	uint32_t barriers;  /* barriers completed, carried in each frame */
	bool barrier_sent;  /* our frame of barrier `barriers` went out */
	bool rdv_dead;      /* the rendezvous socket broke mid-frame */
	char peer[64];
	uint64_t peer_epoch; /* the peer session's incarnation (its blob) */
	char peer_node[32];  /* the peer session's node id (its blob; "": none) */
	bool dialled;        /* made by tcpx_p2p_dial: peer is the address dialled */
	/* Re-dial (setup/redial.c, redial_ms): the handle the application
	 * holds is a front over incarnations, the first of which is that
	 * handle's own struct.  front: the handle a later incarnation serves
	 * (NULL: this conn is a handle itself; set before the incarnation is
	 * published, never changed).  redial: the handle's re-dial state
	 * (NULL: re-dial is off for it). */
	struct tcpx_p2p_conn *front;
	struct tp_redial *redial;
	/* Session engine: its list of conns (engine lock) and what a pass
	 * learns without taking this conn's lock again. */
	TP_LINK(struct tcpx_p2p_conn) elink;
	uint64_t completed; /* xfers completed or failed; guarded by lock */
	/* The pass running is a post's own (tp__post_pass_unlock): it gathers
	 * at most post_gather more bytes of host chunks (TP_POST_GATHER_BYTES
	 * in all) and leaves the rest to the passes that follow (stream.c,
	 * prepare), so that posting costs the caller its descriptors, not a
	 * copy of its bytes, while a small transfer still starts at once. */
	bool posting;
	size_t post_gather;
	/* The control channel (announcements, acks, notifications) and what
	 * waits on it: receives not yet matched to the peer's announcement,
	 * and sends, writes and reads waiting for the peer's answer. */
	struct tp_ctl *ctl;
	struct tp_items *items;
	struct tp_live alive;
	struct tp_stats stats; /* stats.h: under lock */
	/* Behind a device bounce (TCPX), where receives of host memory are
	 * posted: device memory of one chunk that the plugin never writes
	 * (stream.c, tp__stream_issue).  NULL where the bounce is in host memory. */
	char *land;
	struct tcpx_p2p_mr *landmr;
	struct tp_xlist unmatched, answers;
	uint32_t unmatched_skip; /* the peer's sends after the last unmatched receive that go
				  * nowhere (receives cancelled unmatched; xfer.h, skip_before) */
	/* Sends, writes, reads and notifications held back, unannounced, in
	 * posting order behind a transfer posted on a CUDA event (gate.c). */
	struct tp_gates gates;
	/* Receives and reads whose bytes are in place but whose completion
	 * waits until the answers this side owes the peer were handed to the
	 * plugin (else a caller who stops driving on seeing it done would
	 * strand the peer's send or write). */
	struct tp_xlist settling;
	/* Every xfer the caller holds (posted, not released), through
	 * llink: conn_destroy detaches them all (x->c = NULL). */
	struct tp_xlist live;
	uint64_t next_id;   /* ids of this side's announced items */
	uint32_t inbound;   /* the peer's announcements queued and this side's own
			     * items alive (inbound.c bounds them) */
	/* The caller destroyed it: it only finishes its close handshake, on
	 * the session's closing list, until closing.deadline. */
	bool destroyed;
	struct tp_conn_close closing;
	char *zero_dev;     /* a cleared chunk of device memory (stream.c, stage_clear) */
	/* Behind a host bounce, where receives ahead of their chunks are
	 * posted: a host chunk the plugin never writes (stream.c). */
	char *ahead;
	struct tcpx_p2p_mr *aheadmr;
};

/* conn.c */
/* A conn over the plugin's comms (the last pair is the control channel);
 * the caller adds it to the engine (tp__engine_add) once it is whole. */
int tp__conn_create(struct tcpx_p2p_session *s, int nchan, void **send_comms,
		    void **recv_comms, const ncclNetDeviceHandle_v7_t *devh,
		    struct tcpx_p2p_conn **out);
/* Record the first fatal error and fail every pending xfer with it. */
int tp__conn_fail(struct tcpx_p2p_conn *c, int err);
/* Fail every pending xfer with err (c->err = err), as a close does: the
 * conn's destroy (ECLOSED), or the peer's CLOSE. */
void tp__conn_cancel(struct tcpx_p2p_conn *c, int err);
/* The peer closed c: what is pending fails with ECLOSED (said at INFO). */
void tp__conn_peer_gone(struct tcpx_p2p_conn *c);
/* Conns the calling thread creates from now on are incarnations of the
 * handle front (their front; NULL: handles themselves).  setup/redial.c's
 * thread sets it once. */
void tp__conn_making(struct tcpx_p2p_conn *front);

/* The handle the application holds for c (c itself, or the front c is an
 * incarnation of). */
static inline struct tcpx_p2p_conn *tp__conn_handle(struct tcpx_p2p_conn *c)
{
	return c->front ? c->front : c;
}

/* setup/redial.c: the incarnation of handle *c that a call on it uses
 * (*c unchanged where re-dial is off).  A failed current incarnation
 * starts a re-dial; while one runs: EAGAIN (detail names call).  After
 * a re-dial gave up *c is the failed incarnation, whose error the call
 * then reports. */
int tp__redial_use(struct tcpx_p2p_conn **c, const char *call);
/* The current incarnation of handle c, starting nothing (stats). */
struct tcpx_p2p_conn *tp__redial_cur(struct tcpx_p2p_conn *c);
/* tcpx_p2p_dial to host:port with redial_ms set: the re-dial state made
 * before the dial (NULL: ENOMEM, said), attached to the conn it made
 * (which then re-dials), or freed if it made none. */
struct tp_redial *tp__redial_new(const char *host, uint16_t port);
void tp__redial_attach(struct tcpx_p2p_conn *c, struct tp_redial *r);
void tp__redial_free(struct tp_redial *r);
/* Incarnations re-dial made for handle c (0 where re-dial is off). */
uint32_t tp__redial_generation(struct tcpx_p2p_conn *c);
/* conn_destroy of handle c: stop its re-dial (waits for an attempt under
 * way, bounded by handshake_ms) and hand back its incarnations other than
 * c itself, for the caller to destroy and free: *n of them in a malloc'd
 * array (NULL where none). */
void tp__redial_end(struct tcpx_p2p_conn *c, struct tcpx_p2p_conn ***incs, int *n);

#endif
