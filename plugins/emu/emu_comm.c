/*
 * Comm lifetime: allocation, helper-thread start, and a teardown that never
 * hangs: shutdown() wakes every helper blocked in the kernel, the condition
 * variable wakes those waiting for requests or pages, then all are joined.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>

#include "emu.h"

#define EMU_SCRATCH (64u << 10)

uint32_t tp__emu_rand(uint32_t *state)
{
	uint32_t x = *state;

	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	*state = x;
	return x;
}

uint64_t tp__emu_slice_size(uint64_t size, int nsocks)
{
	uint64_t s = (size + (uint64_t)nsocks - 1) / (uint64_t)nsocks;

	s = (s + EMU_PAGE - 1) & ~(uint64_t)(EMU_PAGE - 1);
	if (s < EMU_SLICE_MIN)
		s = EMU_SLICE_MIN;
	if (s > EMU_SLICE_MAX)
		s = EMU_SLICE_MAX;
	return s;
}

int tp__emu_nparts(uint64_t size, int nsocks)
{
	uint64_t slice = tp__emu_slice_size(size, nsocks);
	uint64_t n = (size + slice - 1) / slice;

	return n == 0 ? 1 : n < (uint64_t)nsocks ? (int)n : nsocks;
}

/* The rotation keeps a helper that is reliably woken first from making
 * dst_off order the usual record order. */
uint64_t tp__emu_first_slice(int s, uint64_t seq, int nsocks)
{
	uint64_t n = (uint64_t)nsocks;

	return ((uint64_t)s + n - seq % n) % n;
}

int tp__emu_carries(int s, uint64_t seq, uint64_t size, int nsocks)
{
	return tp__emu_first_slice(s, seq, nsocks) < (uint64_t)tp__emu_nparts(size, nsocks);
}

void tp__emu_wake_all(struct emu_comm *c)
{
	pthread_cond_broadcast(&c->cv);
	for (int i = 0; i < EMU_MAX_SOCKS; i++)
		pthread_cond_signal(&c->threads[i].cv);
}

void tp__emu_wake_for(struct emu_comm *c, uint64_t seq)
{
	const struct emu_req *r = &c->reqs[seq % EMU_MAX_REQS];

	for (int i = 0; i < c->nsocks; i++) {
		struct emu_thread *t = &c->threads[i];

		if (c->kind == EMU_SEND ? tp__emu_carries(i, seq, r->size, c->nsocks)
					: t->wait_seq == seq)
			pthread_cond_signal(&t->cv);
	}
}

/* Comms closed with requests in flight under TCPX_EMU_CLOSE_INFLIGHT=
 * fail-others: every comm made before the last of them is broken. */
static uint64_t bad_closes;

void tp__emu_comm_check_others(struct emu_comm *c)
{
	if (c->poisoned || c->epoch == __atomic_load_n(&bad_closes, __ATOMIC_ACQUIRE))
		return;
	EMU_WARN("%s comm: another comm of this process was closed with requests in flight; "
		 "failing this one too (TCPX_EMU_CLOSE_INFLIGHT=fail-others)",
		 c->kind == EMU_SEND ? "send" : "recv");
	c->poisoned = 1;
}

struct emu_comm *tp__emu_comm_alloc(enum emu_kind kind, const struct emu_config *cfg)
{
	struct emu_comm *c = calloc(1, sizeof(*c));
	struct timespec ts;

	if (!c)
		return NULL;
	c->kind = kind;
	c->cfg = *cfg;
	c->epoch = __atomic_load_n(&bad_closes, __ATOMIC_ACQUIRE);
	c->nsocks = cfg->nsocks;
	c->nthreads = cfg->nthreads;
	for (int i = 0; i < EMU_MAX_SOCKS; i++)
		c->fds[i] = -1;
	if (tp__emu_cuda_get_device(&c->cuda_dev))
		c->cuda_dev = -1;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	c->rng = (uint32_t)(ts.tv_nsec ^ (uintptr_t)c) | 1;
	/* One path, one MSS; its exact value varies with options and route. */
	c->mss = cfg->mss - tp__emu_rand(&c->rng) % (cfg->mss / 8 + 1);
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->cv, NULL);
	for (int i = 0; i < EMU_MAX_SOCKS; i++) {
		pthread_cond_init(&c->threads[i].cv, NULL);
		c->threads[i].wait_seq = UINT64_MAX;
	}
	return c;
}

static int thread_prepare(struct emu_comm *c, struct emu_thread *t)
{
	/* Scattered receives keep one slice in flight on the GPU while the next
	 * lands in the other half of a double-size staging buffer. */
	int scatter = c->kind == EMU_RECV && c->pool.meta && c->pool.mode == EMU_BOUNCE_DEVICE &&
		      c->cfg.cuda_scatter;
	/* A task is at most one slice; with a small MSS that is thousands of
	 * fragments (a 1 MiB slice at MSS 448: ~2600). */
	uint32_t cap = tp__emu_frag_max(EMU_SLICE_MAX, c->mss);
	size_t rec_bytes = 2 * (size_t)cap * sizeof(*t->recs);

	t->scratch = malloc(EMU_SCRATCH);
	t->iov = malloc(cap * sizeof(*t->iov));
	if (!t->scratch || !t->iov)
		return -1;
	if (c->kind == EMU_RECV && c->pool.meta) {
		t->rec_cap = cap;
		/* The scatter kernel reads a task's records where the helper
		 * wrote them: pinned, device-mapped host memory. */
		if (scatter) {
			if (tp__emu_cuda_host_alloc_mapped((void **)&t->recs, (void **)&t->recs_dev,
							   rec_bytes))
				return -1;
			t->recs_mapped = 1;
		} else if (!(t->recs = malloc(rec_bytes))) {
			return -1;
		}
	}
	if (c->cuda_dev < 0)
		return 0;
	t->cp_dst = malloc(cap * sizeof(*t->cp_dst));
	t->cp_src = malloc(cap * sizeof(*t->cp_src));
	t->cp_len = malloc(cap * sizeof(*t->cp_len));
	if (!t->cp_dst || !t->cp_src || !t->cp_len)
		return -1;
	if (tp__emu_cuda_host_alloc((void **)&t->staging, (scatter ? 2 : 1) * (size_t)EMU_SLICE_MAX))
		return -1;
	if (scatter && tp__emu_cuda_malloc((void **)&t->dstaging, EMU_SLICE_MAX))
		return -1;
	return tp__emu_cuda_stream_create(&t->stream);
}

