/* Flow steering and the bounce buffers: the rules the plugin installs
 * through the RxDM, which flow's bytes the simulated NIC writes into which
 * GPU's bounce buffer, and those buffers, made on first use. */
#ifndef TCPXSIM_STEER_H
#define TCPXSIM_STEER_H

#include "bounce.h"
#include "rxdm.h"
#include "sock.h"

#pragma GCC visibility push(hidden)

/* Which bounce buffer the NIC writes this socket's bytes into: the one of
 * the GPU a rule names for its flow (peer -> us), or none: the flow is not
 * steered and its bytes arrive as ordinary data.  Called with s->lock held. */
struct sim_bounce *sim_steer(int fd, struct sock *s);

/* Whether any rule is installed now (no lock). */
int sim_rules_exist(void);

/* What the RxDM thread calls: a GPU's bounce buffer, a rule's install or
 * removal. */
extern const struct rxdm_ops sim_rxdm_ops;

#pragma GCC visibility pop

#endif
