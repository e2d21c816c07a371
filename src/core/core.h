/* Internal objects behind the public handles. */
#ifndef TP_CORE_CORE_H
#define TP_CORE_CORE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/chunk.h"
#include "core/window.h"
#include "core/nics.h"
#include "core/stats.h"
#include "net/net.h"
#include "tcpx_p2p.h"
#include "device/tp_device.h"
#include "util/list.h"
#include "util/time.h"

struct tp_devq;
struct tp_engine;
struct tp_hcopy;

/* Part of a list of host copies, run by one of the session's copy threads
 * (hostcopy.c). */
struct tp_hjob {
	const struct tp_copy *list;
	uint32_t n;
	bool done;          /* set by the worker (release), polled by passes */
	struct tp_hjob *next;
};

/* A chunk's host copies, cut into up to one part per copy thread. */
#define TP_HCOPY_MAX_THREADS 4
struct tp_hcopies {
	struct tp_hjob part[TP_HCOPY_MAX_THREADS];
	int n;
};

struct tcpx_p2p_session {
	tcpx_p2p_config cfg;
	char plugin_path[PATH_MAX]; /* cfg.plugin_path points here when set */
	struct tp_net *net;
	int net_dev;                  /* nics[0] */
	int nics[TP_MAX_NICS];        /* channel i of a conn uses nics[i % nnics] */
	int nnics;
	char nic_name[TP_MAX_NICS][64];
	char nics_spec[256];          /* cfg.nics points here when set */
	struct tp_net_props props;
	struct tp_devq *devq;         /* the device queue (devq.c); NULL until needed */
	struct tp_hcopy *hcopy;       /* host copy threads; NULL until needed */
#if TP_TEST_HOOKS
	bool test_early_consume;      /* consume before the unpack ends (test builds only) */
	bool test_ignore_credits;     /* send notifications past the peer's credits (ditto) */
#endif
	struct tp_engine *engine;     /* session-wide progress (engine.c) */
	pthread_mutex_t lock;         /* guards the lists and counts below */
	/* Registered regions in ascending id order (ids only grow, so a new
	 * one is appended): a peer's export names a region by id, looked up
	 * by binary search whatever the count (tp__mr_find). */
	struct tcpx_p2p_mr **mrs;
	size_t nmrs, mrs_cap;
	uint64_t mr_ids;              /* last region id handed out */
	int nconns, nlisteners, nservers;
	char *auth_token;             /* cfg.auth_token points here when set */
	pthread_mutex_t notif_lock;   /* guards the delivered notifications */
	struct tp_notif_node *notifs, *notifs_tail;
	uint64_t auth_id;             /* random: tells a connection to oneself */
	/* Connections the caller destroyed whose close handshake still runs
	 * (close.c), through elink; nclosing is also read without the lock. */
	pthread_mutex_t close_lock;
	TP_LIST(struct tcpx_p2p_conn) closing;
	unsigned nclosing;
	uint64_t unclean_closes;      /* comms closed with requests posted (atomic) */
	TP_LINK(struct tcpx_p2p_session) slink; /* the process's sessions (close.c) */
	unsigned drivers;             /* other threads' closes driving it (close.c's lock) */
};

/* One plugin registration of a region on one comm. */
struct tp_mr_reg {
	void *comm;
	void *mhandle;
};

struct tcpx_p2p_mr {
	struct tcpx_p2p_session *s;
	uint64_t id;        /* unique in the session, never 0 */
	char *ptr;          /* the caller's pointer */
	size_t len;
	int type;           /* TCPX_P2P_MEM_* */
	bool mapped;        /* host memory the session's GPU addresses in place (pinned,
			     * mapped): device-bounce receives unpack into it by kernel */
	struct tp_pin *pin; /* the library's page lock it holds (TCPX_P2P_MR_PIN), or NULL */
	char *reg_base;     /* registered range: CUDA rounded to 4 KiB */
	size_t reg_len;
	struct tp_mr_reg *regs; /* guarded by s->lock */
	int nregs, cap;
	long inflight;      /* holds of transfers using it; guarded by s->lock */
};

