/* The copy-list kernel and its memcpy variant against a CPU reference:
 * random lists (seeded; the seed is printed and taken as argv[1]) of
 * 1-byte, odd-length, 16-byte aligned and exactly TP_COPY_MAX_ENTRY
 * entries at odd offsets, 200000 entries of 1-7 bytes, gathers, scatters
 * and one range split in list order; device, pinned and (for the memcpy
 * variant) pageable memory on either side; the kernel's list in pinned
 * and in device memory.  Every destination range has poisoned guard bytes
 * around it and the whole destination buffer is compared, so a byte
 * written outside a range fails the test.  Then, printed and not checked:
 * the throughput of a 2 MiB gather (32 x 64 KiB, device to device) and
 * the launch-to-event latency of one. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "device/dev_priv.h"
#include "gpu_check.h"
#include "tcpx_p2p.h"

#define GUARD 64 /* poisoned bytes before the first and after the last range */
#define POISON 0xa5

#define F_ALIGN16 1 /* 16-byte aligned offsets and lengths: uint4 words throughout */
#define F_GATHER 2  /* dst ranges back to back: the staging buffer of a send */
#define F_SCATTER 4 /* src ranges back to back: a received buffer */
#define F_SPLIT (F_GATHER | F_SCATTER) /* one range split in list order */

struct shape {
	const char *name;
	uint32_t n;
	uint32_t len_min, len_max;
	unsigned flags;
};

/* Lengths cross the kernel's thresholds: < 64 bytes (byte copies), < 512
 * (a warp per entry) and the TP_COPY_MAX_ENTRY of the contract. */
static const struct shape shapes[] = {
	{ "1-byte", 4096, 1, 1, 0 },
	{ "short", 5000, 0, 1100, 0 },
	{ "odd", 1000, 1, TP_COPY_MAX_ENTRY, 0 },
	{ "aligned16", 2000, 16, 8192, F_ALIGN16 },
	{ "max", 64, TP_COPY_MAX_ENTRY, TP_COPY_MAX_ENTRY, 0 },
	{ "max-aligned16", 64, TP_COPY_MAX_ENTRY, TP_COPY_MAX_ENTRY, F_ALIGN16 },
	{ "tiny", 200000, 1, 7, 0 }, /* > 4096 x 32: blocks read two batches */
	{ "gather", 32, TP_COPY_MAX_ENTRY, TP_COPY_MAX_ENTRY, F_GATHER },
	{ "scatter", 3000, 1, 4096, F_SCATTER },
	{ "split", 256, 1, TP_COPY_MAX_ENTRY, F_SPLIT },
};
#define NSHAPES (sizeof(shapes) / sizeof(shapes[0]))

enum mem { MEM_DEV, MEM_PINNED, MEM_PAGEABLE };
static const char *const mem_name[] = { "device", "pinned", "pageable" };

/* Directions; no kernel reaches pageable memory. */
static const struct dir {
	enum mem src, dst;
} dirs[] = {
	{ MEM_DEV, MEM_DEV },	  { MEM_DEV, MEM_PINNED },   { MEM_PINNED, MEM_DEV },
	{ MEM_PINNED, MEM_PINNED }, { MEM_DEV, MEM_PAGEABLE }, { MEM_PAGEABLE, MEM_DEV },
};
#define NDIRS (sizeof(dirs) / sizeof(dirs[0]))

enum variant { VAR_KERNEL_PINNED_LIST, VAR_KERNEL_DEV_LIST, VAR_ASYNC };
static const char *const variant_name[] = { "kernel (list pinned)", "kernel (list on device)",
					    "memcpy" };

struct ent {
	uint64_t src_off, dst_off, len;
};

/* One shape's list as offsets, its source image and the expected
 * destination buffer. */
struct layout {
	const struct shape *sh;
	struct ent *e;
	uint64_t src_bytes, dst_bytes, payload;
	unsigned char *src_img, *ref;
};

static tp_dev_stream *stream;


static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (!p) {
		FAIL("out of host memory (%zu bytes)", n);
		exit(1);
	}
	return p;
}

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* The space after a range: none where ranges lie back to back, else at
 * least one guard byte (16-byte steps for the aligned shapes). */
static uint32_t gap(unsigned flags, unsigned contiguous)
{
	if (flags & contiguous)
		return 0;
	return flags & F_ALIGN16 ? 16 * (1 + below(4)) : 1 + below(16);
}

