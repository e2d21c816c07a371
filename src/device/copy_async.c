/* Copies through the copy engines, for what no kernel can reach (pageable
 * host memory) and for the d2d and host unpack variants.  A call's copies
 * are collected on the stream, adjacent ones (in both source and
 * destination) merged, since a driver call costs microseconds whatever its
 * size, and issued together: as one cudaMemcpyBatchAsync (CUDA 12.8+) when
 * every operand is device or pinned memory, else one cudaMemcpyAsync each.
 * Pageable memory stays out of batches: a batch that mixed it in crashed
 * inside the driver (580.x, H100: test_copy_kernel, one run in eight). */
#include <stdlib.h>

#include "dev_priv.h"
#include "util/error.h"

/* Copies per cudaMemcpyBatchAsync call: a whole chunk's records (at most
 * 2048) in one, and bounded work per call for long copy lists. */
#define TP_BATCH_MAX 2048

#if CUDART_VERSION >= 12080
#define TP_HAVE_BATCH 1
#else
#define TP_HAVE_BATCH 0
#endif

int tp__dev_batch_add(tp_dev_stream *s, void *dst, const void *src, size_t len)
{
	struct tp_dev_batch *b = &s->batch;
	size_t cap;

	if (!len)
		return 0;
	if (b->n && (const char *)src == (const char *)b->src[b->n - 1] + b->len[b->n - 1] &&
	    (char *)dst == (char *)b->dst[b->n - 1] + b->len[b->n - 1]) {
		b->len[b->n - 1] += len;
		return 0;
	}
	if (b->n == b->cap) {
		cap = b->cap ? 2 * b->cap : 256;
		void **d = realloc(b->dst, cap * sizeof(*d));
		if (d)
			b->dst = d;
		const void **sr = realloc(b->src, cap * sizeof(*sr));
		if (sr)
			b->src = sr;
		size_t *l = realloc(b->len, cap * sizeof(*l));
		if (l)
			b->len = l;
		if (!d || !sr || !l) {
			b->n = 0;
			return tp__error(TCPX_P2P_ENOMEM, "cannot grow a copy batch to %zu", cap);
		}
		b->cap = cap;
	}
	b->dst[b->n] = dst;
	b->src[b->n] = src;
	b->len[b->n] = len;
	b->n++;
	return 0;
}

int tp__dev_batch_issue(tp_dev_stream *s, bool pinned)
{
	struct tp_dev_batch *b = &s->batch;
	size_t n = b->n, i = 0;
	int err = 0;

	b->n = 0;
	if (!n)
		return 0;
	tp__dev_delay_op(s->st);
#if TP_HAVE_BATCH
	struct cudaMemcpyAttributes attr = {
		.srcAccessOrder = cudaMemcpySrcAccessOrderStream,
		.flags = cudaMemcpyFlagPreferOverlapWithCompute,
	};
	size_t first = 0;

	while (pinned && s->batch_ok && n - i > 1) {
		size_t k = n - i < TP_BATCH_MAX ? n - i : TP_BATCH_MAX;
		cudaError_t e = cudaMemcpyBatchAsync(b->dst + i, b->src + i, b->len + i, k, &attr,
						     &first, 1, s->st);

		if (e == cudaSuccess) {
			i += k;
			continue;
		}
		/* A driver without batch copies: one call each from now on. */
		if (e != cudaErrorNotSupported && e != cudaErrorCallRequiresNewerDriver)
			return tp__dev_cuda_check(e, "cudaMemcpyBatchAsync");
		(void)cudaGetLastError();
		s->batch_ok = false;
		break;
	}
#endif
	for (; i < n && !err; i++)
		err = TP_CUDA(cudaMemcpyAsync, b->dst[i], b->src[i], b->len[i], cudaMemcpyDefault,
			      s->st);
	return err;
}

void tp__dev_batch_free(tp_dev_stream *s)
{
	free(s->batch.dst);
	free(s->batch.src);
	free(s->batch.len);
	s->batch = (struct tp_dev_batch){ 0 };
}

int tp__dev_copy_async(tp_dev_stream *s, const struct tp_copy *list, uint32_t n)
{
	int err = 0;

	for (uint32_t i = 0; i < n && !err; i++)
		err = tp__dev_batch_add(s, list[i].dst, list[i].src, list[i].len);
	return err ? err : tp__dev_batch_issue(s, false);
}