int tp__emu_comm_start(struct emu_comm *c)
{
	void *(*body)(void *) = c->kind == EMU_SEND ? tp__emu_send_thread : tp__emu_recv_thread;

	for (int i = 0; i < c->nsocks; i++) {
		if (tp__emu_sock_set_nonblock(c->fds[i], 0) || tp__emu_sock_tune(c->fds[i])) {
			EMU_WARN("cannot configure socket %d of a comm", i);
			return -1;
		}
	}
	for (int i = 0; c->pool.meta && i < EMU_MAX_REQS; i++) {
		c->reqs[i].pages = malloc(EMU_MAX_REQ_PAGES * sizeof(*c->reqs[i].pages));
		c->reqs[i].recs = malloc(TP_UNPACK_MAX_PAGES * sizeof(*c->reqs[i].recs));
		if (!c->reqs[i].pages || !c->reqs[i].recs)
			return -1;
	}
	/* One helper per socket: see emu.h on nthreads. */
	for (int i = 0; i < c->nsocks; i++) {
		struct emu_thread *t = &c->threads[i];

		t->comm = c;
		t->idx = i;
		if (thread_prepare(c, t)) {
			EMU_WARN("cannot allocate helper thread buffers");
			return -1;
		}
		if (pthread_create(&t->tid, NULL, body, t)) {
			EMU_WARN("cannot start a helper thread");
			return -1;
		}
		t->started = 1;
	}
	return 0;
}

void tp__emu_comm_free(struct emu_comm *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->lock);
	c->closing = 1;
	tp__emu_wake_all(c);
	pthread_mutex_unlock(&c->lock);
	for (int i = 0; i < EMU_MAX_SOCKS; i++)
		if (c->fds[i] >= 0)
			shutdown(c->fds[i], SHUT_RDWR);
	for (int i = 0; i < EMU_MAX_SOCKS; i++) {
		struct emu_thread *t = &c->threads[i];

		if (t->started)
			pthread_join(t->tid, NULL);
		if (t->stream || t->dstaging) {
			tp__emu_cuda_set_device(c->cuda_dev);
			tp__emu_cuda_stream_destroy(t->stream);
			tp__emu_cuda_free(t->dstaging);
		}
		tp__emu_cuda_host_free(t->staging);
		if (t->recs_mapped)
			tp__emu_cuda_host_free(t->recs);
		else
			free(t->recs);
		free(t->scratch);
		free(t->iov);
		free(t->cp_dst);
		free(t->cp_src);
		free(t->cp_len);
	}
	for (int i = 0; i < EMU_MAX_SOCKS; i++)
		if (c->fds[i] >= 0)
			close(c->fds[i]);
	for (int i = 0; i < EMU_MAX_REQS; i++) {
		free(c->reqs[i].pages);
		free(c->reqs[i].recs);
	}
	tp__emu_pool_destroy(&c->pool);
	for (int i = 0; i < EMU_MAX_SOCKS; i++)
		pthread_cond_destroy(&c->threads[i].cv);
	pthread_cond_destroy(&c->cv);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

/* Requests still in flight at a close while the peer is there break the
 * contract (emu.h, close_fail_others): said, and refused with
 * ncclInvalidUsage, though the comm is freed all the same. */
static ncclResult_t close_comm(struct emu_comm *c)
{
	ncclResult_t ret = ncclSuccess;
	uint64_t n;

	if (!c)
		return ncclInvalidArgument;
	pthread_mutex_lock(&c->lock);
	n = c->npost - (c->kind == EMU_SEND ? c->ntested : c->nconsumed);
	if (c->broken)
		n = 0; /* the peer is gone: nothing else can be done */
	pthread_mutex_unlock(&c->lock);
	if (n) {
		EMU_WARN("close%s with %llu requests in flight: NCCL never does this and what "
			 "TCPX does then is not known%s", c->kind == EMU_SEND ? "Send" : "Recv",
			 (unsigned long long)n, c->cfg.close_fail_others
			 ? "; every other comm of the process fails now" : "");
		if (c->cfg.close_fail_others)
			__atomic_add_fetch(&bad_closes, 1, __ATOMIC_RELEASE);
		ret = ncclInvalidUsage;
	}
	tp__emu_comm_free(c);
	return ret;
}

ncclResult_t tp__emu_close_send(void *send_comm)
{
	return close_comm(send_comm);
}

ncclResult_t tp__emu_close_recv(void *recv_comm)
{
	return close_comm(recv_comm);
}