static void gen_layout(struct layout *l, const struct shape *sh)
{
	uint32_t n = sh->n, *perm = xmalloc(n * sizeof(*perm));
	uint64_t cur;

	l->sh = sh;
	l->e = xmalloc(n * sizeof(*l->e));
	l->payload = 0;
	for (uint32_t i = 0; i < n; i++) {
		uint64_t len = sh->len_min + below(sh->len_max - sh->len_min + 1);

		if (sh->flags & F_ALIGN16)
			len = len < 16 ? 16 : len & ~(uint64_t)15;
		l->e[i].len = len;
		l->payload += len;
	}
	/* dst in list order, src in a random order (a scatter's in list
	 * order), each starting at a random offset within 16 bytes. */
	cur = GUARD + (sh->flags & F_ALIGN16 ? 0 : below(16));
	for (uint32_t i = 0; i < n; i++) {
		l->e[i].dst_off = cur;
		cur += l->e[i].len + gap(sh->flags, F_GATHER);
	}
	l->dst_bytes = cur + GUARD;
	for (uint32_t i = 0; i < n; i++)
		perm[i] = i;
	if (!(sh->flags & F_SCATTER)) {
		for (uint32_t i = n - 1; i > 0; i--) {
			uint32_t k = below(i + 1), t = perm[i];

			perm[i] = perm[k];
			perm[k] = t;
		}
	}
	cur = GUARD + (sh->flags & F_ALIGN16 ? 0 : below(16));
	for (uint32_t i = 0; i < n; i++) {
		l->e[perm[i]].src_off = cur;
		cur += l->e[perm[i]].len + gap(sh->flags, F_SCATTER);
	}
	l->src_bytes = cur + GUARD;
	/* List order is no order of the ranges, except for the split range
	 * the memcpy variant must merge. */
	if ((sh->flags & F_SPLIT) != F_SPLIT) {
		for (uint32_t i = n - 1; i > 0; i--) {
			uint32_t k = below(i + 1);
			struct ent t = l->e[i];

			l->e[i] = l->e[k];
			l->e[k] = t;
		}
	}

	l->src_img = xmalloc(l->src_bytes);
	l->ref = xmalloc(l->dst_bytes);
	for (uint64_t i = 0; i < l->src_bytes; i++)
		l->src_img[i] = (unsigned char)next();
	memset(l->ref, POISON, l->dst_bytes);
	for (uint32_t i = 0; i < n; i++)
		memcpy(l->ref + l->e[i].dst_off, l->src_img + l->e[i].src_off, l->e[i].len);
	free(perm);
}

static void free_layout(struct layout *l)
{
	free(l->ref);
	free(l->src_img);
	free(l->e);
}

static void *mem_alloc(enum mem m, size_t n)
{
	void *p = NULL;

	if (m == MEM_DEV)
		CK(tp__dev_malloc(&p, n));
	else if (m == MEM_PINNED)
		CK(tp__dev_host_alloc(&p, n));
	else
		p = xmalloc(n);
	return p;
}

static void mem_free(enum mem m, void *p)
{
	if (m == MEM_DEV)
		tp__dev_free(p);
	else if (m == MEM_PINNED)
		tp__dev_host_free(p);
	else
		free(p);
}

/* Name the first wrong byte: which entry's range it lies in, or that it
 * is a guard byte. */
static void report(const struct layout *l, const unsigned char *out, const char *what)
{
	uint64_t i = 0, bad = 0;

	for (uint64_t k = 0; k < l->dst_bytes; k++)
		bad += out[k] != l->ref[k];
	while (out[i] == l->ref[i])
		i++;
	for (uint32_t k = 0; k < l->sh->n; k++) {
		const struct ent *e = &l->e[k];

		if (i >= e->dst_off && i < e->dst_off + e->len) {
			FAIL("%s: %llu wrong bytes; first: entry %u of %u (src +%llu, dst +%llu, "
			     "len %llu) byte %llu is 0x%02x, want 0x%02x", what,
			     (unsigned long long)bad, k, l->sh->n, (unsigned long long)e->src_off,
			     (unsigned long long)e->dst_off, (unsigned long long)e->len,
			     (unsigned long long)(i - e->dst_off), out[i], l->ref[i]);
			return;
		}
	}
	FAIL("%s: %llu wrong bytes; first: guard byte at dst +%llu is 0x%02x (poison 0x%02x)",
	     what, (unsigned long long)bad, (unsigned long long)i, out[i], POISON);
}

