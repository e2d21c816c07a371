/* Memory regions: registered with the plugin lazily, once per comm, and
 * cached in the region. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "core/mr.h"
#include "core/pipeline/comm.h"
#include "core/session.h"
#include "util/error.h"
#include "util/log.h"

#define TP_CUDA_REG_ALIGN 4096u /* TCPX CUDA regMr wants a 4 KiB-aligned base */

static int check_type(const struct tcpx_p2p_session *s, int type, bool landing)
{
	int need;

	if (type == TCPX_P2P_MEM_HOST) {
		need = NCCL_PTR_HOST;
	} else if (type == TCPX_P2P_MEM_CUDA) {
		if (s->cfg.gpu < 0 && !landing)
			return tp__error(TCPX_P2P_EINVAL,
					 "mr_register: CUDA memory on a host-only session (gpu -1)");
		need = NCCL_PTR_CUDA;
	} else {
		return tp__error(TCPX_P2P_EINVAL, "mr_register: unknown mem_type %d", type);
	}
	if (!(s->props.ptr_support & need))
		return tp__error(TCPX_P2P_ENOTSUP, "plugin %s does not support %s memory",
				 s->net->name, type == TCPX_P2P_MEM_CUDA ? "CUDA" : "host");
	return 0;
}

/* The plugin trusts the type it is told (TCPX exits on host data where it
 * expects device memory); ask CUDA what the pointer really is. */
static int check_pointer(const struct tcpx_p2p_session *s, const void *ptr, int type)
{
	int is_dev = 0;

	tp__dev_ptr_is_device(ptr, &is_dev);
	if (type == TCPX_P2P_MEM_HOST && is_dev)
		return tp__error(TCPX_P2P_EINVAL,
				 "mr_register: %p is CUDA device memory, registered as host", ptr);
	if (type == TCPX_P2P_MEM_CUDA && !is_dev)
		return tp__error(TCPX_P2P_EINVAL,
				 "mr_register: %p is not CUDA device memory", ptr);
	return 0;
}

/* Host memory on a session with a GPU: lock it if asked, and whether the
 * GPU's kernels may write it in place — both in the session's context,
 * where its kernels run. */
static int host_for_gpu(struct tcpx_p2p_session *s, struct tcpx_p2p_mr *mr, bool pin)
{
	void *ctx = tp__gpu_save(s);
	int rc = tp__session_use_gpu(s);

	if (!rc && pin)
		rc = tp__pin_take(mr->ptr, mr->len, &mr->pin);
	mr->mapped = !rc && tp__dev_host_mapped(mr->ptr, mr->len);
	tp__dev_ctx_restore(ctx);
	return pin ? rc : 0; /* without a pin asked for, an unusable GPU only means "not mapped" */
}

/* Give mr the next id and append it to the session's regions (s->lock held). */
static int list_mr(struct tcpx_p2p_session *s, struct tcpx_p2p_mr *mr)
{
	if (s->nmrs == s->mrs_cap) {
		size_t cap = s->mrs_cap ? 2 * s->mrs_cap : 16;
		struct tcpx_p2p_mr **a = realloc(s->mrs, cap * sizeof(*a));

		if (!a)
			return tp__error(TCPX_P2P_ENOMEM, "mr_register: out of memory");
		s->mrs = a;
		s->mrs_cap = cap;
	}
	mr->id = ++s->mr_ids;
	s->mrs[s->nmrs++] = mr;
	return 0;
}

static int mr_register(tcpx_p2p_session *s, void *ptr, size_t len, int mem_type,
		       unsigned flags, bool landing, tcpx_p2p_mr **out);

int tp__mr_register(struct tcpx_p2p_session *s, void *ptr, size_t len, int mem_type,
		    unsigned flags, struct tcpx_p2p_mr **out)
{
	return mr_register(s, ptr, len, mem_type, flags, false, out);
}

/* A device landing buffer behind a device bounce (conn.c, ctl.c): `bytes`
 * of device memory, registered as CUDA memory also on a host-only session,
 * which then uses the device the plugin's bounce buffer is on (the current
 * one, as TCPX picks it).  Nothing is left allocated on failure. */
