/* A connection without a plugin, for tests that feed its control channel
 * directly (tests/core/test_rma_bounds.c, tests/fuzz/fuzz_ctl.c): two
 * channels of 64 KiB chunks and small peer_max_* bounds (64 items, 4,096
 * segments, 16 notifications, 1 MiB of control bytes).  Nothing is ever
 * sent: the answers stay in ctl->out for the test to read. */
#ifndef TP_TEST_BARE_CONN_H
#define TP_TEST_BARE_CONN_H

#include <pthread.h>
#include <stddef.h>

#include "core/conn.h"
#include "core/ctl.h"
#include "core/items/items.h"
#include "core/mr.h"
#include "core/pipeline/comm.h"
#include "core/pipeline/vec.h"
#include "core/session.h"
#include "core/xfer.h"

/* s, c, comms[4] and ctl zeroed by the caller; mrs[i] (ptr, len and type
 * filled in) become the session's regions, with ids 1..n. */
static inline void tp_bare_conn_init(struct tcpx_p2p_session *s, struct tcpx_p2p_conn *c,
				     struct tp_comm comms[4], struct tp_ctl *ctl,
				     struct tcpx_p2p_mr **mrs, size_t n)
{
	s->cfg.chunk_bytes = 64 << 10;
	s->cfg.chunks_per_channel = 1;
	s->cfg.num_channels = 2;
	s->cfg.peer_max_items = 64;
	s->cfg.peer_max_segments = 4096;
	s->cfg.peer_max_notifs = 16;
	s->cfg.notif_max_bytes = 4096; /* a notification may count up to 4 of the 16 */
	s->cfg.peer_max_ctl_bytes = 1 << 20;
	pthread_mutex_init(&s->lock, NULL);
	pthread_mutex_init(&s->notif_lock, NULL);
	for (size_t i = 0; i < n; i++) {
		mrs[i]->s = s;
		mrs[i]->id = (uint64_t)i + 1;
	}
	s->mrs = mrs;
	s->nmrs = s->mrs_cap = n;
	c->s = s;
	c->nchan = 2;
	c->send = &comms[0];
	c->recv = &comms[2];
	c->ctl = ctl;
	pthread_mutex_init(&c->lock, NULL);
}

#endif