enum tp_dir { TP_SEND = 0, TP_RECV = 1 };

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

/* How a receive's payload reaches the user's buffer. */
enum tp_unpack_kind {
	TP_UNPACK_NONE,   /* the plugin wrote the user's buffer */
	TP_UNPACK_MEMCPY, /* host bounce -> host buffer, memcpy per record */
	TP_UNPACK_DEVICE, /* through the session's CUDA stream (kernel/d2d/host) */
	TP_UNPACK_HCOPY,  /* a scatter on the session's host copy threads */
};

/* How a chunk's bytes move between the plugin's buffer and the transfer's
 * memory (tp__copy_path decides). */
enum tp_copy_path {
	TP_PATH_NONE,         /* none: the plugin read or wrote the transfer's memory */
	TP_PATH_RECORDS,      /* host bounce -> host memory: memcpy per record, in the pass */
	TP_PATH_HOST_NOW,     /* host copies between segments and staging, in the pass */
	TP_PATH_HOST_THREADS, /* the same (or a large chunk's records) on the copy threads */
	TP_PATH_LIST_KERNEL,  /* a copy list on the session's stream, by the copy-list
			       * kernel (batched copies where the list is not pinned) */
	TP_PATH_LIST_COPIES,  /* a copy list on the stream, as batched cudaMemcpyAsync */
	TP_PATH_KERNEL,       /* the unpack kernel, batched over the pass's chunks */
	TP_PATH_D2D,          /* device bounce: cudaMemcpyAsync per record (d2d) */
	TP_PATH_STAGED,       /* the records through pinned host staging (host) */
};

struct tp_slot {
	void *request;      /* NULL between preparing and issuing (gathers) */
	struct tcpx_p2p_xfer *x; /* NULL on the control channel */
	uint32_t len;
	int got;            /* bytes test() said arrived; TP_NET_SIZE_UNKNOWN: not said */
	struct tp_meta_view meta; /* a bounce receive's records, checked once tested */
	size_t soff;        /* the chunk's offset in its transfer's stream */
	uint64_t launch;    /* device work (unpack, scatter, gather) gating the next stage */
	enum tp_unpack_kind unpack;
	enum tp_copy_path path; /* a device unpack's variant (PATH_KERNEL, D2D, STAGED) */
	bool multi;         /* several segments: through the comm's staging */
	bool caller;        /* issued with the caller's memory: the plugin reads (send) or
			     * writes (receive, no bounce buffer) it until the request ends */
	bool dst_dev;       /* the transfer's memory is device memory */
	bool dst_mapped;    /* ... or host memory the device writes in place */
	char *buf;          /* what the request is posted with: the chunk's place in its
			     * one segment, or (multi, discard) a staging slot */
	struct tcpx_p2p_mr *mr; /* the region buf lies in */
	uint64_t seq;       /* the chunk's number in its stream */
	char *stage;        /* staging slot of a multi or discard chunk */
	struct tp_copy *cp; /* copy list of a device scatter or gather */
	uint32_t cp_cap;
	bool cp_pinned;     /* cp is pinned (a kernel may read it), else malloc'd */
	struct tp_hcopies hjob; /* a host gather or scatter of this chunk */
	bool hjob_wait;     /* a send waits for its gather on the copy threads */
	int64_t t_issue;    /* a data send: when the plugin took it (stats) */
};

/* Staging of chunks that span several segments (or go nowhere): a FIFO
 * ring of slots, taken at post and given back at retire, per memory type.
 * Host memory gets 4: with more, a sender gathers chunks so far ahead of
 * its sockets that they have left the CPU caches when the send reads them
 * (docs/perf/log.md, "Host staging depth").  Device memory keeps 8.
 * Powers of two, so that the ring's counters may wrap. */
#define TP_STAGE_SLOTS_HOST 4u
#define TP_STAGE_SLOTS_DEV 8u
_Static_assert(!(TP_STAGE_SLOTS_HOST & (TP_STAGE_SLOTS_HOST - 1)) &&
		       !(TP_STAGE_SLOTS_DEV & (TP_STAGE_SLOTS_DEV - 1)),
	       "staging slot counts must be powers of two");
