/*
 * Internal declarations of the TCPX emulator plugin: a real NCCL net plugin
 * over TCP sockets that obeys the GPUDirect-TCPX contract (docs/tcpx.md,
 * "The plugin contract" and "The emulator plugin").  Nothing here is
 * exported; the only public symbols are the ncclNetPlugin_vN tables of
 * emu_abi.c.
 */
#ifndef TP_EMU_H
#define TP_EMU_H

#include <pthread.h>
#include <stdint.h>
#include <stddef.h>
#include <sys/uio.h>
#include <netinet/in.h>

#include "nccl_net.h"

#define EMU_MAX_REQS 16
#define EMU_MAX_REQS_V6 8 /* driven through a v5 or v6 table */
#define EMU_MAX_SOCKS 8
#define EMU_MAX_DEVS 16
#define EMU_PAGE TP_UNPACK_PAGE_SIZE
#define EMU_SLICE_MIN (64u << 10)
#define EMU_SLICE_MAX (1u << 20)
#define EMU_POOL_RECYCLE 1024u /* pages a take picks among (emu_bounce.c) */
#define EMU_MAX_BOUNCE_BYTES (4u << 20)
/* A bounce receive's pages, worst case: ceil(size / 4 KiB) plus one per
 * task (each task starts on a fresh page at a random offset). */
#define EMU_MAX_REQ_PAGES (EMU_MAX_BOUNCE_BYTES / EMU_PAGE + EMU_MAX_BOUNCE_BYTES / EMU_SLICE_MIN)
#define EMU_MAGIC 0x54435845u /* "TCXE" */
#define EMU_MAX_PENDING 1024  /* connects in progress per process */

/* ---- logging: everything goes through the logger given to init ------- */

extern ncclDebugLogger_t tp__emu_logger;
/* The ABI version whose table's init was called (0 before init). */
extern int tp__emu_abi;

