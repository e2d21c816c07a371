/* A receive-datapath manager (RxDM) in a thread: the unix sockets a TCPX
 * plugin talks to for its bounce buffer and its flow-steering rules. */
#ifndef TCPXSIM_RXDM_H
#define TCPXSIM_RXDM_H

#include <stddef.h>

#include "bounce.h"
#include "pb.h"

struct rxdm_ops {
	/* The bounce buffer of `gpu`, made on first use. 0 or -errno. */
	int (*buffer)(const char *gpu, struct sim_bounce **b, char *err, size_t errlen);
	/* Install (1) or remove (0) a flow-steering rule. 0 or -errno. */
	int (*rule)(const struct rxdm_rule *rule, int install, char *err, size_t errlen);
};

struct sim_rxdm;

/* Listen under `prefix` (a directory) for the GPUs named in `gpus` and
 * serve in a thread of its own until rxdm_stop. */
int rxdm_start(const char *prefix, char (*gpus)[32], int ngpus, const struct rxdm_ops *ops,
	       struct sim_rxdm **out, char *err, size_t errlen);
void rxdm_stop(struct sim_rxdm *d);

#endif
