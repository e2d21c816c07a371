/* The simulated NIC's receive pages and the per-socket tokens that name
 * them: no I/O, no locking (the caller holds the simulator's lock), so that
 * the CPU tests can drive them directly. */
#ifndef TCPXSIM_POOL_H
#define TCPXSIM_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "devmem.h"

/* Pages of the bounce buffer that the "NIC" may write packets into.  Free
 * pages are handed out in random order, as a NIC's page pool recycles them,
 * so a receive lands scattered and out of order.  A page may be named by
 * several tokens (a packet's bytes returned by two recvmsg calls); it is
 * free again when the last is returned. */
struct sim_pool {
	uint32_t npages;
	uint32_t nfree;
	uint32_t *free;  /* free page numbers, [0, nfree) */
	uint16_t *refs;  /* tokens naming each page */
	uint64_t rng;
};

int sim_pool_init(struct sim_pool *p, uint32_t npages, uint64_t seed);
void sim_pool_fini(struct sim_pool *p);
/* A random free page with one reference; -1 when none is free. */
int sim_pool_take(struct sim_pool *p, uint32_t *page);
/* Drop one reference: 1 when that made the page free again. */
int sim_pool_put(struct sim_pool *p, uint32_t page);

/* One socket's tokens: small integers allocated cyclically (the devmem
 * kernel allocates them from an xarray the same way), each naming a page
 * until SO_DEVMEM_DONTNEED returns it. */
struct sim_tokens {
	uint32_t cap;     /* token values are [0, cap) */
	uint32_t cursor;  /* where the next allocation starts looking */
	uint32_t held;
	uint32_t *slot;   /* page + 1 per token; 0 = not held */
};

int sim_tokens_init(struct sim_tokens *t, uint32_t cap);
void sim_tokens_fini(struct sim_tokens *t);
/* A token for `page`; -1 when every token is held. */
int sim_tokens_add(struct sim_tokens *t, uint32_t page, uint32_t *token);
/* Return every token of `ranges` to `pool`, all or none: a token that is
 * not held (never given, given to another socket, returned already, or
 * named twice in one call) fails the call with -EINVAL, nothing returned,
 * and *bad says which.  `freed` (may be NULL) hears of each page that is
 * free again. */
typedef void (*sim_page_freed)(void *arg, uint32_t page);
int sim_tokens_return(struct sim_tokens *t, struct sim_pool *pool,
		      const struct devmem_token_range *ranges, size_t n, uint32_t *bad,
		      sim_page_freed freed, void *arg);
/* The socket closed: its pages go back to the pool. */
void sim_tokens_drop_all(struct sim_tokens *t, struct sim_pool *pool);

/* How a byte run of a stream is laid into pages: packets of `mss` bytes,
 * each starting at the beginning of a fresh page, cut at page boundaries,
 * so every fragment fills (part of) one fresh page from its start.
 * sim_cut_fit gives how many of `len` bytes fit into at most `max_frags`
 * fragments; sim_cut_next the length of the fragment at offset `off` of a
 * run of `len` bytes. */
size_t sim_cut_fit(size_t len, uint32_t mss, size_t max_frags);
uint32_t sim_cut_next(size_t off, size_t len, uint32_t mss);

#endif
