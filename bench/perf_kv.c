/* tcpx_perf kv: a KV-cache mover, measured as nixlbench measures one.
 *
 * Each peer registers one pool: layers x {K, V} block arrays of
 * pool_blocks / (2 layers) blocks each.  The server (target, the decode
 * side) exports its pool on the conn and sends the descriptor in a set-up
 * message; the client (initiator, the prefill side) imports it.  A batch
 * takes blocks / (2 layers) random distinct block ids on each side (the
 * same ids in every layer's K and V array, as a paged KV cache lays out a
 * sequence) and moves those blocks with ONE tcpx_p2p_write (notification
 * "kv S I" to the target) or tcpx_p2p_read of `blocks` segments a side.
 * The ids come from (seed, block size, iteration), so both peers know them
 * without sending them.  The initiator times each batch from the post to
 * its completion; then the same bytes move as one contiguous two-sided
 * transfer for the ratio.
 *
 * Batches are paced by 8-byte two-sided tokens outside the timed region:
 * the target sends "go" when it is ready, the initiator answers "done"
 * after the batch completed.
 *
 * --prep measures what a post costs the caller: one batch of fixed block
 * ids per block size, moved iteration after iteration in three forms:
 * the lists posted with tcpx_p2p_write/read each time ("lists"), prepared
 * once with tcpx_p2p_xlist_prepare and posted ("prepared"), and blocks
 * every (pool-blocks / blocks)-th of the pool described by one strided
 * run a side (tcpx_p2p_xlist_prepare_strided, "strided"), timing the
 * post call itself beside the batch.  --verify fills the blocks a batch moves
 * with a pattern of (seed, batch) and the blocks it lands in with a
 * sentinel first, then checks them where and when they are promised: a
 * WRITE on the target as soon as its notification is taken (before the
 * initiator's "done"), a READ on the initiator once it completed.
 * The target waits for the notification with tcpx_p2p_notif_poll and for
 * "done" with tcpx_p2p_wait, both of which drive its session: that is the
 * progress that lands a WRITE and serves a READ. */
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_mem.h"
#include "bench_numa.h"
#include "perf.h"

#define KV_MAGIC 0x31766b7870637400ull /* "tcpxkv1" */
#define KV_TOKEN 8
/* The host control region: outgoing messages in the first half, incoming
 * in the second; tokens of two kinds at slot 0 and slot 64 of each. */
#define KV_CTRL_HALF 512
#define KV_SLOT2 64

/* Set-up message, both ways: the run's shape, which must be the same on
 * both peers, and (from the target) its pool's export. */
struct kv_setup {
	uint64_t magic, layers, blocks, pool_blocks, nblock, block[PERF_KV_MAX_SIZES];
	uint64_t iters, warmup, seed, read, verify, chunk, prep;
	unsigned char desc[TCPX_P2P_RDESC_SIZE];
};
_Static_assert(sizeof(struct kv_setup) <= KV_CTRL_HALF, "kv_setup outgrew the control region");

/* How a batch's segments are given (--prep measures the last three). */
enum kv_form { KV_RANDOM, KV_LISTS, KV_PREPARED, KV_STRIDED };
static const char *const form_name[] = { "random", "lists", "prepared", "strided" };

/* xfer slots: at most one of each kind is pending at a time. */
enum { X_GO, X_DONE, X_OP, X_ACK, KV_NX };

struct kv_peer {
	const struct perf_opts *o;
	int role;                /* 0 target, 1 initiator */
	tcpx_p2p_session *s;
	tcpx_p2p_session_info info;
	tcpx_p2p_conn *c;
	struct bench_buf pool, ctrl;
	tcpx_p2p_mr *pool_mr, *ctrl_mr;
	tcpx_p2p_rmr *rmr;       /* initiator: the target's pool */
	tcpx_p2p_xfer *x[KV_NX]; /* left set by a failure */
	int nblk;                /* blocks per K or V array */
	int ids;                 /* block ids per batch */
	uint32_t *perm, *src, *dst;
	tcpx_p2p_seg *local;
	tcpx_p2p_rseg *remote;
	double *us, *cus;        /* per timed iteration: batch, contiguous */
	double *post_us;         /* per timed iteration: the caller's time in the post */
	enum kv_form form;
	tcpx_p2p_xlist *xl;      /* initiator, prepared and strided forms */
	double setup_ms;
	int numa_node;
	const char *numa_why;
	tcpx_p2p_notif notif;
};

static int fail(const char *what, int rc)
{
	perf_error("tcpx_perf: kv: %s: %s (%s)\n", what, tcpx_p2p_strerror(rc),
		   tcpx_p2p_last_error());
	return rc;
}

