/* The simulated NIC's receive pages and the sockets' tokens naming them
 * (pool.h). */
#include "pool.h"

#include <errno.h>
#include <stdlib.h>

#define TOKEN_MARK 0x80000000u

static uint64_t next_random(uint64_t *s)
{
	/* xorshift64*: enough to scatter pages, and repeatable per seed. */
	uint64_t x = *s;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545F4914F6CDD1DULL;
}

/* Zeroed memory whose pages are written once here.  calloc's large blocks
 * are fresh mappings: the first read of such a page maps the shared zero
 * page and the first write then replaces it, which flushes that address
 * from the TLB of every CPU running a thread of the process — on the data
 * path (a token table is read before it is written), tens of thousands of
 * such flushes a run, each an interrupt to every core (8 % of the samples
 * with 32 sockets over four GPUs).  Written first, a page is simply
 * allocated. */
static void *zalloc_touched(size_t n, size_t size)
{
	volatile unsigned char *m = calloc(n, size);

	/* volatile: a compiler may not drop these stores to zeroed memory;
	 * the last byte too, in case the block does not start on a page */
	for (size_t i = 0; m && i < n * size; i += 4096)
		m[i] = 0;
	if (m && n * size != 0)
		m[n * size - 1] = 0;
	return (void *)m;
}

int sim_pool_init(struct sim_pool *p, uint32_t npages, uint64_t seed)
{
	p->npages = npages;
	p->nfree = npages;
	p->rng = seed ? seed : 0x9E3779B97F4A7C15ULL;
	p->free = malloc(sizeof(*p->free) * (npages ? npages : 1));
	p->refs = zalloc_touched(npages ? npages : 1, sizeof(*p->refs));
	if (!p->free || !p->refs) {
		sim_pool_fini(p);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < npages; i++)
		p->free[i] = i;
	return 0;
}

void sim_pool_fini(struct sim_pool *p)
{
	free(p->free);
	free(p->refs);
	p->free = NULL;
	p->refs = NULL;
	p->npages = p->nfree = 0;
}

int sim_pool_take(struct sim_pool *p, uint32_t *page)
{
	if (p->nfree == 0)
		return -1;
	uint32_t i = (uint32_t)(next_random(&p->rng) % p->nfree);
	*page = p->free[i];
	p->free[i] = p->free[--p->nfree];
	p->refs[*page] = 1;
	return 0;
}

int sim_pool_unref(struct sim_pool *p, uint32_t page)
{
	return --p->refs[page] == 0;
}

void sim_pool_free(struct sim_pool *p, uint32_t page)
{
	p->free[p->nfree++] = page;
}

int sim_pool_put(struct sim_pool *p, uint32_t page)
{
	if (!sim_pool_unref(p, page))
		return 0;
	sim_pool_free(p, page);
	return 1;
}

int sim_tokens_init(struct sim_tokens *t, uint32_t cap)
{
	t->cap = cap;
	t->cursor = 0;
	t->held = 0;
	t->slot = zalloc_touched(cap ? cap : 1, sizeof(*t->slot));
	return t->slot ? 0 : -ENOMEM;
}

void sim_tokens_fini(struct sim_tokens *t)
{
	free(t->slot);
	t->slot = NULL;
	t->cap = t->held = 0;
}

int sim_tokens_add(struct sim_tokens *t, uint32_t page, uint32_t *token)
{
	if (t->held == t->cap)
		return -1;
	while (t->slot[t->cursor])
		t->cursor = (t->cursor + 1) % t->cap;
	*token = t->cursor;
	t->slot[t->cursor] = page + 1;
	t->cursor = (t->cursor + 1) % t->cap;
	t->held++;
	return 0;
}

/* Undo the marks of the first `n` ranges and of `upto` tokens of range n. */
static void unmark(struct sim_tokens *t, const struct devmem_token_range *r, size_t n,
		   uint32_t upto)
{
	for (size_t i = 0; i <= n; i++) {
		uint32_t count = i < n ? r[i].count : upto;
		for (uint32_t k = 0; k < count; k++)
			t->slot[r[i].start + k] &= ~TOKEN_MARK;
	}
}