int tp__land_create(struct tcpx_p2p_session *s, size_t bytes, char **land,
		    struct tcpx_p2p_mr **mr)
{
	int rc = s->cfg.gpu >= 0 ? tp__session_use_gpu(s) : 0;

	if (!rc)
		rc = tp__dev_malloc((void **)land, bytes);
	if (rc)
		return rc;
	rc = mr_register(s, *land, bytes, TCPX_P2P_MEM_CUDA, 0, true, mr);
	if (rc) {
		tp__dev_free(*land);
		*land = NULL;
	}
	return rc;
}

void tp__land_destroy(char *land, struct tcpx_p2p_mr *mr)
{
	if (mr)
		tp__mr_deregister(mr);
	if (land)
		tp__dev_free(land);
}

/* The arguments are the caller's (api/mr.c checked them) or the library's
 * own; what the session and the plugin allow is checked here. */
static int mr_register(tcpx_p2p_session *s, void *ptr, size_t len, int mem_type,
		       unsigned flags, bool landing, tcpx_p2p_mr **out)
{
	struct tcpx_p2p_mr *mr;
	uintptr_t base, end;
	int rc;

	rc = check_type(s, mem_type, landing);
	if (!rc)
		rc = check_pointer(s, ptr, mem_type);
	if (rc)
		return rc;
	base = (uintptr_t)ptr;
	end = base + len;
	if (mem_type == TCPX_P2P_MEM_CUDA) {
		base &= ~(uintptr_t)(TP_CUDA_REG_ALIGN - 1);
		end = (end + TP_CUDA_REG_ALIGN - 1) & ~(uintptr_t)(TP_CUDA_REG_ALIGN - 1);
	}
	if (s->net->abi < 8 && end - base > INT_MAX)
		return tp__error(TCPX_P2P_EINVAL,
				 "mr_register: %zu bytes; plugin %s (ABI v%d) registers < 2 GiB",
				 (size_t)(end - base), s->net->name, s->net->abi);
	mr = calloc(1, sizeof(*mr));
	if (!mr)
		return tp__error(TCPX_P2P_ENOMEM, "mr_register: out of memory");
	mr->s = s;
	mr->ptr = ptr;
	mr->len = len;
	mr->type = mem_type;
	if (mem_type == TCPX_P2P_MEM_HOST && s->cfg.gpu >= 0) {
		rc = host_for_gpu(s, mr, flags & TCPX_P2P_MR_PIN);
		if (rc) {
			free(mr);
			return rc;
		}
	}
	mr->reg_base = (char *)base;
	mr->reg_len = end - base;
	pthread_mutex_lock(&s->lock);
	rc = list_mr(s, mr);
	pthread_mutex_unlock(&s->lock);
	if (rc) {
		if (mr->pin)
			tp__pin_release(mr->pin);
		free(mr);
		return rc;
	}
	*out = mr;
	return 0;
}

