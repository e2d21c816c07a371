/* The copy-engine unpack variants: the host reads the records (pinned host
 * memory, readable at the same address under UVA) and issues their copies
 * as one batch (copy_async.c).
 * cudaMemcpyDefault lets bounce and dst each be device or host memory, so
 * these also serve host destinations and host bounce buffers. */
#include "dev_priv.h"
#include "util/error.h"

/* The plugin's records must stay inside the chunk (TCPX overwrites the
 * posted size with the sender's: a peer sending more must not spill).  The
 * caller's view was checked against the bounce buffer when it was read. */
static int check_records(const struct tp_unpack_job *job, uint32_t *cnt)
{
	struct tp_meta_view v = { 0 };
	int err = tp__meta_check(job->recs, job->cnt, job->len, TP_META_BOUNCE_MAX, "unpack", &v);

	*cnt = v.cnt;
	return err;
}

int tp__dev_unpack_d2d(tp_dev_stream *s, const struct tp_unpack_job *job)
{
	uint32_t cnt = 0;
	int err = check_records(job, &cnt);

	for (uint32_t i = 0; i < cnt && !err; i++) {
		tp_unpack_rec r = job->recs[i];

		err = tp__dev_batch_add(s, job->dst + r.dst_off, job->bounce + r.src_off, r.len);
	}
	if (err)
		return err;
	return tp__dev_batch_issue(s, job->bounce_dev && job->dst_pinned);
}

/* Grow the stream's pinned staging buffer.  Queued copies may still use
 * the old one, so growing waits for the stream: acceptable on this
 * reference path, and it happens only when a larger chunk first shows up. */
static int stage_reserve(struct tp_dev_stream *s, size_t n)
{
	void *p;
	int err;

	if (n <= s->stage_cap)
		return 0;
	err = TP_CUDA(cudaStreamSynchronize, s->st);
	if (err)
		return err;
	err = TP_CUDA(cudaMallocHost, &p, n);
	if (err)
		return err;
	if (s->stage && (err = TP_CUDA(cudaFreeHost, s->stage))) {
		(void)cudaFreeHost(p);
		return err;
	}
	s->stage = p;
	s->stage_cap = n;
	return 0;
}

/* Fragments go into a host image of dst[lo, hi), which then goes to dst
 * in one copy.  All copies are queued on the stream in order (the staging
 * memory is pinned), so nothing waits except stage_reserve. */
int tp__dev_unpack_host(tp_dev_stream *s, const struct tp_unpack_job *job)
{
	uint32_t cnt = 0;
	uint64_t lo = UINT64_MAX, hi = 0, covered = 0;
	int err = check_records(job, &cnt);

	if (err)
		return err;
	for (uint32_t i = 0; i < cnt; i++) {
		tp_unpack_rec r = job->recs[i];

		if (!r.len)
			continue;
		lo = r.dst_off < lo ? r.dst_off : lo;
		hi = r.dst_off + r.len > hi ? r.dst_off + r.len : hi;
		covered += r.len;
	}
	if (!covered)
		return 0;
	err = stage_reserve(s, hi - lo);
	if (err)
		return err;
	/* Destinations are disjoint, so full coverage means no gaps; else the
	 * gaps must keep what dst holds, so the image starts as a copy of it. */
	if (covered != hi - lo) {
		tp__dev_delay_op(s->st);
		err = TP_CUDA(cudaMemcpyAsync, s->stage, job->dst + lo, hi - lo, cudaMemcpyDefault,
			      s->st);
		if (err)
			return err;
	}
	for (uint32_t i = 0; i < cnt && !err; i++) {
		tp_unpack_rec r = job->recs[i];

		err = tp__dev_batch_add(s, s->stage + (r.dst_off - lo), job->bounce + r.src_off,
					r.len);
	}
	if (!err)
		err = tp__dev_batch_issue(s, job->bounce_dev); /* the staging is pinned */
	if (err)
		return err;
	tp__dev_delay_op(s->st);
	return TP_CUDA(cudaMemcpyAsync, job->dst + lo, s->stage, hi - lo, cudaMemcpyDefault, s->st);
}
