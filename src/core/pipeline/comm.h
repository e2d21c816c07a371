/* One comm (a channel's send or receive half), its window of request slots
 * and the pipeline every comm runs: issue -> test -> (unpack) -> consume
 * (comm.c), for the control channel and the data channels alike. */
#ifndef TP_CORE_COMM_H
#define TP_CORE_COMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/pipeline/hostcopy.h"
#include "core/pipeline/window.h"
#include "device/tp_device.h"
#include "net/net.h"

struct tcpx_p2p_mr;
struct tcpx_p2p_session;
struct tcpx_p2p_xfer;

enum tp_dir { TP_SEND = 0, TP_RECV = 1 };

/* How a chunk's bytes move between the plugin's buffer and the transfer's
 * memory (tp__copy_path decides), and so what a received chunk's hand-back
 * waits for: the copy threads (HOST_THREADS), the device queue
 * (tp_path_on_device), or nothing (the rest: done in the pass, or no copy). */
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

static inline bool tp_path_on_device(enum tp_copy_path p)
{
	return p == TP_PATH_LIST_KERNEL || p == TP_PATH_LIST_COPIES || p == TP_PATH_KERNEL ||
	       p == TP_PATH_D2D || p == TP_PATH_STAGED;
}

struct tp_slot {
	void *request;      /* NULL between preparing and issuing (gathers) */
	struct tcpx_p2p_xfer *x; /* NULL on the control channel */
	uint32_t len;
	int got;            /* bytes test() said arrived; TP_NET_SIZE_UNKNOWN: not said */
	struct tp_meta_view meta; /* a bounce receive's records, checked once tested */
	size_t soff;        /* the chunk's offset in its transfer's stream */
	uint64_t launch;    /* device work (unpack, scatter, gather) gating the next stage */
	enum tp_copy_path path; /* a receive's, once tested: how its bytes reach the
				 * transfer's memory (NONE: nothing left to wait for) */
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
	int64_t t_done;     /* a send: when its test() said done */
	/* To 256 bytes: slots are indexed on every stage of every chunk, and a
	 * power-of-two size makes that a shift (248 bytes cost the send path
	 * some 40 instructions a chunk under callgrind: docs/perf/log.md). */
	char pad_to_256[8];
};
_Static_assert(sizeof(struct tp_slot) == 256, "struct tp_slot: keep it a power of two");

/* The buffers a chunk may pass through besides the transfer's own memory,
 * one name each:
 *   bounce   the plugin's receive buffer (TCPX: device pages), read through
 *            its fragment records (comm: bounce, meta)
 *   landing  device memory a receive is posted into where the bounce is in
 *            device memory and the destination is not: the plugin never
 *            writes it (conn: land; the control channel: ctl->land)
 *   staging  slots a chunk is gathered into or scattered from when it spans
 *            several segments, or goes nowhere (comm: stage, below)
 *   drain    where a closing conn's throw-away receives land (close/drain.c)
 *   zero     a cleared device chunk that clears device staging (stream.c) */

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
	/* Receives [win.retired, bound) carry their chunk; [bound, win.posted)
	 * were posted ahead of it, into bounce pages, before the announcement
	 * of their item was numbered here (stream.c, "Receives ahead").
	 * bound == win.posted on every other comm. */
	uint32_t bound;
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
	/* The bounce pages are reached through the GPU (tp__dev_ptr_via_gpu):
	 * device memory, or host memory only the plugin's GPU maps.  Then the
	 * plugin's sockets are devmem sockets, which refuse plain reads: every
	 * receive posts device memory (conn.c, ctl.c, close/drain.c, stream.c). */
	bool bounce_on_device;
	struct tp_stage stage[2]; /* [0] host, [1] CUDA */
	/* A closing conn: the peer's count of requests on the other end of
	 * this comm, as its CLOSE says (ctl.c), and the requests to post here
	 * in all so that every one the peer has completes (drain_set: known);
	 * the ones past this side's own are empty sends or throw-away
	 * receives (close/drain.c). */
	uint32_t peer_count;
	uint32_t drain_to;
	bool drain_set;
	/* A receive on it reported its size: the plugin says what landed, so
	 * staging no longer needs clearing before a receive (stage_clear). */
	bool sizes_seen;
};

/* The tag of a comm's request number k (its count of requests issued
 * before it): a send and the receive it meets are the k-th of their comms
 * on both peers (FIFO per comm), whatever they carry, a chunk or a close's
 * empty send and throw-away receive.  TCPX ignores tags; the emulator's
 * strict mode checks them. */
static inline int tp_comm_tag(uint32_t k)
{
	return (int)(k & 0x7fffffffu);
}

/* Hand a request for slot [issued] to the plugin: isend or irecv of len
 * bytes at buf (registered as mh), tagged tp_comm_tag(issued).  The plugin
 * may say "not now" (a NULL request): 0 and *taken false, to be tried
 * again. */
int tp__comm_issue(struct tp_net *net, struct tp_comm *cm, void *buf, size_t len, void *mh,
		   bool *taken);
/* The test stage: test() the oldest incomplete request, once more per
 * request still owed a hand-over.  Advances win.tested; a send ends at its
 * test (unpacked and retired too, its staging slot given back).  The
 * caller reads the slots that completed. */
int tp__comm_test(struct tp_net *net, struct tp_comm *cm, bool *moved);
/* The gate before irecvConsumed: has the unpack of sl (host copy threads;
 * device work unless device_too is false) finished?  Never blocks. */
int tp__comm_unpacked(struct tcpx_p2p_session *s, const struct tp_slot *sl, bool device_too,
		      bool *ready);
/* Hand the oldest unpacked receive (win.retired) back to the plugin, FIFO,
 * and its staging slot to the ring; win.retired advances. */
int tp__comm_consume(struct tp_net *net, struct tp_comm *cm);

/* copy_path.c: how the bytes of the chunk in sl move (a send's gather, a
 * landed receive's unpack or scatter). */
enum tp_copy_path tp__copy_path(const struct tcpx_p2p_session *s, const struct tp_comm *cm,
				const struct tp_slot *sl);

#endif
