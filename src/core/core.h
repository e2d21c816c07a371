/* Internal objects behind the public handles. */
#ifndef TP_CORE_CORE_H
#define TP_CORE_CORE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/chunk.h"
#include "core/nics.h"
#include "net/net.h"
#include "tcpx_p2p.h"
#include "tp_device.h"

struct tp_unpacker;
struct tp_engine;

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
	struct tp_unpacker *unpacker; /* device unpack state; NULL until needed */
	bool test_early_consume;      /* TP_TEST_HOOKS builds: consume before the unpack ends */
	struct tp_engine *engine;     /* session-wide progress (engine.c) */
	pthread_mutex_t lock;         /* guards the lists and counts below */
	struct tcpx_p2p_mr *mrs;      /* registered regions (for conn teardown) */
	uint64_t mr_ids;              /* last region id handed out */
	int nconns, nlisteners, nservers;
	char *auth_token;             /* cfg.auth_token points here when set */
	uint64_t auth_id;             /* random: tells a connection to oneself */
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
	char *reg_base;     /* registered range: CUDA rounded to 4 KiB */
	size_t reg_len;
	struct tp_mr_reg *regs; /* guarded by s->lock */
	int nregs, cap;
	int inflight;       /* xfers using it; guarded by s->lock */
	struct tcpx_p2p_mr *next;
};

enum tp_dir { TP_SEND = 0, TP_RECV = 1 };

struct tcpx_p2p_xfer {
	struct tcpx_p2p_conn *c;   /* NULL once its (failed) conn was destroyed */
	struct tcpx_p2p_mr *mr;
	enum tp_dir dir;
	size_t off, len;
	size_t chunk;       /* bytes per chunk of this transfer (tp_chunk_size) */
	uint64_t first_seq, nchunks, retired;
	int err;            /* first error, 0 while fine */
	bool done;          /* retired == nchunks or err */
	bool released;      /* failed and released: the conn frees it at destroy */
	struct tcpx_p2p_xfer *prev, *next; /* the direction's active list */
};

/* How a receive's payload reaches the user's buffer. */
enum tp_unpack_kind {
	TP_UNPACK_NONE,   /* the plugin wrote the user's buffer */
	TP_UNPACK_MEMCPY, /* host bounce -> host buffer, memcpy per record */
	TP_UNPACK_DEVICE, /* through the session's CUDA stream (kernel/d2d/host) */
};

struct tp_slot {
	void *request;
	struct tcpx_p2p_xfer *x;
	char *dst;          /* where the chunk's bytes belong */
	uint32_t len;
	uint64_t launch;    /* device unpack: launch number gating consume */
	enum tp_unpack_kind unpack;
};

/* One comm (a channel's send or receive half) and its FIFO window. */
struct tp_comm {
	void *comm;
	enum tp_dir dir;
	struct tp_window win;
	struct tp_slot slot[TP_WINDOW_SLOTS];
	/* Next chunk this comm posts: seq in cursor (NULL: none queued). */
	struct tcpx_p2p_xfer *cursor;
	uint64_t next_seq;
	/* Posted requests a test() may still have to hand to the plugin's
	 * helpers: TCPX activates at most one per test (DESIGN §4.13). */
	uint32_t handover;
	/* Registration cache: the region last used on this comm. */
	uint64_t mr_cached; /* region id, 0: none */
	void *mh_cached;
	/* Receives on an UNPACK comm: the meta ring and bounce buffer. */
	ncclNetDeviceHandle_v7_t devh;
	struct tp_unpack_meta *meta; /* host-readable address of the ring */
	char *bounce;
	bool bounce_on_device;
};

struct tp_direction {
	uint64_t next_seq;  /* seq of the next chunk to be created */
	struct tcpx_p2p_xfer *head, *tail; /* xfers with chunks in flight */
};

struct tcpx_p2p_conn {
	struct tcpx_p2p_session *s;
	pthread_mutex_t lock;
	int nchan;
	struct tp_comm *send, *recv; /* nchan each */
	struct tp_direction dir[2];
	int err;            /* sticky failure; every later call reports it */
	char why[256];      /* its detail, for every thread that asks later */
	pthread_mutex_t ctrl_lock; /* one barrier at a time on ctrl_fd */
	int ctrl_fd;        /* rendezvous socket for barriers, -1 if none */
	uint32_t barriers;  /* barriers completed, carried in each frame */
	bool barrier_sent;  /* our frame of barrier `barriers` went out */
	bool ctrl_dead;     /* the control socket broke mid-frame */
	char peer[64];
	/* Session engine: its list of conns (engine lock) and what a pass
	 * learns without taking this conn's lock again. */
	struct tcpx_p2p_conn *eprev, *enext;
	uint64_t completed; /* xfers completed or failed; guarded by lock */
};

