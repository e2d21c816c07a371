/* Segment lists of a transfer and the comms' staging slots (vec.c). */
#ifndef TP_CORE_VEC_H
#define TP_CORE_VEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/pipeline/comm.h"
#include "tcpx_p2p.h"

struct tcpx_p2p_conn;
struct tcpx_p2p_mr;
struct tcpx_p2p_session;
struct tcpx_p2p_xfer;

int tp__segs_build(struct tcpx_p2p_conn *c, struct tcpx_p2p_xfer *x, const tcpx_p2p_seg *segs,
		   size_t n, const char *what);
void tp__segs_free(struct tcpx_p2p_xfer *x);
/* A prepared list's segments (prepared.c): share makes x's list one that
 * copy hands on without copying it (refcounted, read-only; 0 or ENOMEM);
 * copy gives x from's segments and regions (from's holds stay its own):
 * a post of the list.  0 or ENOMEM (x's arrays freed). */
int tp__segs_share(struct tcpx_p2p_xfer *x);
int tp__segs_copy(struct tcpx_p2p_xfer *x, const struct tcpx_p2p_xfer *from);
/* Room for n held regions (x->held). */
int tp__held_alloc(struct tcpx_p2p_xfer *x, size_t n);
/* Take and drop x's holds on its regions (x->held). */
void tp__segs_get(struct tcpx_p2p_session *s, struct tcpx_p2p_xfer *x);
void tp__segs_put(struct tcpx_p2p_session *s, struct tcpx_p2p_xfer *x);
/* The address of stream range [o, o + n) when it lies in one segment. */
char *tp__seg_single(const struct tcpx_p2p_xfer *x, size_t o, size_t n, struct tcpx_p2p_mr **mr);
/* The copies of a multi-segment chunk: gather (segments -> flat) or
 * scatter (flat -> segments), or a scatter of the bounce records; done at
 * once when now is set, else listed in sl->cp (*n entries). */
int tp__vec_copies(struct tcpx_p2p_session *s, const struct tcpx_p2p_xfer *x, struct tp_slot *sl,
		   bool gather, char *flat, bool now, uint32_t *n);
int tp__vec_copies_recs(struct tcpx_p2p_session *s, const struct tcpx_p2p_xfer *x,
			struct tp_slot *sl, const struct tp_meta_view *v, const char *bounce,
			bool now, uint32_t *n);
/* A staging slot of the memory type (1: none free now). */
int tp__stage_take(struct tcpx_p2p_session *s, struct tp_comm *cm, int mtype, char **slot,
		   struct tcpx_p2p_mr **mr);
void tp__stage_give(struct tp_comm *cm, const char *slot);
void tp__stage_free(struct tcpx_p2p_session *s, struct tp_comm *cm);

#endif
