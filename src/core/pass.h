/* One progress pass over one connection (pass.c): the control channel, the
 * item protocol, every stage of every data channel, and what their
 * completions finish; a failed or closing connection's pass is its close
 * (close/). */
#ifndef TP_CORE_PASS_H
#define TP_CORE_PASS_H

#include <stdbool.h>

struct tcpx_p2p_conn;

/* What a pass (of one conn, or of a whole session: engine.c) found. */
struct tp_pass_result {
	bool moved;   /* some stage advanced */
	bool pending; /* a test could still hand requests over, or an unpack runs:
		       * the caller should come back at once, not sleep */
	bool busy;    /* transfers are pending at all */
	bool conns;   /* engine pass: the session has connections (peers may announce work) */
};

/* One pass over c (its lock held), on the session's GPU: 0, or the error
 * that failed c (sticky in c->err). */
int tp__pass_conn(struct tcpx_p2p_conn *c, struct tp_pass_result *st);

#endif