struct tp_stage {
	struct tcpx_p2p_mr *mr; /* internal region over base; NULL until first use */
	char *base;
	size_t slot_bytes;
	uint32_t head, tail;    /* slots taken / given back */
};

/* One comm (a channel's send or receive half) and its FIFO window. */
struct tp_comm {
	void *comm;
	enum tp_dir dir;
	struct tp_window win;
	/* Sends prepared but not yet handed to the plugin (a gather runs):
	 * slots [issued, posted); test only sees [tested, issued). */
	uint32_t issued;
	struct tp_slot slot[TP_WINDOW_SLOTS];
	/* Next chunk this comm posts: seq in cursor (NULL: none queued). */
	struct tcpx_p2p_xfer *cursor;
	uint64_t next_seq;
	/* Posted requests a test() may still have to hand to the plugin's
	 * helpers: TCPX activates at most one per test (docs/tcpx.md, plugin
	 * contract rule 12). */
	uint32_t handover;
	/* Registration cache: the region last used on this comm. */
	uint64_t mr_cached; /* region id, 0: none */
	void *mh_cached;
	/* Receives on an UNPACK comm: the meta ring and bounce buffer. */
	ncclNetDeviceHandle_v7_t devh;
	struct tp_unpack_meta *meta; /* host-readable address of the ring */
	char *bounce;
	uint64_t bounce_len; /* how far a record may reach: TP_META_BOUNCE_MAX */
	bool bounce_on_device;
	struct tp_stage stage[2]; /* [0] host, [1] CUDA */
	/* A closing conn: the requests to post in all on this comm so that
	 * every one the peer has completes (from its CLOSE; drain_set: known);
	 * the ones past this side's own are empty sends or throw-away
	 * receives (progress.c, drain_comm). */
	uint32_t drain_to;
	bool drain_set;
	/* A receive on it reported its size: the plugin says what landed, so
	 * staging no longer needs clearing before a receive (stage_clear). */
	bool sizes_seen;
};

struct tp_direction {
	uint64_t next_seq;  /* seq of the next chunk to be created */
	struct tcpx_p2p_xfer *head, *tail; /* xfers with chunks in flight, through dlink */
};

/* A list of xfers through wlink (llink for live). */
struct tp_xlist {
	struct tcpx_p2p_xfer *head, *tail;
};

struct tp_ctl;   /* ctl.c: the control channel */
struct tp_wseg;  /* ctl.h: a remote segment on the wire */
struct tp_note;  /* notif.c: a notification waiting for its data */
struct tp_notif_node; /* notif.c: a delivered notification */
struct tp_rma;   /* rma.h: exports, inbound items, notifications */

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
	/* Session engine: its list of conns (engine lock) and what a pass
	 * learns without taking this conn's lock again. */
	TP_LINK(struct tcpx_p2p_conn) elink;
	uint64_t completed; /* xfers completed or failed; guarded by lock */
	/* The control channel (announcements, acks, notifications) and what
	 * waits on it: receives not yet matched to the peer's announcement,
	 * and sends, writes and reads waiting for the peer's answer. */
	struct tp_ctl *ctl;
	struct tp_rma *rma;
	struct tp_live alive;
	struct tp_stats stats; /* stats.h: under lock */
	/* Behind a device bounce (TCPX), where receives of host memory are
	 * posted: device memory of one chunk that the plugin never writes
	 * (progress.c, issue_stage).  NULL where the bounce is in host memory. */
	char *land;
	struct tcpx_p2p_mr *landmr;
	struct tp_xlist unmatched, answers;
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
	 * the session's closing list, until close_deadline. */
	bool destroyed;
	tp_deadline close_deadline;
	bool drain_failed;  /* a closing conn's data requests could not be drained */
	char *zero_dev;     /* a cleared chunk of device memory (progress.c, stage_clear) */
	char *drain_buf;    /* host memory throw-away receives land in (a chunk per channel) */
	struct tcpx_p2p_mr *drain_mr;
};

