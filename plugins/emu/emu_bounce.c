/*
 * Per-comm bounce pool and unpack meta ring, laid out like TCPX's: every
 * receive lands as fragments of at most one 4 KiB page each, on pages taken
 * at random from a shuffled free list, at a random intra-page offset below
 * 2048 (so all fragments but the last are >= 2048 bytes and a 4 MiB receive
 * needs at most 2048 records).  The consumer must walk the records; any
 * shortcut that assumes contiguity or page order reads the wrong bytes.
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

uint32_t tp__emu_pool_layout(struct emu_pool *pool, int slot, uint64_t size)
{
	tp_unpack_rec *rec = pool->meta->mem[slot];
	uint64_t off = 0;
	uint32_t n = 0;

	while (off < size) {
		uint32_t intra = (uint32_t)(xorshift(&pool->rng) % (EMU_PAGE / 2));
		uint64_t len = EMU_PAGE - intra;

		if (len > size - off)
			len = size - off;
		rec[n].src_off = intra;
		rec[n].len = (uint32_t)len;
		rec[n].dst_off = off;
		off += len;
		n++;
	}
	return n;
}

void tp__emu_pool_take(struct emu_pool *pool, int slot, uint32_t *pages, uint32_t n)
{
	tp_unpack_rec *rec = pool->meta->mem[slot];

	for (uint32_t i = 0; i < n; i++) {
		uint32_t j = (uint32_t)(xorshift(&pool->rng) % pool->nfree);

		pages[i] = pool->free_pages[j];
		pool->free_pages[j] = pool->free_pages[--pool->nfree];
		rec[i].src_off += pages[i] * EMU_PAGE;
	}
}

/* The consumer may look at the records as soon as it sees the count. */
void tp__emu_pool_publish(struct emu_pool *pool, int slot, uint32_t n)
{
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