int sim_tokens_return(struct sim_tokens *t, struct sim_pool *pool,
		      const struct devmem_token_range *r, size_t n, uint32_t *bad,
		      sim_page_freed freed, void *arg)
{
	/* First mark every token named, so that a token named twice is caught
	 * as surely as one never given; then release the marked ones. */
	for (size_t i = 0; i < n; i++) {
		if (r[i].start >= t->cap || r[i].count > t->cap - r[i].start) {
			*bad = r[i].start >= t->cap ? r[i].start : t->cap;
			unmark(t, r, i, 0);
			return -EINVAL;
		}
		for (uint32_t k = 0; k < r[i].count; k++) {
			uint32_t *s = &t->slot[r[i].start + k];
			if (*s == 0 || (*s & TOKEN_MARK)) {
				*bad = r[i].start + k;
				unmark(t, r, i, k);
				return -EINVAL;
			}
			*s |= TOKEN_MARK;
		}
	}
	for (size_t i = 0; i < n; i++)
		for (uint32_t k = 0; k < r[i].count; k++) {
			uint32_t *s = &t->slot[r[i].start + k];
			uint32_t page = (*s & ~TOKEN_MARK) - 1;
			if (!freed)
				sim_pool_put(pool, page);
			else if (sim_pool_unref(pool, page))
				freed(arg, page);
			*s = 0;
			t->held--;
		}
	return 0;
}

void sim_tokens_drop_all(struct sim_tokens *t, struct sim_pool *pool)
{
	for (uint32_t i = 0; i < t->cap && t->held; i++)
		if (t->slot[i]) {
			sim_pool_put(pool, t->slot[i] - 1);
			t->slot[i] = 0;
			t->held--;
		}
}

void sim_pool_ref(struct sim_pool *p, uint32_t page)
{
	p->refs[page]++;
}

uint32_t sim_cut_peek(const struct sim_cut *c, uint32_t mss, size_t avail, int *fresh)
{
	size_t n = c->pkt_left ? c->pkt_left : mss;
	*fresh = !(c->pkt_left && c->page_left);
	size_t room = *fresh ? DEVMEM_PAGE : c->page_left;
	if (n > room)
		n = room;
	if (n > avail)
		n = avail;
	return (uint32_t)n;
}

int sim_cut_take(struct sim_cut *c, uint32_t mss, uint32_t len, int fresh, uint32_t page)
{
	if (!c->pkt_left)
		c->pkt_left = mss;
	if (fresh) {
		c->page = page;
		c->page_left = DEVMEM_PAGE;
	}
	c->page_left -= len;
	c->pkt_left -= len;
	if (c->pkt_left == 0)
		c->page_left = 0; /* the next packet starts on a fresh page */
	return c->page_left == 0;
}

size_t sim_cut_fit(const struct sim_cut *c, uint32_t mss, size_t len, size_t max_frags,
		   size_t max_fresh)
{
	struct sim_cut t = *c;
	size_t got = 0, frags = 0, fresh_used = 0;
	while (got < len && frags < max_frags) {
		int fresh;
		uint32_t n = sim_cut_peek(&t, mss, len - got, &fresh);
		if (fresh && fresh_used == max_fresh)
			break;
		sim_cut_take(&t, mss, n, fresh, 0);
		got += n;
		frags++;
		fresh_used += (size_t)fresh;
	}
	return got;
}

size_t sim_cut_fresh(const struct sim_cut *c, uint32_t mss, size_t len)
{
	struct sim_cut t = *c;
	size_t got = 0, fresh_used = 0;
	while (got < len) {
		int fresh;
		uint32_t n = sim_cut_peek(&t, mss, len - got, &fresh);
		sim_cut_take(&t, mss, n, fresh, 0);
		got += n;
		fresh_used += (size_t)fresh;
	}
	return fresh_used;
}
