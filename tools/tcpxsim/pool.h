/* The simulated NIC's receive pages and the per-socket tokens that name
 * them: no I/O, no locking (the caller holds the pool's or the socket's
 * lock), so that the CPU tests can drive them directly. */
#ifndef TCPXSIM_POOL_H
#define TCPXSIM_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "devmem.h"

/* Pages of the bounce buffer that the "NIC" may write packets into.  Free
 * pages are handed out in random order, as a NIC's page pool recycles them,
 * so a receive lands scattered and out of order.  A page may be named by
 * several tokens (a packet's bytes returned by two recvmsg calls); it is
 * free again when the last is returned.
 *
 * Locking (the callers'): `free`, `nfree` and `rng` under the pool's lock
 * (sim_pool_take, sim_pool_free, sim_pool_put).  A page's `refs` entry
 * belongs to the one socket that took the page, until it is free again:
 * only that socket's receive (its open page, its fresh pages) and token
 * returns change it, under that socket's lock, so sim_pool_ref and
 * sim_pool_unref need no pool lock and two sockets' receives and returns
 * share nothing but the free list. */
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
/* Drop one reference: 1 when it was the last, the page then neither held
 * nor free until sim_pool_free (it is being poisoned, say). */
int sim_pool_unref(struct sim_pool *p, uint32_t page);
void sim_pool_free(struct sim_pool *p, uint32_t page);

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
 * and *bad says which.  Without `freed`, pages whose last token this was
 * are free again at once (the caller holds the pool's lock); with it, each
 * is handed to `freed` instead and stays out of the pool until the caller
 * gives it back with sim_pool_free (after poisoning it; the pool's lock is
 * then needed only for that). */
typedef void (*sim_page_freed)(void *arg, uint32_t page);
int sim_tokens_return(struct sim_tokens *t, struct sim_pool *pool,
		      const struct devmem_token_range *ranges, size_t n, uint32_t *bad,
		      sim_page_freed freed, void *arg);
/* The socket closed: its pages go back to the pool. */
void sim_tokens_drop_all(struct sim_tokens *t, struct sim_pool *pool);

/* Where a socket's stream stands in the NIC's layout: packets of `mss`
 * bytes, each written from the start of a fresh page and cut at page ends.
 * A receive that ends inside a page leaves the rest of that page to the
 * next receive (the packet is in the page whatever the reads), so the page
 * stays open, held by the socket, until the packet or the page ends. */
struct sim_cut {
	uint32_t pkt_left;  /* bytes of the current packet still to come; 0: a packet starts */
	uint32_t page;      /* the open page, while page_left > 0 */
	uint32_t page_left; /* its room for the current packet; 0: no page open */
};

/* The next fragment of at most `avail` bytes: its length, and whether it
 * needs a fresh page (else it continues c->page). */
uint32_t sim_cut_peek(const struct sim_cut *c, uint32_t mss, size_t avail, int *fresh);
/* Take that fragment (`page`: the fresh page, when it needed one).
 * 1 when it closed the open page (the socket's hold on it ends). */
int sim_cut_take(struct sim_cut *c, uint32_t mss, uint32_t len, int fresh, uint32_t page);
/* How many of `len` bytes fit in at most `max_frags` fragments that open
 * at most `max_fresh` fresh pages. */
size_t sim_cut_fit(const struct sim_cut *c, uint32_t mss, size_t len, size_t max_frags,
		   size_t max_fresh);

/* How many fresh pages the next `len` bytes open (len as sim_cut_fit
 * answered it). */
size_t sim_cut_fresh(const struct sim_cut *c, uint32_t mss, size_t len);

/* One more token names `page`. */
void sim_pool_ref(struct sim_pool *p, uint32_t page);

#endif
