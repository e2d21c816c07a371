/* Memory the simulated NIC writes into and reads from: the bounce buffer
 * the RxDM hands to the plugin (GPU memory with a POSIX file descriptor
 * handle, or a memfd in host mode, for machines without a GPU), and the
 * sender's registered memory. */
#ifndef TCPXSIM_BOUNCE_H
#define TCPXSIM_BOUNCE_H

#include <stddef.h>
#include <stdint.h>

#include "pool.h"

struct sim_bounce {
	char gpu[32];    /* PCI address the RxDM serves it under */
	int on_gpu;
	size_t size;
	size_t align;
	int fd;          /* exported handle; each export hands out a dup */
	uint8_t *host;   /* host mode: our mapping */
	uint64_t dptr;   /* GPU mode: our mapping (CUdeviceptr) */
	void *ctx;       /* GPU mode: the device's primary context */
	void *stream;    /* GPU mode: where a receive's copies go */
	struct sim_pool pool;
};

/* Whether the CUDA driver is usable here (loaded, initialised, a device). */
int sim_cuda_available(void);

/* 0 or a negative errno with `err` saying why. */
int sim_bounce_create(const char *gpu, size_t size, int on_gpu, uint64_t seed,
		      struct sim_bounce **out, char *err, size_t errlen);
void sim_bounce_destroy(struct sim_bounce *b);

/* A receive's fragments at most, and the bytes one receive moves at most. */
#define TCPXSIM_MAX_FRAGS 2048
#define TCPXSIM_STAGE_BYTES (8u << 20)

/* Write n fragments, back to back in `src`, each to its offset in the
 * buffer.  Not thread-safe: the caller holds the simulator's lock. */
int sim_bounce_write_frags(struct sim_bounce *b, const uint8_t *src, const uint32_t *offs,
			   const uint32_t *lens, size_t n);
/* Where a receive's bytes are read to first (pinned in GPU mode), and its
 * size; one buffer, under the simulator's lock. */
uint8_t *sim_stage(int on_gpu, size_t *cap);
/* Fill [off, off + n) with `byte` (poisoning returned pages). */
int sim_bounce_fill(struct sim_bounce *b, size_t off, int byte, size_t n);

/* Copy `n` bytes of registered memory at `src` (a device pointer in GPU
 * mode, a host pointer in host mode) to `dst`. */
int sim_mem_read(void *dst, uint64_t src, size_t n, int on_gpu);

#endif