/* Index of the first region with id >= id (s->lock held). */
static size_t mr_lower_bound(const struct tcpx_p2p_session *s, uint64_t id)
{
	size_t lo = 0, hi = s->nmrs;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (s->mrs[mid]->id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

struct tcpx_p2p_mr *tp__mr_find(const struct tcpx_p2p_session *s, uint64_t id)
{
	size_t i = mr_lower_bound(s, id);

	return i < s->nmrs && s->mrs[i]->id == id ? s->mrs[i] : NULL;
}

static void unlink_mr(struct tcpx_p2p_session *s, struct tcpx_p2p_mr *mr)
{
	size_t i = mr_lower_bound(s, mr->id);

	if (i < s->nmrs && s->mrs[i] == mr) {
		memmove(&s->mrs[i], &s->mrs[i + 1], (s->nmrs - i - 1) * sizeof(*s->mrs));
		s->nmrs--;
	}
}

int tp__mr_deregister(struct tcpx_p2p_mr *mr)
{
	struct tcpx_p2p_session *s;
	void *ctx;
	int i;

	s = mr->s;
	pthread_mutex_lock(&s->lock);
	if (mr->inflight) {
		long inflight = mr->inflight; /* read under the lock, reported after */

		pthread_mutex_unlock(&s->lock);
		return tp__error(TCPX_P2P_EBUSY, "mr_deregister: %ld segment(s) of transfers "
				 "still use it", inflight);
	}
	unlink_mr(s, mr);
	/* Under the lock: conn teardown drops its comms from every listed
	 * region before closing them, so each comm named here is still open. */
	ctx = tp__gpu_save(s);
	tp__session_use_gpu(s);
	for (i = 0; i < mr->nregs; i++) {
		if (s->net->ops->dereg_mr(s->net, mr->regs[i].comm, mr->regs[i].mhandle))
			TP_WARN("mr", "deregMr failed: %s", tcpx_p2p_last_error());
	}
	/* Unlocked last: no plugin registration or transfer uses it now. */
	if (mr->pin)
		tp__pin_release(mr->pin);
	tp__dev_ctx_restore(ctx);
	pthread_mutex_unlock(&s->lock);
	free(mr->regs);
	free(mr);
	return 0;
}

static int add_reg(struct tcpx_p2p_mr *mr, void *comm, void *mh)
{
	struct tp_mr_reg *r;
	int cap;

	if (mr->nregs == mr->cap) {
		cap = mr->cap ? 2 * mr->cap : 8;
		r = realloc(mr->regs, (size_t)cap * sizeof(*r));
		if (!r)
			return tp__error(TCPX_P2P_ENOMEM, "mr: out of memory");
		mr->regs = r;
		mr->cap = cap;
	}
	mr->regs[mr->nregs].comm = comm;
	mr->regs[mr->nregs].mhandle = mh;
	mr->nregs++;
	return 0;
}

static bool needs_mhandle(const struct tp_net *net)
{
	return !strncmp(net->name, "GPUDirectTCPX", 13) || !strncmp(net->name, "TCPXEmu", 7);
}

int tp__mr_handle_slow(struct tcpx_p2p_mr *mr, struct tp_comm *cm, void **mhandle)
{
	struct tcpx_p2p_session *s = mr->s;
	void *mh = NULL;
	bool found = false;
	int i, rc = 0;

	pthread_mutex_lock(&s->lock);
	for (i = 0; i < mr->nregs; i++) {
		if (mr->regs[i].comm == cm->comm) {
			mh = mr->regs[i].mhandle;
			found = true; /* some plugins register with a NULL handle */
			break;
		}
	}
	if (!found) {
		rc = tp__session_use_gpu(s);
		if (!rc)
			rc = s->net->ops->reg_mr(s->net, cm->comm, mr->reg_base, mr->reg_len,
						 mr->type == TCPX_P2P_MEM_CUDA ? NCCL_PTR_CUDA
									       : NCCL_PTR_HOST,
						 &mh);
		/* TCPX reads the buffer's memory type from the handle at every
		 * post; other plugins (NCCL's socket one) register nothing. */
		if (!rc && !mh && needs_mhandle(s->net))
			rc = tp__error(TCPX_P2P_EPLUGIN, "plugin %s: regMr returned a NULL "
				       "handle", s->net->name);
		if (!rc) {
			rc = add_reg(mr, cm->comm, mh);
			if (rc)
				s->net->ops->dereg_mr(s->net, cm->comm, mh);
		}
	}
	pthread_mutex_unlock(&s->lock);
	if (rc)
		return rc;
	cm->mr_cached = mr->id;
	cm->mh_cached = mh;
	*mhandle = mh;
	return 0;
}

void tp__mr_drop_comm(struct tcpx_p2p_session *s, void *comm)
{
	struct tcpx_p2p_mr *mr;
	int i;

	pthread_mutex_lock(&s->lock);
	for (size_t k = 0; k < s->nmrs; k++) {
		mr = s->mrs[k];
		for (i = 0; i < mr->nregs; i++) {
			if (mr->regs[i].comm != comm)
				continue;
			if (s->net->ops->dereg_mr(s->net, comm, mr->regs[i].mhandle))
				TP_WARN("mr", "deregMr failed: %s", tcpx_p2p_last_error());
			mr->regs[i--] = mr->regs[--mr->nregs];
		}
	}
	pthread_mutex_unlock(&s->lock);
}
