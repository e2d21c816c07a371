/* libtcpxsim.so: a user-space devmem-TCP kernel and RxDM, preloaded under
 * a TCPX plugin so that the plugin's own receive, send and RxDM code runs
 * over loopback TCP on one host.  See docs/testing.md ("The TCPX
 * simulator") for the settings and what it cannot show. */
#ifndef TCPXSIM_H
#define TCPXSIM_H

#include <stdint.h>

struct tcpxsim_stats {
	uint64_t devmem_recvs;    /* recvmsg(MSG_SOCK_DEVMEM) calls that returned data */
	uint64_t frags;           /* SCM_DEVMEM_OFFSET fragments handed out */
	uint64_t linear_bytes;    /* bytes handed out as SCM_DEVMEM_HEADER */
	uint64_t unsteered_recvs; /* devmem receives on flows no rule steers */
	uint64_t starved;         /* receives refused for want of free pages */
	uint64_t tokens_returned;
	uint64_t tokens_held;     /* now, over every socket */
	uint64_t devmem_sends;
	uint64_t completions;     /* zerocopy completion ids reported */
	uint64_t rules;           /* flow-steering rules installed now */
	uint64_t violations;      /* contract violations seen */
};

/* A snapshot of the counters (for tests that preload the simulator and
 * look the symbol up with dlsym). */
void tcpxsim_stats_get(struct tcpxsim_stats *out);

/* For the simulator's own tests: `fn` runs inside every devmem receive
 * after its first socket read, before its copies (what 0), inside every
 * devmem send between its first GPU read and its socket write (what 1),
 * and inside every devmem receive's hand-out of its fragments, after the
 * first (what 2: the socket's locks held, the page pool's not), holding
 * what the data path holds there; NULL removes it. */
void tcpxsim_set_test_hook(void (*fn)(int fd, int what));

#endif
