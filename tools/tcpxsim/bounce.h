/* Memory the simulated NIC writes into and reads from: the bounce buffer
 * the RxDM hands to the plugin (GPU memory with a POSIX file descriptor
 * handle, or a memfd in host mode, for machines without a GPU), and the
 * sender's registered memory.  Nothing here takes a lock but the lane
 * pool's and the primary-context cache's: the callers' per-socket and
 * per-pool locks are enough, and copies run outside them. */
#ifndef TCPXSIM_BOUNCE_H
#define TCPXSIM_BOUNCE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "pool.h"

struct sim_bounce {
	char gpu[32];    /* PCI address the RxDM serves it under */
	int on_gpu;
	size_t size;
	size_t align;
	int fd;          /* exported handle; each export hands out a dup */
	uint8_t *host;   /* host and hostmap modes: where the CPU reads and writes it */
	int hostmap;     /* host memory from cuMemCreate that the GPU maps (TCPXSIM_BOUNCE=hostmap) */
	uint64_t dptr;   /* GPU mode: our mapping (CUdeviceptr) */
	void *ctx;       /* GPU mode: the device's primary context */
	pthread_mutex_t lock; /* the pool's: held only to take, ref and free pages */
	struct sim_pool pool;
};

/* Whether the CUDA driver is usable here (loaded, initialised, a device). */
int sim_cuda_available(void);

/* Where a bounce buffer lives: a memfd (no GPU: the CPU tests), GPU memory
 * (what the NIC writes on A3), or host memory made by CUDA and exported as
 * the GPU one is, which the plugin maps into its GPU and the simulator
 * writes with the CPU (no copy). */
enum sim_bounce_mode { SIM_BOUNCE_HOST, SIM_BOUNCE_GPU, SIM_BOUNCE_HOSTMAP };

/* 0 or a negative errno with `err` saying why. */
int sim_bounce_create(const char *gpu, size_t size, enum sim_bounce_mode mode, uint64_t seed,
		      struct sim_bounce **out, char *err, size_t errlen);
void sim_bounce_destroy(struct sim_bounce *b);

/* A receive's fragments at most, and the bytes one receive or one send
 * moves at most. */
#define TCPXSIM_MAX_FRAGS 2048
#define TCPXSIM_STAGE_BYTES (2u << 20)
/* Events of a lane: a send's pieces in flight at once. */
#define TCPXSIM_LANE_EVENTS 8

/* What one receive or send in flight uses, so that calls on different
 * sockets share nothing: a staging buffer (pinned in GPU mode), a stream
 * of the context the copies run in, and the fragment lists.  Lanes are
 * pooled per context; a call takes one and gives it back. */
struct sim_lane {
	void *ctx;        /* GPU mode: the context of `stream`; NULL in host mode */
	void *stream;
	void *ev[TCPXSIM_LANE_EVENTS];
	uint8_t *buf;     /* TCPXSIM_STAGE_BYTES */
	uint32_t offs[TCPXSIM_MAX_FRAGS], lens[TCPXSIM_MAX_FRAGS];
	uint64_t dst[TCPXSIM_MAX_FRAGS], src[TCPXSIM_MAX_FRAGS];
	size_t len[TCPXSIM_MAX_FRAGS];
	uint32_t pages[TCPXSIM_MAX_FRAGS]; /* a receive's fresh pages, taken up front */
	size_t pend_first, pend_n; /* copies held back for sim_lane_sync (the copy lock) */
	pthread_mutex_t *copy_lock; /* GPU mode: its context's (TCPXSIM_COPY_LOCK) */
	struct sim_lane *next;
};

/* A lane for copies in `ctx` (NULL: host mode); NULL when none can be
 * made. */
struct sim_lane *sim_lane_get(void *ctx);
void sim_lane_put(struct sim_lane *l);
/* Wait for every copy queued on the lane: 0 or -EIO. */
int sim_lane_sync(struct sim_lane *l);

/* Queue the writes of fragments first..first+n-1 of the lane's lists,
 * their bytes back to back at `src` (inside l->buf), each to its offset in
 * the buffer.  Host mode copies at once; GPU mode on the lane's stream,
 * done at sim_lane_sync. */
int sim_bounce_write_frags(struct sim_bounce *b, struct sim_lane *l, const uint8_t *src,
			   size_t first, size_t n);
/* Fill `n` pages with 0x5a (poisoning returned pages); done on return. */
int sim_bounce_poison(struct sim_bounce *b, struct sim_lane *l, const uint32_t *pages, size_t n);
/* Fill [off, off + n) with `byte`. */
int sim_bounce_fill(struct sim_bounce *b, size_t off, int byte, size_t n);

/* The context registered memory at `src` belongs to (NULL in host mode,
 * or where it names none: then *ok is 0). */
void *sim_mem_ctx(uint64_t src, int on_gpu, int *ok);
/* Queue the reads of `len` bytes of registered memory at `src` (a device
 * pointer in GPU mode, a host pointer in host mode) to `dst`, in pieces of
 * `piece` bytes (at most TCPXSIM_LANE_EVENTS of them), piece i as event i
 * of the lane: sim_mem_wait(l, i) waits for it.  The pieces queued (0: the
 * first failed). */
size_t sim_mem_reads(struct sim_lane *l, uint8_t *dst, uint64_t src, size_t len, size_t piece);
int sim_mem_wait(struct sim_lane *l, int ev);

#endif
