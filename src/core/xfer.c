/* Transfers: posting, completion and waiting. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/conn.h"
#include "core/cq.h"
#include "core/ctl.h"
#include "core/engine.h"
#include "core/gate.h"
#include "core/items/items.h"
#include "core/pass.h"
#include "core/pipeline/comm.h"
#include "core/pipeline/devq.h"
#include "core/pipeline/stream.h"
#include "core/pipeline/vec.h"
#include "core/session.h"
#include "core/stats.h"
#include "core/xfer.h"
#include "util/error.h"
#include "util/timeline.h"

struct tcpx_p2p_xfer *tp__xfer_new(enum tp_op op, enum tp_dir dir)
{
	struct tcpx_p2p_xfer *x = calloc(1, sizeof(*x));

	if (x) {
		x->op = op;
		x->dir = dir;
		x->t_post = x->t_moved = tp__now_ns();
	}
	return x;
}

void tp__xfer_free(struct tcpx_p2p_xfer *x)
{
	tp__cq_forget(x); /* never left queued for completions to hand out */
	tp__segs_free(x);
	free(x);
}

void tp__xfer_complete(struct tcpx_p2p_conn *c, struct tcpx_p2p_xfer *x, int err)
{
	if (x->state == TP_XS_DONE) /* failed with its conn already: its regions stay held */
		return;
	tp__segs_put(c->s, x);
	if (tp_op_internal(x->op)) {
		tp__stats_xfer_end(c, x, err);
		c->inbound--;
		tp__items_end(c, x);
		tp__xfer_free(x);
		return;
	}
	if (!x->err)
		x->err = err;
	if (x->dir == TP_RECV && tp__ctl_owes(c)) {
		tp__xfer_move(c, x, TP_XS_SETTLING);
		return;
	}
	tp__xfer_mark_done(c, x);
	c->completed++;
}

void tp__xfer_settle(struct tcpx_p2p_conn *c)
{
	struct tcpx_p2p_xfer *x;

	if (!c->settling.head || tp__ctl_owes(c))
		return;
	while ((x = c->settling.head)) {
		tp__xfer_mark_done(c, x);
		c->completed++;
	}
}

void tp__xfer_chunks_done(struct tcpx_p2p_conn *c, struct tcpx_p2p_xfer *x)
{
	if (x->state == TP_XS_STREAMING_UNANSWERED) {
		tp__xfer_move(c, x, TP_XS_UNANSWERED); /* the answer completes it */
		return;
	}
	tp__xfer_complete(c, x, 0);
}

uint64_t tp__params_user_data(const tcpx_p2p_xfer_params *p)
{
	if (!p || p->struct_size < offsetof(tcpx_p2p_xfer_params, user_data) + sizeof(p->user_data))
		return 0;
	return p->user_data;
}

void *tp__params_event(const tcpx_p2p_xfer_params *p)
{
	/* Read only where the caller's struct has it (0.10). */
	if (!p || p->struct_size < offsetof(tcpx_p2p_xfer_params, event) + sizeof(p->event))
		return NULL;
	return p->event;
}

int tp__params_check(const tcpx_p2p_xfer_params *p, bool notif_ok, const char *what,
		     void **event)
{
	if (event)
		*event = tp__params_event(p);
	if (!p)
		return 0;
	if (p->struct_size < offsetof(tcpx_p2p_xfer_params, notif_len) + sizeof(p->notif_len))
		return tp__error(TCPX_P2P_EINVAL, "%s: params.struct_size %zu (set it to "
				 "sizeof(tcpx_p2p_xfer_params))", what, p->struct_size);
	if (p->flags)
		return tp__error(TCPX_P2P_EINVAL, "%s: unknown flags 0x%x", what, p->flags);
	if (!p->notif && !p->notif_len)
		return 0;
	if (!notif_ok)
		return tp__error(TCPX_P2P_EINVAL, "%s takes no notification", what);
	if (!p->notif || !p->notif_len || p->notif_len > TCPX_P2P_NOTIF_LIMIT)
		return tp__error(TCPX_P2P_EINVAL, "%s: notification of %zu bytes (1..%d, "
				 "non-NULL)", what, p->notif_len, TCPX_P2P_NOTIF_LIMIT);
	return 0;
}
