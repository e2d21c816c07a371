/* The simulator's state of each socket: the devmem tokens it holds, where
 * its received stream stands in packets and pages, and its zerocopy
 * completion ids.  Kept in a table by descriptor number. */
#ifndef TCPXSIM_SOCK_H
#define TCPXSIM_SOCK_H

#include <pthread.h>
#include <stdint.h>

#include "bounce.h"
#include "pool.h"

struct zc_pending {
	uint32_t id;
	uint64_t due_ns;
};

/* One socket's state.  Made once per descriptor number and never freed
 * (close resets it), so a thread that found it never reads freed memory.
 * Locks, always taken in this order: rx, then lock, then a bounce
 * buffer's pool lock, then the process-wide ones (the socket table's, the
 * rules', the registrations'); none is held across a copy or a socket
 * call but rx, which only this socket's receives take. */
struct sock {
	pthread_mutex_t rx;      /* one receive at a time, as the kernel's socket lock */
	pthread_mutex_t lock;    /* everything below but `cut` */
	int live;                /* set up since the descriptor was last closed */
	struct sim_bounce *b;    /* the buffer its flow is steered to, once known */
	struct sim_tokens tokens;
	struct sim_cut cut;      /* where its stream stands in packets and pages (rx) */
	uint64_t rules_seen;     /* the rules' generation when steering last found no rule */
	int family;
	int zerocopy;            /* SO_ZEROCOPY set */
	uint32_t zc_next;        /* next completion id */
	struct zc_pending *zc;   /* ids not yet reported, oldest first */
	uint32_t zc_head, zc_len, zc_cap;
};

#pragma GCC visibility push(hidden)

/* The socket of `fd`, made when `create`; NULL for descriptors past the
 * table (never steered). */
struct sock *sim_sock_slot(int fd, int create);
/* The socket of `fd`, made and set up (live) if need be; NULL past the
 * table.  Takes s->lock. */
struct sock *sim_sock_get(int fd);
/* close(fd): its tokens and open page go back to the pool, its state is
 * reset. */
void sim_sock_forget(int fd);
/* Once per 5 s while starved: who holds the pages of `b` (a plugin that
 * does not return its tokens, or a window larger than the buffer).  `me`
 * (its rx held) is counted as is; other sockets busy at the moment are
 * left out. */
void sim_socks_report_starved(const struct sim_bounce *b, struct sock *me);

#pragma GCC visibility pop

#endif