static void run(const struct layout *l, const struct dir *d, enum variant var)
{
	uint32_t n = l->sh->n;
	char *src = mem_alloc(d->src, l->src_bytes), *dst = mem_alloc(d->dst, l->dst_bytes);
	struct tp_copy *list = xmalloc(n * sizeof(*list)), *dlist = NULL;
	unsigned char *out = xmalloc(l->dst_bytes);
	char what[160];

	CKC(cudaMemcpy(src, l->src_img, l->src_bytes, cudaMemcpyDefault));
	if (d->dst == MEM_DEV)
		CKC(cudaMemset(dst, POISON, l->dst_bytes));
	else
		memset(dst, POISON, l->dst_bytes);
	/* cudaMemset runs on the legacy stream, which a non-blocking stream
	 * does not wait for: without this the copies may land first and the
	 * poison after them (seen once in five runs on an H100). */
	CKC(cudaDeviceSynchronize());
	for (uint32_t i = 0; i < n; i++)
		list[i] = (struct tp_copy){ .src = src + l->e[i].src_off,
					    .dst = dst + l->e[i].dst_off,
					    .len = l->e[i].len };

	switch (var) {
	case VAR_KERNEL_PINNED_LIST:
		CK(tp__dev_host_alloc((void **)&dlist, n * sizeof(*list)));
		memcpy(dlist, list, n * sizeof(*list));
		CK(tp__dev_copy_kernel(stream, dlist, n));
		break;
	case VAR_KERNEL_DEV_LIST:
		CK(tp__dev_malloc((void **)&dlist, n * sizeof(*list)));
		CKC(cudaMemcpy(dlist, list, n * sizeof(*list), cudaMemcpyHostToDevice));
		CKC(cudaDeviceSynchronize()); /* a pageable source: landed only now */
		CK(tp__dev_copy_kernel(stream, dlist, n));
		break;
	case VAR_ASYNC:
		CK(tp__dev_copy_async(stream, list, n));
		break;
	}
	CK(tp__dev_stream_sync(stream));
	CKC(cudaMemcpy(out, dst, l->dst_bytes, cudaMemcpyDefault));
	if (memcmp(out, l->ref, l->dst_bytes)) {
		snprintf(what, sizeof(what), "%s, %s %s -> %s", l->sh->name, variant_name[var],
			 mem_name[d->src], mem_name[d->dst]);
		report(l, out, what);
	}

	if (var == VAR_KERNEL_PINNED_LIST)
		tp__dev_host_free(dlist);
	else if (var == VAR_KERNEL_DEV_LIST)
		tp__dev_free(dlist);
	free(out);
	free(list);
	mem_free(d->dst, dst);
	mem_free(d->src, src);
}

/* n = 0 launches and copies nothing, whatever the list says. */
static void check_empty(void)
{
	struct tp_copy *list;
	char *src, *dst;
	unsigned char out[64];

	CK(tp__dev_malloc((void **)&src, sizeof(out)));
	CK(tp__dev_malloc((void **)&dst, sizeof(out)));
	CKC(cudaMemset(src, 0x11, sizeof(out)));
	CKC(cudaMemset(dst, POISON, sizeof(out)));
	CKC(cudaDeviceSynchronize()); /* legacy-stream memsets: done only now */
	CK(tp__dev_host_alloc((void **)&list, sizeof(*list)));
	*list = (struct tp_copy){ .src = src, .dst = dst, .len = sizeof(out) };
	CK(tp__dev_copy_kernel(stream, NULL, 0));
	CK(tp__dev_copy_async(stream, NULL, 0));
	CK(tp__dev_copy_kernel(stream, list, 0));
	CK(tp__dev_copy_async(stream, list, 0));
	CK(tp__dev_stream_sync(stream));
	CKC(cudaMemcpy(out, dst, sizeof(out), cudaMemcpyDeviceToHost));
	for (size_t i = 0; i < sizeof(out); i++) {
		if (out[i] != POISON) {
			FAIL("n = 0 copied byte %zu", i);
			break;
		}
	}
	tp__dev_host_free(list);
	tp__dev_free(dst);
	tp__dev_free(src);
}

/* The allocators: 0 bytes refused, NULL frees nothing, pinned memory at
 * the same address on the device. */
