/*
 * Memory registration and the request slots.  The rules are TCPX's: 16
 * slots per comm, a send holds its slot until test reports it done, a
 * receive until irecvConsumed; test and irecvConsumed are FIFO-only; test
 * never writes sizes.  Misuse is reported through the logger and an error,
 * leaving the comm usable for correct calls.
 */
#include <stdlib.h>
#include <string.h>

#include "emu.h"

ncclResult_t tp__emu_reg_mr(void *comm, void *data, int size, int type, void **mhandle)
{
	struct emu_mr *mr;

	if (type == NCCL_PTR_CUDA) {
		if (!tp__emu_cuda_usable()) {
			EMU_WARN("regMr: CUDA memory %p without a usable GPU", data);
			return ncclInvalidArgument;
		}
		if (((uintptr_t)data & (EMU_PAGE - 1)) || size <= 0) {
			EMU_WARN("regMr: CUDA buffer %p size %d must be 4096-byte aligned with "
				 "0 < size < 2^31", data, size);
			return ncclInvalidArgument;
		}
	} else if (type != NCCL_PTR_HOST || size < 0) {
		EMU_WARN("regMr: unsupported type %d or size %d", type, size);
		return ncclInvalidArgument;
	}
	mr = malloc(sizeof(*mr));
	if (!mr)
		return ncclSystemError;
	mr->type = type;
	mr->base = data;
	mr->size = (size_t)size;
	*mhandle = mr;
	return ncclSuccess;
}

ncclResult_t tp__emu_dereg_mr(void *comm, void *mhandle)
{
	free(mhandle);
	return ncclSuccess;
}

/* TCPX sometimes answers "not ready" with a NULL request; so may we. */
static int null_request(struct emu_comm *c)
{
	return c->cfg.null_pct && (int)(tp__emu_rand(&c->rng) % 100) < c->cfg.null_pct;
}

static ncclResult_t post(struct emu_comm *c, void *data, uint64_t size, int tag, void *mhandle,
			 void **request)
{
	uint64_t oldest = c->kind == EMU_SEND ? c->ntested : c->nconsumed;
	struct emu_mr *mr = mhandle;
	struct emu_req *r;

	*request = NULL;
	if (!mr) {
		/* TCPX reads the buffer's memory type from the handle. */
		EMU_WARN("%s: NULL mhandle (post with the handle regMr returned)",
			 c->kind == EMU_SEND ? "isend" : "irecv");
		return ncclInvalidArgument;
	}
	if (c->kind == EMU_RECV && c->pool.meta && c->pool.mode == EMU_BOUNCE_DEVICE &&
	    mr->type != NCCL_PTR_CUDA) {
		/* TCPX's data sockets are steered into its device bounce buffer;
		 * it receives host memory with a plain recv(), which devmem-TCP
		 * answers with EFAULT (and the plugin's socket thread ends). */
		EMU_WARN("irecv into host memory on a device-bounce comm: TCPX would recv() "
			 "into it and fail with EFAULT (post device memory)");
		return ncclInvalidUsage;
	}
	if (c->kind == EMU_RECV && c->cfg.task &&
	    size > c->cfg.task * (uint64_t)c->cfg.nsocks) {
		/* TCPX cuts a request into tasks of NCCL_DYNAMIC_CHUNK_SIZE, one
		 * socket each; two tasks of one receive on a socket make it hand
		 * back only the last one's pages at irecvConsumed, and the rest
		 * of the receive buffer is lost until the socket closes. */
		EMU_WARN("irecv of %llu bytes: more than NCCL_DYNAMIC_CHUNK_SIZE (%llu) x %d "
			 "sockets; TCPX would leak its pages", (unsigned long long)size,
			 (unsigned long long)c->cfg.task, c->cfg.nsocks);
		return ncclInvalidUsage;
	}
	pthread_mutex_lock(&c->lock);
	tp__emu_comm_check_others(c);
	if (c->poisoned) {
		pthread_mutex_unlock(&c->lock);
		return ncclInternalError;
	}
	if (null_request(c)) {
		pthread_mutex_unlock(&c->lock);
		return ncclSuccess;
	}
	if (c->npost - oldest >= (uint64_t)c->cfg.max_reqs) {
		pthread_mutex_unlock(&c->lock);
		EMU_WARN("unable to allocate requests");
		return ncclInternalError;
	}
	r = &c->reqs[c->npost % EMU_MAX_REQS];
	r->comm = c;
	r->seq = c->npost;
	r->data = data;
	r->cap = size;
	r->size = c->kind == EMU_SEND ? size : 0;
	r->tag = tag;
	r->cuda = mr->type == NCCL_PTR_CUDA;
	r->result = ncclSuccess;
	r->nparts = c->kind == EMU_SEND ? tp__emu_nparts(size, c->nsocks) : 0;
	r->parts_done = 0;
	r->setup = 0;
	r->discard = 0;
	r->npages = 0;
	r->resv = 0;
	r->nrec = 0;
	r->state = EMU_REQ_POSTED;
	c->npost++;
	if (c->cfg.eager)
		tp__emu_wake_for(c, c->nactive++);
	pthread_mutex_unlock(&c->lock);
	*request = r;
	return ncclSuccess;
}

ncclResult_t tp__emu_isend(void *send_comm, void *data, int size, int tag, void *mhandle,
			   void **request)
{
	struct emu_comm *c = send_comm;

	if (size < 0 || (size && !data) || c->kind != EMU_SEND) {
		EMU_WARN("isend: bad arguments (size %d)", size);
		return ncclInvalidArgument;
	}
	if (c->cfg.short_drop && (uint64_t)size >= c->cfg.short_min)
		size -= (int)(c->cfg.short_drop < (uint64_t)size ? c->cfg.short_drop : (uint64_t)size);
	return post(c, data, (uint64_t)size, tag, mhandle, request);
}