struct tcpx_p2p_listener {
	struct tcpx_p2p_session *s;
	int nchan;
	void **lcomm;       /* nchan listen comms */
	unsigned char *blob;
	size_t blob_len;
	bool spent;         /* a connect started on it: not reusable */
};

/* gpu.c: make the session's GPU current on this thread before a plugin or CUDA
 * call that picks its device with cudaGetDevice (docs/tcpx.md, plugin
 * contract rule 3). */
int tp__session_use_gpu(struct tcpx_p2p_session *s);
/* The calling thread's CUDA context is the application's: a public call
 * that may select the session's GPU saves it on entry (NULL for a
 * host-memory session: no CUDA call at all) and gives it back with
 * tp__dev_ctx_restore before returning. */
static inline void *tp__gpu_save(const struct tcpx_p2p_session *s)
{
	return s && s->cfg.gpu >= 0 ? tp__dev_ctx_save() : NULL;
}
/* timeout_ms, or the session's configured one for TCPX_P2P_TIMEOUT_DEFAULT. */
static inline int tp__session_timeout(const struct tcpx_p2p_session *s, int timeout_ms)
{
	return timeout_ms == TCPX_P2P_TIMEOUT_DEFAULT ? s->cfg.timeout_ms : timeout_ms;
}

/* listener.c: a peer's blob against this session (layout, settings, MAC,
 * and its handles: nothing a plugin would follow or overrun). */
int tp__peer_blob_check(const struct tcpx_p2p_session *s, const void *blob, size_t len);

/* pin.c: the library's page locks of host regions (TCPX_P2P_MR_PIN), with
 * the session's GPU current.  take: lock [p, p + len) unless it is locked
 * already; *out = the lock the region now holds (NULL: the application's
 * own, or none needed).  release: drop it; the last holder unlocks. */
struct tp_pin;
int tp__pin_take(void *p, size_t len, struct tp_pin **out);
void tp__pin_release(struct tp_pin *pin);

/* mr.c */
/* The plugin handle of mr on cm's comm, registering it on first use. */
int tp__mr_handle_slow(struct tcpx_p2p_mr *mr, struct tp_comm *cm, void **mhandle);
static inline int tp__mr_handle(struct tcpx_p2p_mr *mr, struct tp_comm *cm, void **mhandle)
{
	/* Ids, not pointers: a new region may reuse a freed one's address. */
	if (cm->mr_cached == mr->id) {
		*mhandle = cm->mh_cached;
		return 0;
	}
	return tp__mr_handle_slow(mr, cm, mhandle);
}
void tp__mr_drop_comm(struct tcpx_p2p_session *s, void *comm);
/* The registered region with this id, or NULL (s->lock held). */
struct tcpx_p2p_mr *tp__mr_find(const struct tcpx_p2p_session *s, uint64_t id);
int tp__land_create(struct tcpx_p2p_session *s, size_t bytes, char **land,
		    struct tcpx_p2p_mr **mr);
void tp__land_destroy(char *land, struct tcpx_p2p_mr *mr);

/* conn.c */
int tp__conn_create(struct tcpx_p2p_session *s, int nchan, void **send_comms,
		    void **recv_comms, const ncclNetDeviceHandle_v7_t *devh,
		    struct tcpx_p2p_conn **out);
/* Record the first fatal error and fail every pending xfer with it. */
int tp__conn_fail(struct tcpx_p2p_conn *c, int err);
/* Close the comms of a destroyed conn (what is still posted counts as an
 * unclean close, said with reason) and free it. */
void tp__conn_finish(struct tcpx_p2p_conn *c, const char *reason);

struct tp_progress;
/* Requests the plugin has on c's data channels. */
uint32_t tp__conn_data_inflight(const struct tcpx_p2p_conn *c);
/* ... of which the plugin may still read or write the caller's memory. */
uint32_t tp__conn_caller_inflight(const struct tcpx_p2p_conn *c);
/* progress.c: a closing conn posts no more chunks: those prepared and not
 * yet handed to the plugin are dropped, so that each comm's count of
 * requests (issued) is final, as its CLOSE says. */