#define EMU_NET_FLAG 0x10 /* NCCL_NET */
#define EMU_LOG(lvl, fmt, ...)                                                          \
	do {                                                                            \
		if (tp__emu_logger)                                                     \
			tp__emu_logger(lvl, EMU_NET_FLAG, __FILE__, __LINE__,           \
				       "TCPXEmu: " fmt, ##__VA_ARGS__);                 \
	} while (0)
#define EMU_WARN(fmt, ...) EMU_LOG(NCCL_LOG_WARN, fmt, ##__VA_ARGS__)
#define EMU_INFO(fmt, ...) EMU_LOG(NCCL_LOG_INFO, fmt, ##__VA_ARGS__)

/* ---- configuration, read from the environment for every new comm ------- */

enum emu_bounce { EMU_BOUNCE_OFF, EMU_BOUNCE_HOST, EMU_BOUNCE_DEVICE };

struct emu_config {
	enum emu_bounce bounce;
	int nsocks;      /* total sockets per comm (NSOCKS_PERTHREAD x NTHREADS) */
	uint64_t task;   /* NCCL_DYNAMIC_CHUNK_SIZE, 0 when unset: TCPX's task size */
	int nthreads;    /* NCCL_SOCKET_NTHREADS (the emulator runs one helper per socket) */
	uint32_t pages;  /* bounce pool pages per comm */
	uint32_t mss;    /* TCPX_EMU_MSS: packet payload; each comm draws from [mss - mss/8, mss] */
	int poison;
	int strict_tags;
	int null_pct;
	int cuda_batch;  /* device bounce, no scatter: cudaMemcpyBatchAsync per slice */
	/*
	 * TCPX_EMU_CUDA_SCATTER (default 1): device bounce receives copy each
	 * slice to the GPU whole and one kernel puts its fragments on their
	 * pages (emu_scatter.cu); 0 selects the older per-fragment H2D copies.
	 */
	int cuda_scatter;
	/*
	 * TCPX_EMU_PROGRESS=strict (default) moves a request's bytes only once a
	 * test() on its comm handed it to the helper threads, one request per
	 * test, and publishes finished requests there, as TCPX does (docs/tcpx.md,
	 * rule 12); eager (1 here) hands every request over at post time.
	 */
	int eager;
	/*
	 * Closing a comm with requests in flight (posted and not yet reported
	 * done, or a receive not yet consumed) while its peer is still there:
	 * NCCL never does it and what TCPX does then is not known.  The
	 * emulator warns and returns ncclInvalidUsage from the close;
	 * TCPX_EMU_CLOSE_INFLIGHT=fail-others also fails every other comm of
	 * the process that exists then (their next call returns
	 * ncclInternalError), as aws-ofi-nccl's shared endpoint does.
	 */
	int close_fail_others;
	uint32_t accept_wait_us; /* TCPX_EMU_ACCEPT_WAIT_US: flow-steering set-up */
	int null_bounce;         /* TCPX_EMU_NULL_BOUNCE: device handle without a bounce buffer */
	int connect_abandon_ms; /* TCPX_EMU_CONNECT_ABANDON_MS: see emu_pending.c */
	/*
	 * Faults and plain-plugin behaviour for tests: TCPX_EMU_SHORT_SEND=MIN:DROP
	 * sends every request of at least MIN bytes DROP bytes short (a peer that
	 * announces more than it sends); TCPX_EMU_SIZES=1 reports received sizes
	 * from test(), as TCP plugins do (TCPX never does), 0 never; by default
	 * (-1) receives that land in place report them and bounce receives
	 * (the TCPX mode) have only their fragment records.
	 */
	uint64_t short_min, short_drop;
	int sizes;
	int max_reqs;           /* requests per comm: 16, 8 before ABI v7 */
	int consume_at_test;    /* before ABI v7: a receive ends when test reports it */
	struct in_addr addr;
};

void tp__emu_config_load(struct emu_config *cfg);
/* Devices reported (TCPX_EMU_NDEV, default 1). */
int tp__emu_ndev(void);

/* ---- CUDA seam (emu_cuda.c); every function fails cleanly without a GPU - */

int tp__emu_cuda_usable(void);
int tp__emu_cuda_get_device(int *dev);
int tp__emu_cuda_set_device(int dev);
int tp__emu_cuda_malloc(void **ptr, size_t size);
void tp__emu_cuda_free(void *ptr);
int tp__emu_cuda_host_alloc(void **ptr, size_t size);
int tp__emu_cuda_host_alloc_mapped(void **host, void **dev_alias, size_t size);
void tp__emu_cuda_host_free(void *ptr);
int tp__emu_cuda_stream_create(void **stream);
void tp__emu_cuda_stream_destroy(void *stream);
int tp__emu_cuda_copy(void *dst, const void *src, size_t n, void *stream);
int tp__emu_cuda_copy_batch(void **dst, const void **src, size_t *len, size_t n, int use_batch,
			    void *stream);
int tp__emu_cuda_memset(void *dst, int val, size_t n, void *stream);
int tp__emu_cuda_sync(void *stream);
int tp__emu_cuda_copy_sync(void *dst, const void *src, size_t n);
/*
 * Queues the scatter of one received slice, bytes [off, off + len) of a
 * message already copied to the device at staging, onto the bounce pages:
 * recs (device view) are the nrec records of the slice's task.  Returns
 * 0 once queued, 1 with nothing queued where the kernel cannot run (the
 * caller copies the fragments another way; kernel faults surface at the
 * stream's synchronisation).
 */
int tp__emu_cuda_scatter(const tp_unpack_rec *recs, uint32_t nrec, uint64_t off, uint64_t len,
			 const char *staging, char *bounce, void *stream);
#if TP_EMU_HAVE_CUDA
/* emu_scatter.cu: load the kernel into the current context now (its first
 * launch would, and under CUDA's lazy loading that may wait for every
 * kernel running, a caller's kernel that waits for this very receive
 * included); returns the cudaError_t. */
int tp__emu_scatter_load(void);
/* emu_scatter.cu: the launch itself; returns the cudaError_t. */
int tp__emu_scatter_launch(const tp_unpack_rec *recs, uint32_t nrec, uint64_t off, uint64_t len,
			   const char *staging, char *bounce, void *stream);
#endif

/* ---- wire formats ------------------------------------------------------ */

/* Lives in the caller's 128-byte handle.  Connect records its progress
 * here as a slot of the pending-connect table (emu_pending.c) and that
 * entry's random key, never as a pointer; the in-progress fields sit where
 * src/abi/handle_layout.h says, so the library can refuse peer handles with
 * them set. */
enum emu_stage { EMU_STAGE_FRESH = 0, EMU_STAGE_CONNECTING = 1, EMU_STAGE_DONE = 2 };

struct emu_handle {
	uint32_t magic;
	uint32_t stage;
	uint64_t nonce;           /* the listen comm's: its hellos must carry it */
	struct sockaddr_in addr;
	uint32_t calls;
	uint32_t slot;            /* pending-connect table entry */
	uint64_t key;             /* that entry's key */
};

struct emu_hello {
	uint32_t magic;
	uint32_t idx;
	uint64_t nonce;
	uint32_t nsocks;
	uint32_t nthreads;
};

/* Sent on each socket that carries part of a request, before its slices
 * (a request of one slice, or none, travels on one socket alone). */
struct emu_hdr {
	uint64_t seq;
	uint64_t size;
	int32_t tag;
	uint32_t magic;
};

/* ---- memory registration ----------------------------------------------- */

struct emu_mr {
	int type;
	void *base;
	size_t size;
};

/* ---- bounce pool + meta ring (emu_bounce.c) ---------------------------- */

struct emu_pool {
	enum emu_bounce mode;
	uint32_t npages;
	uint32_t nfree;
	uint32_t reserved;             /* free pages promised to receives set up */
	uint32_t *free_pages;
	char *buf;                     /* host or device memory */
	struct tp_unpack_meta *meta;   /* host view of the meta ring */
	struct tp_unpack_meta *meta_dev;
	struct tp_unpack_handle *uh;   /* host or device copy */
	void *stream;                  /* device mode: poison + copies at consume */
	uint64_t rng;
};

/* null_bounce: the unpack handle names no bounce buffer, as TCPX's can
 * (TCPX_RXMEM_IMPORT_SKIP_ODDS); a consumer must refuse such a handle. */
int tp__emu_pool_create(struct emu_pool *pool, enum emu_bounce mode, uint32_t npages,
			uint64_t seed, int null_bounce);
void tp__emu_pool_destroy(struct emu_pool *pool);
/* Most pages a receive of size bytes cut into ntasks tasks can fill. */
uint32_t tp__emu_pool_need(uint64_t size, uint64_t ntasks);
/*
 * Starts a task of len bytes: picks a random intra-page offset (returned)
 * and appends to pages[*npages] the scattered pages the task fills, taken
 * at random among the most recently freed (the caller reserved them).
 * Comm lock held.
 */
uint32_t tp__emu_pool_take(struct emu_pool *pool, uint64_t len, uint32_t *pages,
			   uint32_t *npages);
/* Most records a task of len bytes can produce with packets of mss bytes. */
uint32_t tp__emu_frag_max(uint64_t len, uint32_t mss);
/*
 * The records of a task's bytes [off, off + len) of the message, placed
 * from byte intra of pages[0] on: one per part of a packet within a page.
 * Returns the count (at most tp__emu_frag_max).
 */
uint32_t tp__emu_frags(tp_unpack_rec *rec, const uint32_t *pages, uint32_t intra, uint32_t mss,
		       uint64_t off, uint64_t len);
/* Copies a receive's records into slot and publishes their count. */
void tp__emu_pool_publish(struct emu_pool *pool, int slot, const tp_unpack_rec *rec, uint32_t n);
void tp__emu_pool_release(struct emu_pool *pool, const uint32_t *pages, uint32_t npages,
			  int poison);

/* ---- requests and comms ------------------------------------------------ */

enum emu_req_state {
	EMU_REQ_FREE = 0,
	EMU_REQ_POSTED,   /* posted; helper threads own it once activated */
	EMU_REQ_FINISHED, /* helpers finished; the next progress step publishes it */
	EMU_REQ_DONE,     /* published; test has not reported it yet */
	EMU_REQ_REPORTED, /* receive reported done; waiting for irecvConsumed */
};

struct emu_comm;

struct emu_req {
	struct emu_comm *comm;
	enum emu_req_state state;
	uint64_t seq;
	char *data;
	uint64_t cap;      /* receive: posted size; send: size */
	uint64_t size;     /* the sender's size */
	int tag;
	int cuda;          /* data is device memory */
	ncclResult_t result;
	int nparts;        /* sockets that carry a part of it (tp__emu_nparts) */
	int parts_done;
	int setup;         /* 0 none, 1 in progress, 2 done (receive) */
	int discard;       /* receive failed early: drain the bytes */
	uint32_t *pages;   /* bounce pages held until irecvConsumed */
	uint32_t npages;
	uint32_t resv;     /* pages reserved in the pool, not taken yet */
	tp_unpack_rec *recs; /* finished tasks' records, in completion order */
	uint32_t nrec;
};

enum emu_kind { EMU_SEND, EMU_RECV };

struct emu_thread {
	struct emu_comm *comm;
	int idx;
	pthread_t tid;
	int started;
	/*
	 * Each helper sleeps on its own condition, under the comm lock, and is
	 * woken only for a request it carries (or to stop), as NCCL's socket
	 * helpers are: one shared condition woke every helper of the comm at
	 * every step of every request.
	 */
	pthread_cond_t cv;
	uint64_t seq;      /* the next request this helper looks at */
	uint64_t wait_seq; /* receive: the request it waits to see handed over, else UINT64_MAX */
	char *scratch;     /* drain buffer for failed receives */
	char *staging;     /* pinned host memory for CUDA buffers (two slices with dstaging) */
	char *dstaging;    /* device bounce + scatter: the slice on the GPU */
	int flip;          /* which half of staging the next scattered slice lands in */
	int inflight;      /* a slice's copy + scatter is queued on stream, not yet synced */
	void *stream;
	tp_unpack_rec *recs;     /* the current task's records: two halves, as staging */
	tp_unpack_rec *recs_dev; /* their device alias (scatter path), else NULL */
	uint32_t rec_cap;        /* records per half */
	int recs_mapped;         /* recs came from tp__emu_cuda_host_alloc_mapped */
	struct iovec *iov;
	void **cp_dst;     /* device bounce: one batched H2D per slice */
	const void **cp_src;
	size_t *cp_len;
};

struct emu_comm {
	enum emu_kind kind;
	struct emu_config cfg;
	int nsocks;
	/*
	 * NCCL_SOCKET_NTHREADS as configured, carried in the hello as TCPX's
	 * sockets-per-comm contract has it.  The emulator itself runs one helper
	 * thread per socket (threads[i] serves fds[i]) whatever this says: a
	 * thread serving several sockets strictly in turn left all but one idle
	 * (docs/perf/log.md, "Emulator helper threads").
	 */
	int nthreads;
	int fds[EMU_MAX_SOCKS];
	int cuda_dev;      /* -1 without a GPU */
	pthread_mutex_t lock;
	pthread_cond_t cv;
	uint64_t npost;
	uint64_t nactive;  /* requests handed to the helper threads */
	uint64_t nsetup;   /* receive: requests set up (size known, pages reserved), in order */
	uint64_t ntested;
	uint64_t nconsumed;
	int closing;
	ncclResult_t broken; /* set when a helper hit a socket error */
	uint64_t epoch;      /* emu_comm.c's bad_closes when it was made */
	int poisoned;        /* another comm's close broke it (close_fail_others) */
	uint32_t rng;
	uint32_t mss;      /* this comm's packet payload size */
	struct emu_req reqs[EMU_MAX_REQS];
	struct emu_thread threads[EMU_MAX_SOCKS];
	struct emu_pool pool; /* receive comms in bounce mode */
	/* connect progress */
	int hello_sent[EMU_MAX_SOCKS];
	int connected[EMU_MAX_SOCKS];
	struct emu_hello hello;
};

struct emu_listen {
	int fd;
	struct emu_config cfg;
	uint64_t nonce;
	int used;
	int npend;
	struct {
		int fd;
		size_t got;
		struct emu_hello hello;
	} pend[2 * EMU_MAX_SOCKS];
	struct emu_comm *comm; /* receive comm being assembled */
	uint64_t ready_ns;     /* all sockets in: flow steering "ends" at this time */
	uint32_t calls;
};

/* emu_sock.c */
int tp__emu_sock_set_nonblock(int fd, int on);
int tp__emu_sock_tune(int fd);
int tp__emu_send_full(int fd, const void *buf, size_t n);
int tp__emu_recv_full(int fd, void *buf, size_t n);
int tp__emu_recv_iov(int fd, struct iovec *iov, int cnt);
int tp__emu_addr_resolve(struct in_addr *addr);

/* emu_pending.c: connects in progress, by slot + key */
enum { EMU_PENDING_UNKNOWN = -1, EMU_PENDING_BUSY = -2 };
uint64_t tp__emu_nonce(void);
/* Files c (marked busy) and returns its slot and key; -1 when full. */
int tp__emu_pending_add(struct emu_comm *c, uint32_t *slot, uint64_t *key);
/* The comm of (slot, key), marked busy; EMU_PENDING_* when none or busy. */
int tp__emu_pending_take(uint32_t slot, uint64_t key, struct emu_comm **c);
void tp__emu_pending_put(uint32_t slot);    /* not busy any more */
void tp__emu_pending_remove(uint32_t slot); /* the caller keeps the comm */
/* Frees the comms of entries nobody advanced for abandon_ms. */
void tp__emu_pending_reap(int64_t abandon_ms);

/* emu_comm.c */
struct emu_comm *tp__emu_comm_alloc(enum emu_kind kind, const struct emu_config *cfg);
int tp__emu_comm_start(struct emu_comm *c);
void tp__emu_comm_free(struct emu_comm *c);
/* A comm another comm's close with requests in flight has broken
 * (TCPX_EMU_CLOSE_INFLIGHT=fail-others): marks it broken, under c->lock. */
void tp__emu_comm_check_others(struct emu_comm *c);
uint32_t tp__emu_rand(uint32_t *state);
uint64_t tp__emu_slice_size(uint64_t size, int nsocks);
/* Sockets that carry a request of size bytes: one per slice, at most
 * nsocks, and one for an empty request (its header). */
int tp__emu_nparts(uint64_t size, int nsocks);
/* Request seq's first slice on socket s: slice i travels on socket
 * (i + seq) % nsocks. */
uint64_t tp__emu_first_slice(int s, uint64_t seq, int nsocks);
/* Whether socket s carries part of request seq of size bytes. */
int tp__emu_carries(int s, uint64_t seq, uint64_t size, int nsocks);
/* Wakes every helper of the comm (closing, broken), under c->lock. */
void tp__emu_wake_all(struct emu_comm *c);
/* Request seq was handed to the helpers: wakes the ones it concerns (a
 * send's carriers; receive helpers that wait for it), under c->lock. */
void tp__emu_wake_for(struct emu_comm *c, uint64_t seq);

/* emu_req.c: a request the helpers finished becomes visible to test */
void tp__emu_req_publish(struct emu_comm *c, struct emu_req *r);

/* emu_xfer.c: helper thread bodies */
void *tp__emu_send_thread(void *arg);
void *tp__emu_recv_thread(void *arg);

/* entry points, one file each group; emu_abi.c adapts them to each ABI */
ncclResult_t tp__emu_init(ncclDebugLogger_t logger);
ncclResult_t tp__emu_devices(int *ndev);
ncclResult_t tp__emu_get_properties(int dev, ncclNetProperties_v7_t *props);
ncclResult_t tp__emu_listen(int dev, void *handle, void **listen_comm);
ncclResult_t tp__emu_connect(int dev, void *handle, void **send_comm,
			     ncclNetDeviceHandle_v7_t **dev_handle);
ncclResult_t tp__emu_accept(void *listen_comm, void **recv_comm,
			    ncclNetDeviceHandle_v7_t **dev_handle);
ncclResult_t tp__emu_close_send(void *send_comm);
ncclResult_t tp__emu_close_recv(void *recv_comm);
ncclResult_t tp__emu_close_listen(void *listen_comm);
ncclResult_t tp__emu_reg_mr(void *comm, void *data, int size, int type, void **mhandle);
ncclResult_t tp__emu_dereg_mr(void *comm, void *mhandle);
ncclResult_t tp__emu_isend(void *send_comm, void *data, int size, int tag, void *mhandle,
			   void **request);
ncclResult_t tp__emu_irecv(void *recv_comm, int n, void **data, int *sizes, int *tags,
			   void **mhandles, void **request);
ncclResult_t tp__emu_test(void *request, int *done, int *sizes);
ncclResult_t tp__emu_irecv_consumed(void *recv_comm, int n, void *request);

#endif
