/* The chunk stream of each direction of a connection, over its data
 * channels (stream.c): transfers cut into chunks, chunk seq on channel
 * seq % nchan (each item from the channel its sender chose), and the data
 * stages of each comm around the pipeline of comm.c: post (prepare a
 * chunk: its buffer, a gather into staging), issue, test, unpack (batched
 * over the channels), consume.
 *
 * A stage never completes a transfer itself: a transfer whose last chunk
 * retired is moved onto the caller's list `done` (through dlink), and the
 * caller (the pass) finishes it. */
#ifndef TP_CORE_STREAM_H
#define TP_CORE_STREAM_H

#include <stdbool.h>

#include "core/pipeline/comm.h"
#include "core/xfer.h"

struct tcpx_p2p_conn;

/* The channel this side's next send item starts on (announced with it). */
unsigned tp__stream_start(const struct tcpx_p2p_conn *c);
/* Cut x into chunks and give them their numbers in its direction's
 * stream, from channel x->chan0. */
void tp__stream_enqueue(struct tcpx_p2p_conn *c, struct tcpx_p2p_xfer *x);
/* Nothing on receive comm cm needs a test now: its oldest untested
 * receive was posted ahead (or there is none), every receive was handed
 * over, and this side expects nothing (no receive waits for its match, no
 * item streams in), so an idle connection's passes cost no plugin call
 * per channel. */
bool tp__stream_resting(const struct tcpx_p2p_conn *c, const struct tp_comm *cm);
/* Bind the next chunks of cm's stream to the receives posted ahead of
 * them, in order (a comm with none: nothing to do). */
int tp__stream_bind(struct tcpx_p2p_conn *c, struct tp_comm *cm, bool *moved);
/* Prepare chunks into free window slots, in stream order (post): those
 * bound first, then new ones. */
int tp__stream_post(struct tcpx_p2p_conn *c, struct tp_comm *cm, bool *moved);
/* Hand prepared chunks to the plugin in order, each once its gather is done. */
int tp__stream_issue(struct tcpx_p2p_conn *c, struct tp_comm *cm, bool *moved);
/* Test cm (comm.c); completed chunks count as heard from the peer, sends
 * retire. */
int tp__stream_test(struct tcpx_p2p_conn *c, struct tp_comm *cm, bool *moved,
		    struct tp_xlist *done);
/* Start the unpack of every tested receive of every data channel. */
int tp__stream_unpack(struct tcpx_p2p_conn *c, bool *moved);
/* Hand receives back in posting order once their unpack finished; they
 * retire (done may be NULL where no slot has a transfer: a closing conn). */
int tp__stream_consume(struct tcpx_p2p_conn *c, struct tp_comm *cm, bool *moved,
		       struct tp_xlist *done);
/* Requests the plugin has on c's data channels. */
uint32_t tp__stream_inflight(const struct tcpx_p2p_conn *c);
/* ... of which the plugin may still read or write the caller's memory. */
uint32_t tp__stream_caller_inflight(const struct tcpx_p2p_conn *c);

#endif