static void check_alloc(void)
{
	struct cudaPointerAttributes a;
	void *p = (void *)1;

	if (tp__dev_host_alloc(&p, 0) != TCPX_P2P_EINVAL || p != (void *)1)
		FAIL("a 0-byte pinned allocation was not refused");
	if (tp__dev_malloc(&p, 0) != TCPX_P2P_EINVAL || p != (void *)1)
		FAIL("a 0-byte device allocation was not refused");
	tp__dev_host_free(NULL);
	tp__dev_free(NULL);
	CK(tp__dev_host_alloc(&p, 4096));
	CKC(cudaPointerGetAttributes(&a, p));
	if (a.type != cudaMemoryTypeHost || a.devicePointer != p)
		FAIL("pinned memory %p: type %d, device address %p", p, (int)a.type, a.devicePointer);
	tp__dev_host_free(p);
	CK(tp__dev_malloc(&p, 4096));
	CKC(cudaPointerGetAttributes(&a, p));
	if (a.type != cudaMemoryTypeDevice)
		FAIL("device memory %p: type %d", p, (int)a.type);
	tp__dev_free(p);
}

/* Mean microseconds per call of fn over iters back-to-back calls on the
 * stream, after a warm-up. */
static double time_launches(int (*fn)(tp_dev_stream *, const struct tp_copy *, uint32_t),
			    const struct tp_copy *list, uint32_t n, int iters)
{
	double t0;

	for (int i = 0; i < 10; i++)
		CK(fn(stream, list, n));
	CK(tp__dev_stream_sync(stream));
	t0 = now_us();
	for (int i = 0; i < iters; i++)
		CK(fn(stream, list, n));
	CK(tp__dev_stream_sync(stream));
	return (now_us() - t0) / iters;
}

/* Launch, record an event, poll it: what a caller waiting on one gather
 * sees.  Mean and minimum over iters. */
static void time_latency(const struct tp_copy *list, uint32_t n, int iters, double *mean,
			 double *min)
{
	tp_dev_event *ev;
	double sum = 0;

	CK(tp__dev_event_create(&ev));
	*min = 1e30;
	for (int i = 0; i < iters; i++) {
		double t0 = now_us(), t;
		int done = 0;

		CK(tp__dev_copy_kernel(stream, list, n));
		CK(tp__dev_event_record(ev, stream));
		while (!done)
			CK(tp__dev_event_query(ev, &done));
		t = now_us() - t0;
		sum += t;
		*min = t < *min ? t : *min;
	}
	*mean = sum / iters;
	tp__dev_event_destroy(ev);
}

/* One line of the benchmark: back-to-back throughput and the latency of
 * one launch, for a list of n entries moving bytes. */
static void bench_line(const char *what, const struct tp_copy *list, uint32_t n, size_t bytes)
{
	double us = time_launches(tp__dev_copy_kernel, list, n, 100), lat, lat_min;

	time_latency(list, n, 100, &lat, &lat_min);
	printf("  %-32s %6.1f GB/s back to back (%5.1f us per launch); launch -> event %5.1f us "
	       "mean, %5.1f min\n", what, bytes / us / 1e3, us, lat, lat_min);
}

/* 2 MiB gathered from every other 64 KiB of a 4 MiB device buffer, the
 * staging before a send: 32 x 64 KiB as the contract's callers would
 * split it, then what else decides its cost: the sources one byte off (no
 * common alignment: the funnel-shift path), the list on the device (no
 * PCIe read), smaller entries (more SMs at work), one 1-byte entry (the
 * fixed cost), the memcpy variant, and 100000 tiny entries. */