struct tcpx_p2p_listener {
	struct tcpx_p2p_session *s;
	int nchan;
	void **lcomm;       /* nchan listen comms */
	unsigned char *blob;
	size_t blob_len;
	bool spent;         /* a connect started on it: not reusable */
};

/* session.c */
/* Make the session's GPU current on this thread before a plugin or CUDA
 * call that picks its device with cudaGetDevice (DESIGN §4.3). */
int tp__session_use_gpu(struct tcpx_p2p_session *s);
/* timeout_ms, or the session's configured one for TCPX_P2P_TIMEOUT_DEFAULT. */
static inline int tp__session_timeout(const struct tcpx_p2p_session *s, int timeout_ms)
{
	return timeout_ms == TCPX_P2P_TIMEOUT_DEFAULT ? s->cfg.timeout_ms : timeout_ms;
}

/* listener.c: a peer's blob against this session (layout, settings, MAC,
 * and its handles: nothing a plugin would follow or overrun). */
int tp__peer_blob_check(const struct tcpx_p2p_session *s, const void *blob, size_t len);

/* mr.c */
int tp__mr_handle(struct tcpx_p2p_mr *mr, struct tp_comm *cm, void **mhandle);
void tp__mr_drop_comm(struct tcpx_p2p_session *s, void *comm);
void tp__mr_put(struct tcpx_p2p_mr *mr);

/* conn.c */
int tp__conn_create(struct tcpx_p2p_session *s, int nchan, void **send_comms,
		    void **recv_comms, const ncclNetDeviceHandle_v7_t *devh,
		    struct tcpx_p2p_conn **out);
/* Record the first fatal error and fail every pending xfer with it. */
int tp__conn_fail(struct tcpx_p2p_conn *c, int err);

/* progress.c: one pass over one conn (its lock held). */
struct tp_progress {
	bool moved;   /* some stage advanced */
	bool pending; /* a test could still hand requests over, or an unpack runs:
		       * the caller should come back at once, not sleep */
	bool busy;    /* transfers are pending at all */
};
int tp__progress(struct tcpx_p2p_conn *c, struct tp_progress *st);
void tp__xfer_enqueue(struct tcpx_p2p_conn *c, struct tcpx_p2p_xfer *x);

/* engine.c: the session-wide progress engine and the optional thread. */
int tp__engine_create(struct tcpx_p2p_session *s);
void tp__engine_destroy(struct tcpx_p2p_session *s);
void tp__engine_add(struct tcpx_p2p_session *s, struct tcpx_p2p_conn *c);
void tp__engine_remove(struct tcpx_p2p_session *s, struct tcpx_p2p_conn *c);
/* Progress every conn of the session once; own (may be NULL) is waited
 * for, the others are skipped while another thread holds them. */
void tp__engine_pass(struct tcpx_p2p_session *s, struct tcpx_p2p_conn *own,
		     struct tp_progress *st);
/* n xfers completed outside a pass: tell waiters (thread mode). */
void tp__engine_notify(struct tcpx_p2p_session *s, uint64_t n);
/* A transfer was posted: wake the progress thread. */
void tp__engine_kick(struct tcpx_p2p_session *s);
/* Completions so far, and waiting for the next (thread mode). */
bool tp__engine_threaded(const struct tcpx_p2p_session *s);
uint64_t tp__engine_completions(struct tcpx_p2p_session *s);
void tp__engine_wait_completion(struct tcpx_p2p_session *s, uint64_t seen, int64_t deadline_ns);
/* Between passes that found nothing to do: spin, yield, then sleep. */
struct tp_backoff {
	unsigned idle;     /* passes in a row that found nothing to do */
	int64_t idle_since;
};
void tp__backoff(struct tp_backoff *b, const struct tp_progress *st);
int64_t tp__now_ns(void);

/* unpack.c */
int tp__unpack_prepare(struct tcpx_p2p_session *s, struct tp_comm *cm);
int tp__unpack_start(struct tcpx_p2p_conn *c, struct tp_comm **cms, struct tp_slot **slots,
		     int n);
/* Wait for every queued device unpack of the session (conn teardown). */
void tp__unpack_drain(struct tcpx_p2p_session *s);
/* Has device unpack number `launch` finished?  Never blocks. */
int tp__unpack_done(struct tcpx_p2p_session *s, uint64_t launch, bool *done);
void tp__unpacker_destroy(struct tp_unpacker *u);

#endif
