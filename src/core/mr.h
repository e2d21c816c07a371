/* Memory regions: the caller's range, its plugin registrations per comm
 * (mr.c) and the library's page locks of host regions (pin.c). */
#ifndef TP_CORE_MR_H
#define TP_CORE_MR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/pipeline/comm.h"

struct tcpx_p2p_session;

/* One plugin registration of a region on one comm. */
struct tp_mr_reg {
	void *comm;
	void *mhandle;
};

struct tcpx_p2p_mr {
	struct tcpx_p2p_session *s;
	uint64_t id;        /* unique in the session, never 0 */
	char *ptr;          /* the caller's pointer */
	size_t len;
	int type;           /* TCPX_P2P_MEM_* */
	bool mapped;        /* host memory the session's GPU addresses in place (pinned,
			     * mapped): device-bounce receives unpack into it by kernel */
	struct tp_pin *pin; /* the library's page lock it holds (TCPX_P2P_MR_PIN), or NULL */
	char *reg_base;     /* registered range: CUDA rounded to 4 KiB */
	size_t reg_len;
	struct tp_mr_reg *regs; /* guarded by s->lock */
	int nregs, cap;
	long inflight;      /* holds of transfers using it; guarded by s->lock */
};

/* pin.c: the library's page locks of host regions (TCPX_P2P_MR_PIN), with
 * the session's GPU current.  take: lock [p, p + len) unless it is locked
 * already; *out = the lock the region now holds (NULL: the application's
 * own, or none needed).  release: drop it; the last holder unlocks. */
struct tp_pin;
int tp__pin_take(void *p, size_t len, struct tp_pin **out);
void tp__pin_release(struct tp_pin *pin);

/* mr.c: registration and deregistration, for the public calls (api/mr.c,
 * which checks their arguments) and the library's own buffers (staging,
 * receives ahead, the control channel's frames, drain buffers).  register:
 * flags TCPX_P2P_MR_*; deregister: EBUSY while transfers hold mr. */
int tp__mr_register(struct tcpx_p2p_session *s, void *ptr, size_t len, int mem_type,
		    unsigned flags, struct tcpx_p2p_mr **out);
int tp__mr_deregister(struct tcpx_p2p_mr *mr);
/* The plugin handle of mr on cm's comm, registering it on first use. */
int tp__mr_handle_slow(struct tcpx_p2p_mr *mr, struct tp_comm *cm, void **mhandle);
static inline int tp__mr_handle(struct tcpx_p2p_mr *mr, struct tp_comm *cm, void **mhandle)
{
	/* Ids, not pointers: a new region may reuse a freed one's address. */
	if (cm->mr_cached == mr->id) {
		*mhandle = cm->mh_cached;
		return 0;
	}
	return tp__mr_handle_slow(mr, cm, mhandle);
}
void tp__mr_drop_comm(struct tcpx_p2p_session *s, void *comm);
/* The registered region with this id, or NULL (s->lock held). */
struct tcpx_p2p_mr *tp__mr_find(const struct tcpx_p2p_session *s, uint64_t id);
int tp__land_create(struct tcpx_p2p_session *s, size_t bytes, char **land,
		    struct tcpx_p2p_mr **mr);
void tp__land_destroy(char *land, struct tcpx_p2p_mr *mr);

#endif