static void bench(void)
{
	const uint32_t n = 32, len = TP_COPY_MAX_ENTRY, ntiny = 100000;
	const size_t bytes = (size_t)n * len;
	struct tp_copy *list, *split, *dlist, *tiny;
	unsigned char *img = xmalloc(2 * bytes), *out = xmalloc(bytes);
	char *src, *dst, label[64];
	double us;

	CK(tp__dev_malloc((void **)&src, 2 * bytes + 16));
	CK(tp__dev_malloc((void **)&dst, bytes));
	CK(tp__dev_malloc((void **)&dlist, n * sizeof(*list)));
	CK(tp__dev_host_alloc((void **)&list, n * sizeof(*list)));
	CK(tp__dev_host_alloc((void **)&split, 512 * sizeof(*split)));
	CK(tp__dev_host_alloc((void **)&tiny, ntiny * sizeof(*tiny)));
	for (size_t i = 0; i < 2 * bytes; i++)
		img[i] = (unsigned char)next();
	CKC(cudaMemcpy(src, img, 2 * bytes, cudaMemcpyHostToDevice));
	for (uint32_t i = 0; i < n; i++)
		list[i] = (struct tp_copy){ .src = src + 2 * (size_t)i * len,
					    .dst = dst + (size_t)i * len, .len = len };
	CKC(cudaMemcpy(dlist, list, n * sizeof(*list), cudaMemcpyHostToDevice));
	CKC(cudaDeviceSynchronize()); /* pageable sources: landed only now */

	printf("bench: 2 MiB device -> device gather, list in pinned memory unless said; "
	       "GB/s = 10^9 B/s; 100 launches each\n");
	bench_line("32 x 64 KiB", list, n, bytes);
	CKC(cudaMemcpy(out, dst, bytes, cudaMemcpyDeviceToHost));
	for (uint32_t i = 0; i < n; i++)
		if (memcmp(out + (size_t)i * len, img + 2 * (size_t)i * len, len))
			FAIL("bench gather: entry %u wrong", i);
	for (uint32_t i = 0; i < n; i++)
		list[i].src += 1;
	bench_line("32 x 64 KiB, src +1 byte", list, n, bytes);
	for (uint32_t i = 0; i < n; i++)
		list[i].src -= 1;
	bench_line("32 x 64 KiB, list on device", dlist, n, bytes);
	for (uint32_t k = 4; k <= 16; k *= 4) {
		uint32_t m = n * k, l = len / k;

		for (uint32_t i = 0; i < m; i++)
			split[i] = (struct tp_copy){
				.src = src + 2 * (size_t)(i / k) * len + (size_t)(i % k) * l,
				.dst = dst + (size_t)i * l, .len = l };
		snprintf(label, sizeof(label), "%u x %u KiB", m, l >> 10);
		bench_line(label, split, m, bytes);
	}
	split[0] = (struct tp_copy){ .src = src, .dst = dst, .len = 1 };
	bench_line("1 x 1 B", split, 1, 1);
	us = time_launches(tp__dev_copy_async, list, n, 100);
	printf("  %-32s %6.1f GB/s back to back (%5.1f us per list)\n", "32 x 64 KiB, memcpy variant",
	       bytes / us / 1e3, us);
	for (uint32_t i = 0, off = 0; i < ntiny; i++) {
		tiny[i] = (struct tp_copy){ .src = src + off + 8, .dst = dst + off,
					    .len = 1 + below(7) };
		off += 16;
	}
	us = time_launches(tp__dev_copy_kernel, tiny, ntiny, 20);
	snprintf(label, sizeof(label), "%u x 1-7 B", ntiny);
	printf("  %-32s %5.1f us per launch\n", label, us);

	tp__dev_host_free(tiny);
	tp__dev_host_free(split);
	tp__dev_host_free(list);
	tp__dev_free(dlist);
	tp__dev_free(dst);
	tp__dev_free(src);
	free(out);
	free(img);
}

int main(int argc, char **argv)
{
	uint64_t seed;
	int ngpu;

	CK(tp__dev_count(&ngpu));
	if (ngpu == 0) {
		printf("no CUDA device: skipping\n");
		return 77;
	}
	seed = argc > 1 ? strtoull(argv[1], NULL, 0)
			: (uint64_t)time(NULL) * 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid();
	rng = seed ? seed : 1;
	printf("seed 0x%llx (rerun with: %s 0x%llx)\n", (unsigned long long)seed, argv[0],
	       (unsigned long long)seed);
	CK(tp__dev_set(0));
	CK(tp__dev_stream_create(&stream));

	check_alloc();
	check_empty();
	for (size_t s = 0; s < NSHAPES; s++) {
		struct layout l;
		int before = failures;

		gen_layout(&l, &shapes[s]);
		for (size_t d = 0; d < NDIRS; d++) {
			int kernel = dirs[d].src != MEM_PAGEABLE && dirs[d].dst != MEM_PAGEABLE;

			for (int var = kernel ? VAR_KERNEL_PINNED_LIST : VAR_ASYNC; var <= VAR_ASYNC;
			     var++)
				run(&l, &dirs[d], var);
		}
		printf("%-14s %6u entries, %9llu bytes: %s\n", shapes[s].name, shapes[s].n,
		       (unsigned long long)l.payload,
		       failures == before ? "ok" : "FAILED");
		free_layout(&l);
	}
	if (!failures)
		bench();

	tp__dev_stream_destroy(stream);
	printf("%s\n", failures ? "FAILED" : "all copy-list checks passed");
	return failures ? 1 : 0;
}