void tp__data_freeze(struct tcpx_p2p_conn *c);
/* Every data request of both sides has completed (the peer's CLOSE read,
 * the requests its count asks of this side posted and done). */
bool tp__data_drained(const struct tcpx_p2p_conn *c);
/* Drive a closing conn's data channels once (test, consume, post what
 * the peer's count asks); 0 or the error that ends the draining. */
int tp__data_drain(struct tcpx_p2p_conn *c, bool *moved);

/* close.c: destroyed conns finishing their close handshake. */
/* conn_destroy of a conn whose CLOSE is queued with chunks in the plugin's
 * hands that read or write the caller's memory: drive it, its session's
 * other conns and the process's other sessions until those completed
 * (true) or cannot, or close_timeout_ms passed (false). */
bool tp__close_drain(struct tcpx_p2p_conn *c);
/* One engine pass over every other session of the process. */
void tp__close_drive_others(struct tcpx_p2p_session *self, struct tp_progress *st);
/* Take c (destroyed, its CLOSE queued): drive it while it moves, then
 * leave it to the session's passes, or finish it. */
void tp__close_linger(struct tcpx_p2p_conn *c);
/* Drive every closing conn once and finish those done or out of time;
 * wait: take the list even if another thread drives it.  Returns whether
 * some remain; *moved, whether one advanced. */
bool tp__close_pass(struct tcpx_p2p_session *s, bool wait, bool *moved);
/* session_destroy: drive until every closing conn is finished (and the
 * process's other sessions meanwhile: the peer may be one of them). */
void tp__close_all(struct tcpx_p2p_session *s);
/* The process's sessions, for tp__close_all (after create, before destroy). */
void tp__close_register(struct tcpx_p2p_session *s);
void tp__close_unregister(struct tcpx_p2p_session *s);

/* progress.c: one pass over one conn (its lock held). */
struct tp_progress {
	bool moved;   /* some stage advanced */
	bool pending; /* a test could still hand requests over, or an unpack runs:
		       * the caller should come back at once, not sleep */
	bool busy;    /* transfers are pending at all */
	bool conns;   /* engine pass: the session has connections (peers may announce work) */
};
int tp__progress(struct tcpx_p2p_conn *c, struct tp_progress *st);
/* The test stage of one comm: test() its head, once more per request still
 * owed a hand-over; a finished send retires at once. */
int tp__comm_test(struct tcpx_p2p_conn *c, struct tp_comm *cm, bool *moved);
/* Cut x into chunks and give them their numbers in its direction's stream. */
void tp__xfer_enqueue(struct tcpx_p2p_conn *c, struct tcpx_p2p_xfer *x);

/* xfer.c: the life of a transfer (conn lock held). */
struct tcpx_p2p_xfer *tp__xfer_new(enum tp_op op, enum tp_dir dir);
void tp__xfer_free(struct tcpx_p2p_xfer *x);
/* Every chunk of x retired: complete it, or wait for the peer's answer.
 * Non-zero: an error that fails the conn. */
int tp__xfer_chunks_done(struct tcpx_p2p_conn *c, struct tcpx_p2p_xfer *x);
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

/* vec.c: segment lists and staging. */
int tp__segs_build(struct tcpx_p2p_conn *c, struct tcpx_p2p_xfer *x, const tcpx_p2p_seg *segs,
		   size_t n, const char *what);
void tp__segs_free(struct tcpx_p2p_xfer *x);
/* Room for n held regions (x->held). */
int tp__held_alloc(struct tcpx_p2p_xfer *x, size_t n);
/* Take and drop x's holds on its regions (x->held). */
void tp__segs_get(struct tcpx_p2p_session *s, struct tcpx_p2p_xfer *x);
void tp__segs_put(struct tcpx_p2p_session *s, struct tcpx_p2p_xfer *x);
/* The address of stream range [o, o + n) when it lies in one segment. */
char *tp__seg_single(const struct tcpx_p2p_xfer *x, size_t o, size_t n, struct tcpx_p2p_mr **mr);
/* The copies of a multi-segment chunk: gather (segments -> flat) or
 * scatter (flat -> segments), or a scatter of the bounce records; done at
 * once when now is set, else listed in sl->cp (*n entries). */
