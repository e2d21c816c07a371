/* test_kv's segment layouts: totals cut into segments of a shape, placed
 * in a region with gaps, and the bytes a packed stream must leave. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/pipeline/chunk.h"
#include "kv.h"

void segl_add(struct segl *l, size_t len)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 64;
		l->len = realloc(l->len, l->cap * sizeof(*l->len));
		l->off = realloc(l->off, l->cap * sizeof(*l->off));
		assert_true(l->len && l->off);
	}
	l->len[l->n++] = len;
}

void segl_free(struct segl *l)
{
	free(l->len);
	free(l->off);
	memset(l, 0, sizeof(*l));
}

/* The chunk size a transfer of len bytes gets (the library's own rule). */
size_t xfer_chunk(const struct fx *f, size_t len)
{
	return tp_chunk_size(len, (unsigned)f->nchan, f->chunk_bytes, (unsigned)f->depth);
}

/* Cut total bytes into segments of a style (0-byte segments included). */
void cut(struct fx *f, struct segl *l, size_t total, enum shape sh)
{
	struct rng *r = &f->rng;
	size_t left = total, chunk = xfer_chunk(f, total), want, k;

	l->n = 0;
	if (sh == SH_LARGE) { /* 1..4 pieces */
		size_t pieces = between(r, 1, 4);

		for (k = 0; k + 1 < pieces && left; k++) {
			want = below(r, left + 1);
			segl_add(l, want);
			left -= want;
		}
		segl_add(l, left);
		return;
	}
	for (k = 0; left; k++) {
		size_t pick = below(r, 100);

		switch (sh) {
		case SH_TINY:
			want = pick < 10 ? 0 : between(r, 1, 8);
			break;
		case SH_CHUNKY: /* lengths around the chunk size: pieces straddle chunks */
			want = pick < 15 ? 1 : pick < 20 ? 0 : chunk - 2 + below(r, 5);
			break;
		default:
			want = pick < 8 ? 0 : pick < 16 ? 1 : pick < 45 ? between(r, 2, 100)
			     : pick < 80 ? between(r, 101, 64u << 10) : between(r, 64u << 10, 2 * chunk);
		}
		segl_add(l, want < left ? want : left);
		left -= want < left ? want : left;
		if (k % 7 == 3 && sh != SH_CHUNKY)
			segl_add(l, 0);
	}
	if (below(r, 2))
		segl_add(l, 0); /* a trailing empty one */
}

/* Place the segments in memory in a random order with gaps of
 * mingap..maxgap bytes (guards between receive segments). */
void place(struct fx *f, struct segl *l, size_t mingap, size_t maxgap)
{
	size_t *order = malloc((l->n ? l->n : 1) * sizeof(*order)), i, at;

	assert_non_null(order);
	for (i = 0; i < l->n; i++)
		order[i] = i;
	shuffle(&f->rng, order, l->n);
	at = between(&f->rng, mingap, maxgap);
	for (i = 0; i < l->n; i++) {
		l->off[order[i]] = at;
		at += l->len[order[i]] + between(&f->rng, mingap, maxgap);
	}
	l->span = at;
	free(order);
}

tcpx_p2p_seg *segs_of(const struct segl *l, const struct region *r)
{
	tcpx_p2p_seg *g = malloc((l->n ? l->n : 1) * sizeof(*g));

	assert_non_null(g);
	for (size_t i = 0; i < l->n; i++)
		g[i] = (tcpx_p2p_seg){ r->mr, l->off[i], l->len[i] };
	return g;
}

/* The sender's packed stream lands in the receiver's segments. */
void expect_stream(struct region *dst, const struct segl *dl, const struct region *src,
		   const struct segl *sl)
{
	size_t si = 0, so = 0, di = 0, doff = 0;

	for (;;) {
		size_t n;

		while (si < sl->n && so == sl->len[si]) {
			si++;
			so = 0;
		}
		while (di < dl->n && doff == dl->len[di]) {
			di++;
			doff = 0;
		}
		if (si == sl->n || di == dl->n)
			break;
		n = sl->len[si] - so < dl->len[di] - doff ? sl->len[si] - so : dl->len[di] - doff;
		expect_copy(dst, dl->off[di] + doff, src, sl->off[si] + so, n);
		so += n;
		doff += n;
	}
}
