/* The simulator's settings: read from the environment once, when the
 * process starts (docs/testing.md lists them), and only read after. */
#ifndef TCPXSIM_SETTINGS_H
#define TCPXSIM_SETTINGS_H

#include <stddef.h>
#include <stdint.h>

#include "bounce.h"

#define SIM_MAX_GPUS 16

enum sim_steering { STEER_RULES, STEER_ALL, STEER_NONE };

struct sim_settings {
	uint32_t mss;            /* TCPXSIM_MSS */
	size_t bounce_bytes;     /* TCPXSIM_BOUNCE_MB */
	uint32_t pool_pages;     /* TCPXSIM_POOL_PAGES; 0: the whole buffer */
	enum sim_steering steering;
	uint32_t linear;         /* TCPXSIM_LINEAR */
	int poison;
	int strict;
	uint64_t tx_delay_ns;
	int on_gpu;              /* senders' registered memory is GPU memory */
	enum sim_bounce_mode bounce_mode;
	int copy_lock;           /* TCPXSIM_COPY_LOCK; 1 with a GPU bounce buffer, 0 with hostmap */
	int verbose;             /* TCPXSIM_LOG */
	int backtrace;
	char gpus[SIM_MAX_GPUS][32]; /* the PCI addresses served, first the default */
	int ngpus;
};

#pragma GCC visibility push(hidden)

extern struct sim_settings sim_cfg;

/* Fill sim_cfg from the environment; a value out of range is said and
 * replaced by its default. */
void sim_settings_read(void);
/* "GPU", "GPU-mapped host" or "host", for messages. */
const char *sim_bounce_mode_name(enum sim_bounce_mode m);

#pragma GCC visibility pop

#endif
