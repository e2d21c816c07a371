/*
 * Per-comm bounce pool and unpack meta ring, laid out as TCPX lays them out,
 * because a consumer that passes here must not trip over what TCPX does:
 * - each socket task (one slice on one socket) receives packets of the
 *   comm's MSS into 4 KiB devmem pages, so a fragment ends where a packet or
 *   a page ends: fragments of any length up to 4 KiB, many far below it;
 * - a task starts on a fresh page, at a random intra-page offset, and fills
 *   pages taken at random among the most recently freed of a shuffled free
 *   list: page order says nothing about message order;
 * - every task keeps its own fragment list, and tcpxCommProgress appends
 *   finished tasks' lists to the ring in completion order, so records of
 *   different sockets interleave and dst_off is not monotonic;
 * - more than 2048 records for one receive is where TCPX calls exit(1).
 * The consumer must walk the records; any shortcut that assumes contiguity,
 * page order, record order or a minimum fragment size reads wrong bytes.
 */
#include <stdlib.h>
#include <string.h>

#include "emu.h"

static uint64_t xorshift(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*s = x;
	return x;
}

static int meta_alloc(struct emu_pool *pool)
{
	void *host = NULL, *dev = NULL;

	if (pool->mode == EMU_BOUNCE_DEVICE) {
		if (tp__emu_cuda_host_alloc_mapped(&host, &dev, sizeof(*pool->meta)))
			return -1;
	} else {
		host = aligned_alloc(64, sizeof(*pool->meta));
		if (!host)
			return -1;
		dev = host;
	}
	memset(host, 0, sizeof(*pool->meta));
	pool->meta = host;
	pool->meta_dev = dev;
	return 0;
}

static void meta_free(struct emu_pool *pool)
{
	if (pool->mode == EMU_BOUNCE_DEVICE)
		tp__emu_cuda_host_free(pool->meta);
	else
		free(pool->meta);
	pool->meta = NULL;
}

static int buf_alloc(struct emu_pool *pool)
{
	size_t bytes = (size_t)pool->npages * EMU_PAGE;
	void *p = NULL;

	if (pool->mode == EMU_BOUNCE_DEVICE) {
		if (tp__emu_cuda_malloc(&p, bytes))
			return -1;
	} else {
		p = aligned_alloc(EMU_PAGE, bytes);
		if (!p)
			return -1;
	}
	pool->buf = p;
	return 0;
}

static void buf_free(struct emu_pool *pool)
{
	if (pool->mode == EMU_BOUNCE_DEVICE)
		tp__emu_cuda_free(pool->buf);
	else
		free(pool->buf);
	pool->buf = NULL;
}

/* The unpack handle lives in device memory in device mode, as on TCPX. */
static int handle_alloc(struct emu_pool *pool, int null_bounce)
{
	struct tp_unpack_handle h = {
		.meta = pool->meta_dev, .bounce_buf = null_bounce ? NULL : pool->buf,
		.head = (uint64_t)-1,
	};
	void *p = NULL;

	if (pool->mode == EMU_BOUNCE_DEVICE) {
		if (tp__emu_cuda_malloc(&p, sizeof(h)))
			return -1;
		if (tp__emu_cuda_copy_sync(p, &h, sizeof(h))) {
			tp__emu_cuda_free(p);
			return -1;
		}
	} else {
		p = malloc(sizeof(h));
		if (!p)
			return -1;
		memcpy(p, &h, sizeof(h));
	}
	pool->uh = p;
	return 0;
}

static void handle_free(struct emu_pool *pool)
{
	if (pool->mode == EMU_BOUNCE_DEVICE)
		tp__emu_cuda_free(pool->uh);
	else
		free(pool->uh);
	pool->uh = NULL;
}

int tp__emu_pool_create(struct emu_pool *pool, enum emu_bounce mode, uint32_t npages,
			uint64_t seed, int null_bounce)
{
	memset(pool, 0, sizeof(*pool));
	pool->mode = mode;
	pool->npages = npages;
	pool->nfree = npages;
	pool->rng = seed | 1;
	pool->free_pages = malloc((size_t)npages * sizeof(*pool->free_pages));
	if (!pool->free_pages)
		goto fail;
	for (uint32_t i = 0; i < npages; i++)
		pool->free_pages[i] = i;
	for (uint32_t i = npages - 1; i > 0; i--) {
		uint32_t j = (uint32_t)(xorshift(&pool->rng) % (i + 1));
		uint32_t t = pool->free_pages[i];

		pool->free_pages[i] = pool->free_pages[j];
		pool->free_pages[j] = t;
	}
	if (buf_alloc(pool))
		goto free_list;
	if (meta_alloc(pool))
		goto free_buf;
	if (handle_alloc(pool, null_bounce))
		goto free_meta;
	if (mode == EMU_BOUNCE_DEVICE && tp__emu_cuda_stream_create(&pool->stream))
		goto free_handle;
	return 0;

free_handle:
	handle_free(pool);
free_meta:
	meta_free(pool);
free_buf:
	buf_free(pool);
free_list:
	free(pool->free_pages);
	pool->free_pages = NULL;
fail:
	EMU_WARN("cannot allocate a %s bounce pool of %u pages",
		 mode == EMU_BOUNCE_DEVICE ? "device" : "host", npages);
	return -1;
}