ncclResult_t tp__emu_irecv(void *recv_comm, int n, void **data, int *sizes, int *tags,
			   void **mhandles, void **request)
{
	struct emu_comm *c = recv_comm;

	if (n != 1) {
		EMU_WARN("irecv: n = %d but maxRecvs is 1", n);
		return ncclInvalidArgument;
	}
	if (sizes[0] < 0 || c->kind != EMU_RECV) {
		EMU_WARN("irecv: bad arguments (size %d)", sizes[0]);
		return ncclInvalidArgument;
	}
	return post(c, data[0], (uint64_t)sizes[0], tags ? tags[0] : 0,
		    mhandles ? mhandles[0] : NULL, request);
}

static void release_pages(struct emu_comm *c, struct emu_req *r)
{
	if (r->npages)
		tp__emu_pool_release(&c->pool, r->pages, r->npages, c->cfg.poison);
	r->npages = 0;
}

/* Failed receives need no consume: free them once they reach the head.
 * So do all receives of a comm driven without irecvConsumed (before v7). */
static void release_failed_prefix(struct emu_comm *c)
{
	while (c->nconsumed < c->ntested) {
		struct emu_req *r = &c->reqs[c->nconsumed % EMU_MAX_REQS];

		if (r->state != EMU_REQ_REPORTED ||
		    (r->result == ncclSuccess && !c->cfg.consume_at_test))
			break;
		release_pages(c, r);
		r->state = EMU_REQ_FREE;
		c->nconsumed++;
	}
	pthread_cond_broadcast(&c->cv);
}

void tp__emu_req_publish(struct emu_comm *c, struct emu_req *r)
{
	if (c->kind == EMU_RECV && c->pool.meta)
		tp__emu_pool_publish(&c->pool, (int)(r->seq % EMU_MAX_REQS), r->recs,
				     r->discard ? 0 : r->nrec);
	r->state = EMU_REQ_DONE;
}

/*
 * TCPX's tcpxCommProgress, run by every test() on the comm: requests the
 * helpers finished are published (their records reach the meta ring here),
 * then at most one more posted request is handed to the helpers.  Nothing
 * moves between tests: a caller that stops testing stops the transfer.
 */
static void progress_step(struct emu_comm *c)
{
	for (uint64_t seq = c->ntested; seq < c->nactive; seq++) {
		struct emu_req *r = &c->reqs[seq % EMU_MAX_REQS];

		if (r->state == EMU_REQ_DONE)
			continue; /* published, not yet reported */
		if (r->state != EMU_REQ_FINISHED)
			break;
		tp__emu_req_publish(c, r);
	}
	if (c->nactive < c->npost)
		tp__emu_wake_for(c, c->nactive++);
}

ncclResult_t tp__emu_test(void *request, int *done, int *sizes)
{
	struct emu_req *r = request;
	struct emu_comm *c;
	ncclResult_t ret = ncclSuccess;

	*done = 0;
	if (!r || !r->comm) {
		EMU_WARN("test on an invalid request %p", request);
		return ncclInvalidArgument;
	}
	c = r->comm;
	pthread_mutex_lock(&c->lock);
	tp__emu_comm_check_others(c);
	if (c->poisoned) {
		ret = ncclInternalError;
		goto unlock;
	}
	if (r->state == EMU_REQ_FREE || r->state == EMU_REQ_REPORTED) {
		EMU_WARN("test after done (request %llu was already reported complete)",
			 (unsigned long long)r->seq);
		ret = ncclInvalidUsage;
		goto unlock;
	}
	if (r->seq != c->ntested) {
		EMU_WARN("test on non-head request %llu (oldest incomplete is %llu)",
			 (unsigned long long)r->seq, (unsigned long long)c->ntested);
		ret = ncclInvalidUsage;
		goto unlock;
	}
	if (!c->cfg.eager)
		progress_step(c);
	if (r->state == EMU_REQ_POSTED && c->broken) {
		r->result = c->broken;
		r->state = EMU_REQ_DONE;
	}
	if (r->state != EMU_REQ_DONE)
		goto unlock;
	*done = 1;
	ret = r->result;
	if (sizes && c->cfg.sizes)
		*sizes = (int)r->size;
	c->ntested++;
	if (c->kind == EMU_SEND) {
		r->state = EMU_REQ_FREE;
		pthread_cond_broadcast(&c->cv);
	} else {
		r->state = EMU_REQ_REPORTED;
		if (ret != ncclSuccess || c->cfg.consume_at_test)
			release_failed_prefix(c);
	}
unlock:
	pthread_mutex_unlock(&c->lock);
	return ret;
}

ncclResult_t tp__emu_irecv_consumed(void *recv_comm, int n, void *request)
{
	struct emu_comm *c = recv_comm;
	struct emu_req *r = request;
	ncclResult_t ret = ncclSuccess;

	if (!c || c->kind != EMU_RECV || !r || r->comm != c || n != 1) {
		EMU_WARN("irecvConsumed: invalid comm, request or n = %d", n);
		return ncclInvalidArgument;
	}
	pthread_mutex_lock(&c->lock);
	if (r->state != EMU_REQ_REPORTED || r->seq != c->nconsumed) {
		EMU_WARN("irecvConsumed out of order (request %llu, oldest unconsumed is %llu)",
			 (unsigned long long)r->seq, (unsigned long long)c->nconsumed);
		ret = ncclInvalidUsage;
		goto unlock;
	}
	release_pages(c, r);
	r->state = EMU_REQ_FREE;
	c->nconsumed++;
	release_failed_prefix(c);
unlock:
	pthread_mutex_unlock(&c->lock);
	return ret;
}
