/* The session's completion queue and its file descriptor (cq.c).
 *
 * Every transfer of the application's that ends (complete or failed) is
 * queued here, in the order it ended, until tcpx_p2p_completions takes it or
 * tcpx_p2p_xfer_release lets it go; an eventfd becomes readable when a
 * transfer ends or a notification arrives, and tcpx_p2p_completions clears
 * it.  Locking: cq.lock is taken after a conn's lock (an end is queued from
 * a pass) and never the other way round. */
#ifndef TP_CORE_CQ_H
#define TP_CORE_CQ_H

#include <pthread.h>
#include <stdbool.h>

#include "tcpx_p2p.h"
#include "util/list.h"

struct tcpx_p2p_session;
struct tcpx_p2p_xfer;

struct tp_cq {
	pthread_mutex_t lock;                 /* guards the list and fd's creation */
	TP_LIST(struct tcpx_p2p_xfer) ended;  /* through the xfer's clink */
	int fd;                               /* the eventfd; -1 until asked for */
	int signalled;                        /* atomic: fd written since the last clear */
};

int tp__cq_init(struct tp_cq *q);
/* At session_destroy: what is still queued is forgotten (its xfers stay the
 * caller's), the fd closed. */
void tp__cq_fini(struct tp_cq *q);
/* x (the application's) has just ended: queue it and wake the fd. */
void tp__cq_push(struct tcpx_p2p_session *s, struct tcpx_p2p_xfer *x);
/* x is being released: out of the queue if it is there. */
void tp__cq_forget(struct tcpx_p2p_xfer *x);
/* Something else the fd reports happened (a notification arrived). */
void tp__cq_wake(struct tcpx_p2p_session *s);
/* tcpx_p2p_session_fd (api/cq.c): the eventfd, made on the first call. */
int tp__cq_fd(struct tp_cq *q, int *fd);
/* tcpx_p2p_completions (api/cq.c), before it drives: read the fd and clear
 * the flag, in that order (cq.c says why). */
void tp__cq_clear(struct tp_cq *q);
/* ... and after: up to max ended transfers out of the queue into out, oldest
 * first; returns how many.  What is left keeps the fd readable. */
int tp__cq_take(struct tp_cq *q, tcpx_p2p_completion *out, int max);

#endif