void tp__emu_pool_destroy(struct emu_pool *pool)
{
	if (!pool->free_pages)
		return;
	tp__emu_cuda_stream_destroy(pool->stream);
	handle_free(pool);
	meta_free(pool);
	buf_free(pool);
	free(pool->free_pages);
	pool->free_pages = NULL;
}

uint32_t tp__emu_pool_need(uint64_t size, uint64_t ntasks)
{
	return (uint32_t)((size + EMU_PAGE - 1) / EMU_PAGE + ntasks);
}

/* Pages are taken at random among the EMU_POOL_RECYCLE most recently freed
 * ones (the free list's tail, where releases append), as a NIC's page pool
 * recycles its pages: the order stays scattered, and a comm's working set
 * is what it holds plus that window, not the whole pool (a first touch of
 * each host page is a page fault, which a real bounce buffer never takes). */
uint32_t tp__emu_pool_take(struct emu_pool *pool, uint64_t len, uint32_t *pages,
			   uint32_t *npages)
{
	uint32_t intra = (uint32_t)(xorshift(&pool->rng) % EMU_PAGE);
	uint64_t n = (intra + len + EMU_PAGE - 1) / EMU_PAGE;

	for (uint64_t i = 0; i < n; i++) {
		uint32_t w = pool->nfree < EMU_POOL_RECYCLE ? pool->nfree : EMU_POOL_RECYCLE;
		uint32_t j = pool->nfree - 1 - (uint32_t)(xorshift(&pool->rng) % w);

		pages[(*npages)++] = pool->free_pages[j];
		pool->free_pages[j] = pool->free_pages[--pool->nfree];
	}
	return intra;
}

/* Every record ends at a packet or a page boundary, or at the task's end. */
uint32_t tp__emu_frag_max(uint64_t len, uint32_t mss)
{
	return (uint32_t)((len + mss - 1) / mss + (len + EMU_PAGE - 1) / EMU_PAGE + 1);
}

uint32_t tp__emu_frags(tp_unpack_rec *rec, const uint32_t *pages, uint32_t intra, uint32_t mss,
		       uint64_t off, uint64_t len)
{
	uint64_t pos = 0;
	uint32_t page = 0, in_page = intra, n = 0;

	while (pos < len) {
		uint64_t pkt_end = (pos / mss + 1) * mss;
		uint64_t take = (pkt_end < len ? pkt_end : len) - pos;

		if (take > EMU_PAGE - in_page)
			take = EMU_PAGE - in_page;
		rec[n].src_off = pages[page] * EMU_PAGE + in_page;
		rec[n].len = (uint32_t)take;
		rec[n].dst_off = off + pos;
		n++;
		pos += take;
		in_page += (uint32_t)take;
		if (in_page == EMU_PAGE) {
			page++;
			in_page = 0;
		}
	}
	return n;
}

/* The consumer may look at the records as soon as it sees the count. */
void tp__emu_pool_publish(struct emu_pool *pool, int slot, const tp_unpack_rec *rec, uint32_t n)
{
	memcpy(pool->meta->mem[slot], rec, (size_t)n * sizeof(*rec));
	__atomic_store_n(&pool->meta->cnt[slot], (uint64_t)n, __ATOMIC_RELEASE);
}

void tp__emu_pool_release(struct emu_pool *pool, const uint32_t *pages, uint32_t n, int poison)
{
	int dev = pool->mode == EMU_BOUNCE_DEVICE;

	for (uint32_t i = 0; i < n; i++) {
		char *p = pool->buf + (size_t)pages[i] * EMU_PAGE;

		if (poison && dev)
			(void)tp__emu_cuda_memset(p, 0xA5, EMU_PAGE, pool->stream);
		else if (poison)
			memset(p, 0xA5, EMU_PAGE);
		pool->free_pages[pool->nfree++] = pages[i];
	}
	if (poison && dev && n)
		(void)tp__emu_cuda_sync(pool->stream);
}