static uint64_t splitmix(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* One number per (block size row, iteration), warm-up included: it seeds
 * the batch's ids, names its tokens and notification, and keys the
 * pattern, so stale data of another batch never matches. */
static uint64_t batch_key(const struct kv_peer *p, int row, int it)
{
	uint64_t x = p->o->kv.seed ^ ((uint64_t)row << 48);

	x ^= splitmix(&x) + (uint64_t)(it + p->o->sweep.warmup);
	return splitmix(&x);
}

/* n distinct ids of [0, p->nblk), a partial Fisher-Yates shuffle. */
static void pick_ids(struct kv_peer *p, uint64_t *rng, uint32_t *out, int n)
{
	uint32_t j, t;
	int i;

	for (i = 0; i < p->nblk; i++)
		p->perm[i] = (uint32_t)i;
	for (i = 0; i < n; i++) {
		j = (uint32_t)i + (uint32_t)(splitmix(rng) % (uint64_t)(p->nblk - i));
		t = p->perm[i];
		p->perm[i] = p->perm[j];
		p->perm[j] = t;
		out[i] = p->perm[i];
	}
}

/* Byte offset of block `id` of array a (= 2 x layer + 0 for K, 1 for V). */
static size_t block_off(const struct kv_peer *p, int a, uint32_t id, size_t bs)
{
	return ((size_t)a * (size_t)p->nblk + id) * bs;
}

/* The batch's segments, layer by layer: segment a x ids + j is block
 * src[j] of array a on the initiator, dst[j] of array a on the target. */
static void build_batch(struct kv_peer *p, uint64_t key, size_t bs)
{
	uint64_t rng = key;
	int a, j, k;

	pick_ids(p, &rng, p->src, p->ids);
	pick_ids(p, &rng, p->dst, p->ids);
	for (a = 0, k = 0; a < 2 * p->o->kv.layers; a++)
		for (j = 0; j < p->ids; j++, k++) {
			p->local[k] = (tcpx_p2p_seg){ p->pool_mr, block_off(p, a, p->src[j], bs), bs };
			p->remote[k] = (tcpx_p2p_rseg){ p->rmr, block_off(p, a, p->dst[j], bs), bs };
		}
}

/* Pattern of the block whose target copy is array a, block dst[j]. */
static uint64_t block_seed(const struct kv_peer *p, uint64_t key, int a, int j)
{
	return key ^ (((uint64_t)a << 32) | p->dst[j]);
}

enum blocks_op { BLOCKS_FILL, BLOCKS_POISON, BLOCKS_CHECK };

/* Fill, poison (a sentinel: what lands must overwrite it) or check this
 * side's blocks of the batch: the initiator's src ids, the target's dst
 * ids.  0, or -1 after saying which block is bad. */
static int batch_blocks(struct kv_peer *p, uint64_t key, size_t bs, int it, enum blocks_op op)
{
	uint32_t *id = p->role ? p->src : p->dst;
	size_t off, bad;
	int a, j, rc;

	for (a = 0; a < 2 * p->o->kv.layers; a++)
		for (j = 0; j < p->ids; j++) {
			off = block_off(p, a, id[j], bs);
			if (op != BLOCKS_CHECK) {
				rc = op == BLOCKS_FILL ?
					     bench_buf_fill(&p->pool, off, bs, block_seed(p, key, a, j)) :
					     bench_buf_poison(&p->pool, off, bs);
				if (rc)
					return fail("fill", TCPX_P2P_ECUDA);
				continue;
			}
			bad = bench_buf_check(&p->pool, off, bs, block_seed(p, key, a, j));
			if (bad == (size_t)-1)
				continue;
			if (bad == (size_t)-2)
				return fail("copying the pool back for verification", TCPX_P2P_ECUDA);
			perf_error("tcpx_perf: kv: verification FAILED: block size %zu, "
				"iteration %d, layer %d %c block %u (segment %d of the batch): first "
				"bad byte at offset %zu\n", bs, it, a / 2, a % 2 ? 'V' : 'K', id[j],
				a * p->ids + j, bad);
			return -1;
		}
	return 0;
}

/* ---- tokens and xfer slots ------------------------------------------------ */

static int token_send(struct kv_peer *p, int slot, uint64_t v)
{
	size_t off = slot == X_ACK ? KV_SLOT2 : 0;
	int rc;

	memcpy((char *)p->ctrl.ptr + off, &v, KV_TOKEN);
	rc = tcpx_p2p_send(p->c, p->ctrl_mr, off, KV_TOKEN, &p->x[slot]);
	return rc ? fail("token send", rc) : 0;
}

static int token_recv(struct kv_peer *p, int slot)
{
	size_t off = KV_CTRL_HALF + (slot == X_ACK ? KV_SLOT2 : 0);
	int rc = tcpx_p2p_recv(p->c, p->ctrl_mr, off, KV_TOKEN, &p->x[slot]);

	return rc ? fail("token recv", rc) : 0;
}

/* Wait for slot's xfer and release it; a received token must carry v. */
static int finish(struct kv_peer *p, int slot, const char *what, int is_recv, uint64_t v)
{
	size_t off = KV_CTRL_HALF + (slot == X_ACK ? KV_SLOT2 : 0);
	uint64_t got;
	int rc = tcpx_p2p_wait(p->x[slot], p->o->timeout_ms);

	if (rc)
		return fail(what, rc);
	tcpx_p2p_xfer_release(p->x[slot]);
	p->x[slot] = NULL;
	if (!is_recv)
		return 0;
	memcpy(&got, (char *)p->ctrl.ptr + off, KV_TOKEN);
	if (got == v)
		return 0;
	perf_error("tcpx_perf: kv: %s: the peer is out of step (token %#llx, expected "
		"%#llx): do both peers run the same kv options?\n", what, (unsigned long long)got,
		(unsigned long long)v);
	return -1;
}

/* After a failure, once the conn is destroyed (which fails what was pending). */
static void release_all(struct kv_peer *p)
{
	int k;

	for (k = 0; k < KV_NX; k++)
		if (p->x[k])
			tcpx_p2p_xfer_release(p->x[k]);
	memset(p->x, 0, sizeof(p->x));
}

/* Target: poll the session's notifications (each poll drives it) until
 * the batch's arrives; spin, then yield the CPU between empty polls.  A
 * poll says nothing of the conn, so the pending "done" receive is looked at
 * now and then: it fails with the conn, when the initiator went away. */
static int wait_notif(struct kv_peer *p, uint64_t key)
{
	double deadline = bench_now_s() + p->o->timeout_ms * 1e-3;
	char want[40];
	long empty = 0;
	int n, done, rc;

	snprintf(want, sizeof(want), "kv %016llx", (unsigned long long)key);
	for (;;) {
		rc = tcpx_p2p_notif_poll(p->s, &p->notif, 1, &n);
		if (rc < 0) /* > 0: longer ones wait for notif_take (none is sent here) */
			return fail("notif_poll", rc);
		if (n == 1 && p->notif.len == 0) { /* the library's own: the conn failed */
			rc = tcpx_p2p_progress(p->notif.conn);
			return fail("waiting for the batch's notification",
				    rc ? rc : TCPX_P2P_ECLOSED);
		}
		if (n == 1)
			break;
		if (++empty > 64)
			sched_yield();
		if ((empty & 1023) != 0)
			continue;
		rc = tcpx_p2p_test(p->x[X_DONE], &done);
		if (rc)
			return fail("waiting for the batch's notification", rc);
		if (bench_now_s() > deadline)
			return fail("waiting for the batch's notification", TCPX_P2P_ETIMEDOUT);
	}
	if (p->notif.conn == p->c && p->notif.len == strlen(want) + 1 &&
	    !memcmp(p->notif.msg, want, p->notif.len))
		return 0;
	perf_error("tcpx_perf: kv: notification of %zu bytes '%.*s', expected '%s'\n",
		p->notif.len, (int)(p->notif.len < 40 ? p->notif.len : 40),
		(const char *)p->notif.msg, want);
	return -1;
}

/* ---- one batch, one contiguous transfer ----------------------------------- */

static int target_batch(struct kv_peer *p, size_t bs, uint64_t key, int it)
{
	const struct perf_opts *o = p->o;

	if (p->form == KV_RANDOM)
		build_batch(p, key, bs);
	if (token_recv(p, X_DONE))
		return -1;
	if (o->verify && batch_blocks(p, key, bs, it, o->kv.read ? BLOCKS_FILL : BLOCKS_POISON))
		return -1;
	if (token_send(p, X_GO, key))
		return -1;
	/* A WRITE is checked when its notification is taken, as a decode
	 * engine reads its KV then: the notification promises the bytes. */
	if (!o->kv.read &&
	    (wait_notif(p, key) || (o->verify && batch_blocks(p, key, bs, it, BLOCKS_CHECK))))
		return -1;
	if (finish(p, X_GO, "go token", 0, 0) || finish(p, X_DONE, "done token", 1, key))
		return -1;
	return 0;
}

static int post_batch(struct kv_peer *p, const tcpx_p2p_xfer_params *prm)
{
	size_t nseg = (size_t)p->o->kv.blocks;

	if (p->form == KV_PREPARED || p->form == KV_STRIDED)
		return tcpx_p2p_xlist_post(p->xl, p->o->kv.read ? NULL : prm, &p->x[X_OP]);
	if (p->o->kv.read)
		return tcpx_p2p_read(p->c, p->local, nseg, p->remote, nseg, NULL, &p->x[X_OP]);
	return tcpx_p2p_write(p->c, p->local, nseg, p->remote, nseg, prm, &p->x[X_OP]);
}

static int initiator_batch(struct kv_peer *p, size_t bs, uint64_t key, int it, double *us,
			   double *post_us)
{
	const struct perf_opts *o = p->o;
	tcpx_p2p_xfer_params prm = { .struct_size = sizeof(prm) };
	char msg[40];
	double t0, t1;
	int rc;

	if (p->form == KV_RANDOM)
		build_batch(p, key, bs);
	snprintf(msg, sizeof(msg), "kv %016llx", (unsigned long long)key);
	prm.notif = msg;
	prm.notif_len = strlen(msg) + 1;
	if (token_recv(p, X_GO))
		return -1;
	if (o->verify && batch_blocks(p, key, bs, it, o->kv.read ? BLOCKS_POISON : BLOCKS_FILL))
		return -1;
	if (finish(p, X_GO, "go token", 1, key))
		return -1;
	t0 = bench_now_s();
	rc = post_batch(p, &prm);
	t1 = bench_now_s();
	*post_us = (t1 - t0) * 1e6;
	if (rc)
		return fail(o->kv.read ? "read" : "write", rc);
	if (finish(p, X_OP, o->kv.read ? "read" : "write", 0, 0))
		return -1;
	*us = (bench_now_s() - t0) * 1e6;
	if (token_send(p, X_DONE, key) || finish(p, X_DONE, "done token", 0, 0))
		return -1;
	if (o->verify && o->kv.read && batch_blocks(p, key, bs, it, BLOCKS_CHECK))
		return -1;
	return 0;
}

/* The contiguous pattern of a batch's bytes at pool offset 0. */
static uint64_t contig_seed(uint64_t key)
{
	return key ^ 0x636f6e7469670000ull;
}

static int contig_check(struct kv_peer *p, size_t len, uint64_t key)
{
	size_t bad = bench_buf_check(&p->pool, 0, len, contig_seed(key));

	if (bad == (size_t)-1)
		return 0;
	if (bad == (size_t)-2)
		return fail("copying the pool back for verification", TCPX_P2P_ECUDA);
	perf_error("tcpx_perf: kv: verification FAILED: contiguous %zu bytes, first bad byte "
		"at offset %zu\n", len, bad);
	return -1;
}

/* The same bytes as one two-sided transfer, in the batch's direction.
 * WRITE: initiator sends, target receives and then replies (ACK slot), and
 * the time runs until that reply, as a WRITE completes once the target
 * reported its bytes in place.  READ: the initiator sends a request token
 * and receives the bytes, the time running until they are in place. */
static int target_contig(struct kv_peer *p, size_t len, uint64_t key)
{
	const struct perf_opts *o = p->o;
	int rc;

	if (!o->kv.read) {
		rc = tcpx_p2p_recv(p->c, p->pool_mr, 0, len, &p->x[X_OP]);
		if (rc)
			return fail("contiguous recv", rc);
		/* As for a batch: the check waits until the reply is out. */
		if (token_send(p, X_GO, key) || finish(p, X_OP, "contiguous recv", 0, 0) ||
		    token_send(p, X_ACK, key) || finish(p, X_GO, "go token", 0, 0) ||
		    finish(p, X_ACK, "reply", 0, 0))
			return -1;
		return o->verify ? contig_check(p, len, key) : 0;
	}
	if (token_recv(p, X_ACK))
		return -1;
	if (o->verify && bench_buf_fill(&p->pool, 0, len, contig_seed(key)))
		return fail("fill", TCPX_P2P_ECUDA);
	if (token_send(p, X_GO, key) || finish(p, X_ACK, "request token", 1, key))
		return -1;
	rc = tcpx_p2p_send(p->c, p->pool_mr, 0, len, &p->x[X_OP]);
	if (rc)
		return fail("contiguous send", rc);
	return finish(p, X_OP, "contiguous send", 0, 0) || finish(p, X_GO, "go token", 0, 0) ? -1 : 0;
}

static int initiator_contig(struct kv_peer *p, size_t len, uint64_t key, double *us)
{
	const struct perf_opts *o = p->o;
	double t0;
	int rc;

	if (token_recv(p, X_GO))
		return -1;
	if (o->verify && !o->kv.read && bench_buf_fill(&p->pool, 0, len, contig_seed(key)))
		return fail("fill", TCPX_P2P_ECUDA);
	if (finish(p, X_GO, "go token", 1, key))
		return -1;
	if (!o->kv.read) {
		if (token_recv(p, X_ACK))
			return -1;
		t0 = bench_now_s();
		rc = tcpx_p2p_send(p->c, p->pool_mr, 0, len, &p->x[X_OP]);
		if (rc)
			return fail("contiguous send", rc);
		if (finish(p, X_OP, "contiguous send", 0, 0) || finish(p, X_ACK, "reply", 1, key))
			return -1;
		*us = (bench_now_s() - t0) * 1e6;
		return 0;
	}
	rc = tcpx_p2p_recv(p->c, p->pool_mr, 0, len, &p->x[X_OP]);
	if (rc)
		return fail("contiguous recv", rc);
	t0 = bench_now_s();
	if (token_send(p, X_ACK, key) || finish(p, X_OP, "contiguous recv", 0, 0))
		return -1;
	*us = (bench_now_s() - t0) * 1e6;
	if (finish(p, X_ACK, "request token", 0, 0))
		return -1;
	return o->verify ? contig_check(p, len, key) : 0;
}

/* ---- report ------------------------------------------------------------------ */

static FILE *table_out(const struct perf_opts *o)
{
	return o->json && !strcmp(o->json, "-") ? stderr : stdout;
}

static void print_header(const struct kv_peer *p)
{
	const struct perf_opts *o = p->o;
	const struct perf_kv_opts *kv = &o->kv;
	FILE *out = table_out(o);

	fprintf(out, "# tcpx_perf kv %s: plugin %s (ABI v%d, %s), net dev %d\n",
		p->role ? "client (initiator)" : "server (target)", p->info.plugin_name,
		p->info.plugin_abi, p->info.plugin_path, p->info.net_dev);
	fprintf(out, "# op %s: one tcpx_p2p_%s of %d blocks a batch (%d random block ids x %d "
		"layers x K,V, on each side)%s; pool %d blocks per peer\n",
		kv->read ? "read" : "write", kv->read ? "read" : "write", kv->blocks, p->ids,
		kv->layers, kv->read ? "" : " with a notification", kv->pool_blocks);
	fprintf(out, "# mem %s (gpu %d), channels %d, chunk %zu (up to %d a channel's share), "
		"window %d/%d, warm-up %d, iters %d, seed %llu%s\n", perf_mem_name(o), p->info.gpu,
		o->cfg.num_channels, o->cfg.chunk_bytes, o->cfg.chunks_per_channel,
		o->cfg.send_window, o->cfg.recv_window, o->sweep.warmup,
		o->sweep.iters, (unsigned long long)kv->seed, o->verify ? ", verified" : "");
	fprintf(out, "# set-up %.1f ms (%s until the conn existed)\n", p->setup_ms,
		p->role ? "first dial" : "first accept");
	if (p->numa_node >= 0)
		fprintf(out, "# NUMA node %d\n", p->numa_node);
	else
		fprintf(out, "# NUMA: not bound (%s)\n", p->numa_why);
	if (p->role == 0) {
		fflush(out);
		return;
	}
	if (kv->prep) {
		fprintf(out, "# --prep: one batch of fixed block ids per row, posted as lists "
			"(tcpx_p2p_%s each time), as a prepared list and as a strided one "
			"(tcpx_p2p_xlist_post); post = the caller's time in that call; "
			"segs/s = blocks / post; time = post to completion; GB/s = 10^9 bytes/s\n",
			kv->read ? "read" : "write");
		fprintf(out, "# %9s %7s %-9s %6s %10s %10s %10s %12s %10s %9s\n", "block(B)",
			"blocks", "form", "iters", "post(us)", "p50(us)", "p99(us)", "segs/s",
			"time(us)", "GB/s");
		fflush(out);
		return;
	}
	fprintf(out, "# time = per batch, initiator's post to completion; GB/s = 10^9 bytes/s; "
		"requests/batch (chunks) = ceil(batch bytes / chunk); contig = the same bytes as one "
		"tcpx_p2p_send/recv, until the initiator knows they landed; kv/contig = GB/s ratio\n");
	fprintf(out, "# %9s %7s %6s %9s %10s %10s %10s %11s %10s %11s %10s %9s\n", "block(B)",
		"blocks", "iters", "GB/s", "avg(us)", "p50(us)", "p99(us)", "blocks/s", "req/batch",
		"contigGB/s", "contig(us)", "kv/contig");
	fflush(out);
}

static void json_record(FILE *f, const struct kv_peer *p, const struct bench_row *r,
			const struct bench_row *cr, size_t bs, long reqs, int first)
{
	const struct perf_opts *o = p->o;

	if (!f)
		return;
	fprintf(f, "%s  {\"bench\": \"kv\", \"op\": \"%s\", \"block_size\": %zu, \"blocks\": %d, "
		"\"size\": %zu, \"iters\": %d, \"time_us\": %.3f, \"gbps\": %.4f, \"p50_us\": %.3f, "
		"\"p99_us\": %.3f, \"blocks_per_s\": %.1f, \"requests_per_batch\": %ld, "
		"\"contig\": {\"time_us\": %.3f, \"gbps\": %.4f, \"p50_us\": %.3f, \"p99_us\": %.3f}, "
		"\"kv_over_contig\": %.4f, \"setup_ms\": %.3f, ", first ? "" : ",\n",
		o->kv.read ? "read" : "write", bs, o->kv.blocks, r->size, r->iters, r->avg_us,
		r->gbps, r->p50_us, r->p99_us, r->avg_us > 0 ? o->kv.blocks / (r->avg_us * 1e-6) : 0,
		reqs, cr->avg_us, cr->gbps, cr->p50_us, cr->p99_us,
		cr->gbps > 0 ? r->gbps / cr->gbps : 0, p->setup_ms);
	fprintf(f, "\"config\": {\"role\": \"client\", \"mem\": \"%s\", \"gpu\": %d, \"layers\": %d, "
		"\"pool_blocks\": %d, \"seed\": %llu, \"channels\": %d, \"chunk_bytes\": %zu, "
		"\"chunks_per_channel\": %d, \"send_window\": %d, \"recv_window\": %d, \"verify\": %s, \"warmup\": %d, "
		"\"plugin\": \"%s\", \"plugin_abi\": %d, \"net_dev\": %d, \"numa_node\": %d, "
		"\"version\": \"%s\"}}", perf_mem_name(o), p->info.gpu, o->kv.layers,
		o->kv.pool_blocks, (unsigned long long)o->kv.seed, o->cfg.num_channels,
		o->cfg.chunk_bytes, o->cfg.chunks_per_channel, o->cfg.send_window, o->cfg.recv_window,
		o->verify ? "true" : "false", o->sweep.warmup, p->info.plugin_name,
		p->info.plugin_abi, p->info.net_dev, p->numa_node, tcpx_p2p_version());
	fflush(f);
}

/* ---- a row: one block size ----------------------------------------------------- */

/* --prep: the fixed batch of a form (both peers), and the initiator's
 * prepared list.  Strided: segment k = a x ids + j is block b0 + k x step
 * of the pool on each side (step = pool-blocks / blocks), which is block
 * b0 + j x step of array a, as batch_blocks finds it. */
static int form_begin(struct kv_peer *p, size_t bs, uint64_t key)
{
	const struct perf_opts *o = p->o;
	int op = o->kv.read ? TCPX_P2P_XLIST_READ : TCPX_P2P_XLIST_WRITE;
	uint32_t step = (uint32_t)(p->nblk / p->ids), b0s, b0d;
	uint64_t rng = key;
	int rc = 0, j;

	if (p->form != KV_STRIDED) {
		build_batch(p, key, bs);
		if (p->role && p->form == KV_PREPARED)
			rc = tcpx_p2p_xlist_prepare(p->c, op, p->local, (size_t)o->kv.blocks,
						    p->remote, (size_t)o->kv.blocks, 0, &p->xl);
		return rc ? fail("xlist_prepare", rc) : 0;
	}
	b0s = (uint32_t)(splitmix(&rng) % step);
	b0d = (uint32_t)(splitmix(&rng) % step);
	for (j = 0; j < p->ids; j++) {
		p->src[j] = b0s + (uint32_t)j * step;
		p->dst[j] = b0d + (uint32_t)j * step;
	}
	if (!p->role)
		return 0;
	rc = tcpx_p2p_xlist_prepare_strided(
		p->c, op, p->pool_mr,
		&(tcpx_p2p_strided){ b0s * bs, step * bs, (size_t)o->kv.blocks, bs }, p->rmr,
		&(tcpx_p2p_strided){ b0d * bs, step * bs, (size_t)o->kv.blocks, bs }, 0, &p->xl);
	return rc ? fail("xlist_prepare_strided", rc) : 0;
}

static void form_end(struct kv_peer *p)
{
	if (p->xl)
		tcpx_p2p_xlist_release(p->xl);
	p->xl = NULL;
}

static void json_prep(FILE *f, const struct kv_peer *p, const struct bench_row *post,
		      const struct bench_row *r, size_t bs, int first)
{
	const struct perf_opts *o = p->o;

	if (!f)
		return;
	fprintf(f, "%s  {\"bench\": \"kv_prep\", \"op\": \"%s\", \"form\": \"%s\", "
		"\"block_size\": %zu, \"blocks\": %d, \"size\": %zu, \"iters\": %d, "
		"\"post_us\": %.3f, \"post_p50_us\": %.3f, \"post_p99_us\": %.3f, "
		"\"segments_per_s\": %.1f, \"time_us\": %.3f, \"gbps\": %.4f, "
		"\"config\": {\"mem\": \"%s\", \"layers\": %d, \"pool_blocks\": %d, "
		"\"channels\": %d, \"chunk_bytes\": %zu, \"plugin\": \"%s\", "
		"\"version\": \"%s\"}}", first ? "" : ",\n", o->kv.read ? "read" : "write",
		form_name[p->form], bs, o->kv.blocks, r->size, r->iters, post->avg_us,
		post->p50_us, post->p99_us, post->avg_us > 0 ? o->kv.blocks / (post->avg_us * 1e-6) : 0,
		r->avg_us, r->gbps, perf_mem_name(o), o->kv.layers, o->kv.pool_blocks,
		o->cfg.num_channels, o->cfg.chunk_bytes, p->info.plugin_name, tcpx_p2p_version());
	fflush(f);
}

/* --prep: the three forms of one block size, a table row each. */
static int run_row_prep(struct kv_peer *p, int row, int report, FILE *json)
{
	const struct perf_opts *o = p->o;
	size_t bs = o->kv.block[row], len = (size_t)o->kv.blocks * bs;
	struct bench_row r = { .size = len, .iters = o->sweep.iters }, post;
	FILE *out = table_out(o);
	double t;
	int it, rc = 0;

	for (p->form = KV_LISTS; p->form <= KV_STRIDED && !rc; p->form++) {
		rc = form_begin(p, bs, batch_key(p, row, -o->sweep.warmup - 1));
		for (it = -o->sweep.warmup; it < o->sweep.iters && !rc; it++)
			rc = p->role ? initiator_batch(p, bs, batch_key(p, row, it), it,
						       it >= 0 ? &p->us[it] : &t,
						       it >= 0 ? &p->post_us[it] : &t) :
				       target_batch(p, bs, batch_key(p, row, it), it);
		form_end(p);
		if (rc || !report || !p->role)
			continue;
		post = r;
		bench_stats(&r, p->us, len);
		bench_stats(&post, p->post_us, len);
		fprintf(out, "  %9zu %7d %-9s %6d %10.1f %10.1f %10.1f %12.0f %10.1f %9.3f\n", bs,
			o->kv.blocks, form_name[p->form], r.iters, post.avg_us, post.p50_us,
			post.p99_us, post.avg_us > 0 ? o->kv.blocks / (post.avg_us * 1e-6) : 0,
			r.avg_us, r.gbps);
		fflush(out);
		json_prep(json, p, &post, &r, bs, row == 0 && p->form == KV_LISTS);
	}
	p->form = KV_RANDOM;
	if (!rc && report && !p->role) {
		fprintf(out, "# block %zu: %d batches of %d blocks in each of 3 forms%s\n", bs,
			o->sweep.warmup + o->sweep.iters, o->kv.blocks, o->verify ? ", verified" : "");
		fflush(out);
	}
	return rc;
}

static int run_row(struct kv_peer *p, int row, int report, FILE *json)
{
	const struct perf_opts *o = p->o;
	size_t bs = o->kv.block[row], len = (size_t)o->kv.blocks * bs;
	struct bench_row r = { .size = len, .iters = o->sweep.iters };
	struct bench_row cr = r;
	long reqs = (long)((len + o->cfg.chunk_bytes - 1) / o->cfg.chunk_bytes);
	FILE *out = table_out(o);
	double t;
	int it;

	if (row == 0 && perf_test_fail(p->role, "run"))
		return -1;
	for (it = -o->sweep.warmup; it < o->sweep.iters; it++)
		if (p->role ? initiator_batch(p, bs, batch_key(p, row, it), it,
					      it >= 0 ? &p->us[it] : &t,
					      it >= 0 ? &p->post_us[it] : &t) :
			      target_batch(p, bs, batch_key(p, row, it), it))
			return -1;
	for (it = -o->sweep.warmup; it < o->sweep.iters; it++)
		if (p->role ? initiator_contig(p, len, batch_key(p, row, it),
					       it >= 0 ? &p->cus[it] : &t) :
			      target_contig(p, len, batch_key(p, row, it)))
			return -1;
	if (!report)
		return 0;
	if (p->role == 0) {
		fprintf(out, "# block %zu: %d batches of %d blocks %s%s, then %d contiguous %zu-byte "
			"transfers\n", bs, o->sweep.warmup + o->sweep.iters, o->kv.blocks,
			o->kv.read ? "read from the pool" : "written into the pool, notified",
			o->verify ? ", verified" : "", o->sweep.warmup + o->sweep.iters, len);
		fflush(out);
		return 0;
	}
	bench_stats(&r, p->us, len);
	bench_stats(&cr, p->cus, len);
	fprintf(out, "  %9zu %7d %6d %9.3f %10.1f %10.1f %10.1f %11.0f %10ld %11.3f %10.1f %9.3f\n",
		bs, o->kv.blocks, r.iters, r.gbps, r.avg_us, r.p50_us, r.p99_us,
		r.avg_us > 0 ? o->kv.blocks / (r.avg_us * 1e-6) : 0, reqs, cr.gbps, cr.avg_us,
		cr.gbps > 0 ? r.gbps / cr.gbps : 0);
	fflush(out);
	json_record(json, p, &r, &cr, bs, reqs, row == 0);
	return 0;
}

/* ---- set-up ----------------------------------------------------------------------- */

static void fill_setup(const struct kv_peer *p, struct kv_setup *m)
{
	const struct perf_opts *o = p->o;
	int k;

	memset(m, 0, sizeof(*m));
	m->magic = KV_MAGIC;
	m->layers = (uint64_t)o->kv.layers;
	m->blocks = (uint64_t)o->kv.blocks;
	m->pool_blocks = (uint64_t)o->kv.pool_blocks;
	m->nblock = (uint64_t)o->kv.nblock;
	for (k = 0; k < o->kv.nblock; k++)
		m->block[k] = o->kv.block[k];
	m->iters = (uint64_t)o->sweep.iters;
	m->warmup = (uint64_t)o->sweep.warmup;
	m->seed = o->kv.seed;
	m->read = (uint64_t)o->kv.read;
	m->verify = (uint64_t)o->verify;
	m->chunk = o->cfg.chunk_bytes;
	m->prep = (uint64_t)o->kv.prep;
}

/* Both peers send their kv_setup and compare the peer's (everything but
 * the descriptor must be equal, or the batches would not pair up); the
 * target's carries its pool's export, which the initiator imports. */
static int exchange_setup(struct kv_peer *p)
{
	struct kv_setup mine, peer;
	tcpx_p2p_rdesc desc;
	size_t rlen;
	int rc;

	fill_setup(p, &mine);
	if (p->role == 0) {
		rc = tcpx_p2p_mr_export(p->c, p->pool_mr, 0, p->pool.len,
					TCPX_P2P_ACCESS_WRITE | TCPX_P2P_ACCESS_READ, &desc);
		if (rc)
			return fail("mr_export", rc);
		memcpy(mine.desc, desc.bytes, sizeof(mine.desc));
	}
	memcpy(p->ctrl.ptr, &mine, sizeof(mine));
	rc = tcpx_p2p_recv(p->c, p->ctrl_mr, KV_CTRL_HALF, sizeof(mine), &p->x[X_ACK]);
	if (rc)
		return fail("set-up recv", rc);
	rc = tcpx_p2p_send(p->c, p->ctrl_mr, 0, sizeof(mine), &p->x[X_OP]);
	if (rc)
		return fail("set-up send", rc);
	if (finish(p, X_OP, "set-up send", 0, 0) || finish(p, X_ACK, "set-up recv", 0, 0))
		return -1;
	memcpy(&peer, (char *)p->ctrl.ptr + KV_CTRL_HALF, sizeof(peer));
	memcpy(desc.bytes, peer.desc, sizeof(desc.bytes));
	memset(peer.desc, 0, sizeof(peer.desc));
	memset(mine.desc, 0, sizeof(mine.desc));
	if (memcmp(&mine, &peer, sizeof(mine))) {
		perf_error("tcpx_perf: kv: the peer runs another shape: give both the same "
			"--layers, --block-size, --blocks, --pool-blocks, -n, -w, --seed, --op, "
			"--prep, --verify and --chunk\n");
		return -1;
	}
	if (p->role == 0)
		return 0;
	rc = tcpx_p2p_rmr_import(p->c, &desc, &p->rmr);
	if (rc)
		return fail("rmr_import", rc);
	rc = tcpx_p2p_rmr_query(p->rmr, &rlen, NULL, NULL);
	if (rc)
		return fail("rmr_query", rc);
	if (rlen != p->pool.len) {
		perf_error("tcpx_perf: kv: the target exported %zu bytes, expected %zu\n", rlen,
			p->pool.len);
		return -1;
	}
	return 0;
}

static int connect_kv(struct kv_peer *p, perf_listening_fn *listening, void *arg)
{
	const struct perf_opts *o = p->o;
	tcpx_p2p_server *srv;
	uint16_t port = o->port;
	double t0;
	int rc;

	if (p->role) {
		if (perf_test_fail(1, "connect"))
			return -1;
		t0 = bench_now_s();
		rc = tcpx_p2p_dial(p->s, o->host, o->pair_ports ? o->pair_ports[0] : port,
				   o->timeout_ms, &p->c);
		p->setup_ms = (bench_now_s() - t0) * 1e3;
		return rc ? fail("dial", rc) : 0;
	}
	rc = tcpx_p2p_server_create(p->s, o->bind, port, &srv);
	if (rc)
		return fail("listen", rc);
	tcpx_p2p_server_port(srv, &port);
	if (listening)
		listening(arg, 0, port);
	if (perf_test_fail(0, "connect")) {
		tcpx_p2p_server_destroy(srv);
		return -1;
	}
	t0 = bench_now_s();
	rc = tcpx_p2p_server_accept(srv, o->timeout_ms, &p->c);
	p->setup_ms = (bench_now_s() - t0) * 1e3;
	tcpx_p2p_server_destroy(srv);
	return rc ? fail("accept", rc) : 0;
}

static int alloc_arrays(struct kv_peer *p)
{
	const struct perf_opts *o = p->o;
	size_t n = (size_t)o->kv.blocks, it = (size_t)o->sweep.iters;

	p->perm = calloc((size_t)p->nblk, sizeof(*p->perm));
	p->src = calloc((size_t)p->ids, sizeof(*p->src));
	p->dst = calloc((size_t)p->ids, sizeof(*p->dst));
	p->local = calloc(n, sizeof(*p->local));
	p->remote = calloc(n, sizeof(*p->remote));
	p->us = calloc(it, sizeof(*p->us));
	p->cus = calloc(it, sizeof(*p->cus));
	p->post_us = calloc(it, sizeof(*p->post_us));
	if (p->perm && p->src && p->dst && p->local && p->remote && p->us && p->cus && p->post_us)
		return 0;
	perf_error("tcpx_perf: kv: out of memory\n");
	return -1;
}

static void free_arrays(struct kv_peer *p)
{
	free(p->post_us);
	free(p->cus);
	free(p->us);
	free(p->remote);
	free(p->local);
	free(p->dst);
	free(p->src);
	free(p->perm);
}

static size_t max_block(const struct perf_kv_opts *kv)
{
	size_t m = 0;
	int k;

	for (k = 0; k < kv->nblock; k++)
		m = kv->block[k] > m ? kv->block[k] : m;
	return m;
}

/* Pool and control region, both registered; 0 or -1 (said why). */
static int make_regions(struct kv_peer *p, int gpu)
{
	const struct perf_opts *o = p->o;
	size_t len = (size_t)o->kv.pool_blocks * max_block(&o->kv);
	char err[256];
	int rc;

	if (bench_buf_alloc(&p->pool, len, perf_mem_kind(o), gpu, err, sizeof(err)) ||
	    bench_buf_alloc(&p->ctrl, 2 * KV_CTRL_HALF, BENCH_HOST, -1, err, sizeof(err))) {
		perf_error("tcpx_perf: kv: %s\n", err);
		if (p->pool.ptr)
			bench_buf_free(&p->pool);
		p->pool.ptr = NULL;
		return -1;
	}
	/* With --verify every block starts as the sentinel: a block that was
	 * never written cannot pass for one that was. */
	if (o->verify && bench_buf_poison(&p->pool, 0, len)) {
		perf_error("tcpx_perf: kv: cannot fill the pool\n");
		bench_buf_free(&p->pool);
		bench_buf_free(&p->ctrl);
		p->pool.ptr = NULL;
		return -1;
	}
	rc = tcpx_p2p_mr_register_ex(p->s, p->pool.ptr, len,
				     o->cuda ? TCPX_P2P_MEM_CUDA : TCPX_P2P_MEM_HOST,
				     perf_mr_params(o), &p->pool_mr);
	if (!rc)
		rc = tcpx_p2p_mr_register(p->s, p->ctrl.ptr, 2 * KV_CTRL_HALF, TCPX_P2P_MEM_HOST,
					  &p->ctrl_mr);
	return rc ? fail("mr_register", rc) : 0;
}

/* Deregister and free what make_regions made (after the conn is gone). */
static void free_regions(struct kv_peer *p)
{
	if (p->ctrl_mr && tcpx_p2p_mr_deregister(p->ctrl_mr) == 0)
		p->ctrl_mr = NULL;
	if (p->pool_mr && tcpx_p2p_mr_deregister(p->pool_mr) == 0)
		p->pool_mr = NULL;
	if (p->ctrl.ptr && !p->ctrl_mr)
		bench_buf_free(&p->ctrl);
	if (p->pool.ptr && !p->pool_mr)
		bench_buf_free(&p->pool);
}

static int run_rows(struct kv_peer *p, int report)
{
	FILE *json = NULL;
	int row, rc = 0;

	if (report && p->role && perf_json_open(p->o, &json))
		return -1;
	if (report)
		print_header(p);
	for (row = 0; row < p->o->kv.nblock && !rc; row++)
		rc = p->o->kv.prep ? run_row_prep(p, row, report, json) : run_row(p, row, report, json);
	perf_json_close(json);
	return rc;
}

int perf_kv_run(const struct perf_opts *o, int role, int report, perf_listening_fn *listening,
		void *arg)
{
	struct kv_peer p = { .o = o, .role = role };
	tcpx_p2p_config cfg = o->cfg;
	char bus[32] = "";
	int rc;

	p.nblk = o->kv.pool_blocks / (2 * o->kv.layers);
	p.ids = o->kv.blocks / (2 * o->kv.layers);
	p.info.struct_size = sizeof(p.info);
	cfg.gpu = perf_mem_on_gpu(o) ? o->gpu[role] : -1;
	if (o->numa == BENCH_NUMA_AUTO &&
	    (cfg.gpu < 0 || bench_gpu_bus_id(cfg.gpu, bus, sizeof(bus)))) {
		p.numa_why = "no GPU";
		p.numa_node = -1;
	} else {
		p.numa_node = bench_numa_bind(o->numa, bus, &p.numa_why);
	}
	if (alloc_arrays(&p)) {
		rc = -1;
		goto free_arrays;
	}
	rc = tcpx_p2p_session_create(&cfg, &p.s);
	if (rc) {
		fail("session", rc);
		goto free_arrays;
	}
	tcpx_p2p_session_query(p.s, &p.info);
	rc = connect_kv(&p, listening, arg);
	if (rc)
		goto destroy_session;
	rc = make_regions(&p, cfg.gpu);
	if (!rc)
		rc = exchange_setup(&p);
	if (!rc)
		rc = run_rows(&p, report);
	/* Neither side closes while the other may still be transferring. */
	if (!rc && (rc = tcpx_p2p_conn_barrier(p.c, o->timeout_ms)))
		fail("final barrier", rc);
	if (p.rmr)
		tcpx_p2p_rmr_release(p.rmr);
	/* The conn first: after a failure, destroying it is what stops writes
	 * into the regions and completes what was pending. */
	tcpx_p2p_conn_destroy(p.c);
	release_all(&p);
	free_regions(&p);
destroy_session:
	tcpx_p2p_session_destroy(p.s);
free_arrays:
	free_arrays(&p);
	return rc;
}