int tp__vec_copies(struct tcpx_p2p_session *s, const struct tcpx_p2p_xfer *x, struct tp_slot *sl,
		   bool gather, char *flat, bool now, uint32_t *n);
int tp__vec_copies_recs(struct tcpx_p2p_session *s, const struct tcpx_p2p_xfer *x,
			struct tp_slot *sl, const struct tp_meta_view *v, const char *bounce,
			bool now, uint32_t *n);
/* A staging slot of the memory type (1: none free now). */
int tp__stage_take(struct tcpx_p2p_session *s, struct tp_comm *cm, int mtype, char **slot,
		   struct tcpx_p2p_mr **mr);
void tp__stage_give(struct tp_comm *cm, const char *slot);
void tp__stage_free(struct tp_comm *cm);

/* hostcopy.c: host gathers and scatters on a few threads per session. */
/* Chunks up to this size are copied in the pass itself: handing them to a
 * thread costs more than the copy. */
#define TP_HCOPY_INLINE (256u << 10)
/* Whether a chunk of this size goes to the copy threads (else: copied in
 * the pass), from its size and the CPUs there are. */
bool tp__hcopy_worth(size_t chunk_len);
/* Queue list[0..n), cut by bytes into one part per copy thread. */
int tp__hcopy_submit(struct tcpx_p2p_session *s, struct tp_hcopies *h,
		     const struct tp_copy *list, uint32_t n);
bool tp__hcopy_done(const struct tp_hcopies *h);
/* Wait until a chunk's copies finished (conn teardown). */
void tp__hcopy_wait(const struct tp_hcopies *h);
void tp__hcopy_destroy(struct tp_hcopy *h);

/* inbound.c, announce.c, export.c, notif.c (rma.h): inbound items,
 * announcements, exports, notifications. */
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

/* engine.c: the session-wide progress engine and the optional thread. */
int tp__engine_create(struct tcpx_p2p_session *s);
void tp__engine_destroy(struct tcpx_p2p_session *s);
void tp__engine_add(struct tcpx_p2p_session *s, struct tcpx_p2p_conn *c);
void tp__engine_remove(struct tcpx_p2p_session *s, struct tcpx_p2p_conn *c);
/* Progress every conn of the session once; own (may be NULL) is waited
 * for, the others are skipped while another thread holds them. */
void tp__engine_pass(struct tcpx_p2p_session *s, struct tcpx_p2p_conn *own,
		     struct tp_progress *st);
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
void tp__backoff(struct tp_backoff *b, const struct tp_progress *st);

/* copy_path.c: how the bytes of the chunk in sl move (a send's gather, a
 * landed receive's unpack or scatter). */
enum tp_copy_path tp__copy_path(const struct tcpx_p2p_session *s, const struct tp_comm *cm,
				const struct tp_slot *sl);

/* devq.c: the session's device queue, and the unpack handle of a comm */
int tp__unpack_prepare(struct tcpx_p2p_session *s, struct tp_comm *cm);
int tp__unpack_start(struct tcpx_p2p_conn *c, struct tp_comm **cms, struct tp_slot **slots,
		     int n);
/* Copy list[0..n) on the session's stream: one kernel (list, sources and
 * destinations device-accessible) or a cudaMemcpyAsync per entry.
 * *launch numbers the work for tp__devq_done. */
int tp__devq_copies(struct tcpx_p2p_session *s, const struct tp_copy *list, uint32_t n,
		    bool kernel, uint64_t *launch);
/* Wait for all work queued on the session's device queue (conn teardown). */
void tp__devq_drain(struct tcpx_p2p_session *s);
/* Has device work number `launch` finished?  Never blocks. */
int tp__devq_done(struct tcpx_p2p_session *s, uint64_t launch, bool *done);
void tp__devq_destroy(struct tp_devq *u);

#endif
