/* The progress engine's state, shared by engine.c (passes, completions,
 * the conn lists, statistics) and engine_thread.c (its creation, its
 * threads, its end); nothing else sees it. */
#ifndef TP_CORE_ENGINE_STATE_H
#define TP_CORE_ENGINE_STATE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "core/conn.h"
#include "core/stats.h"
#include "util/list.h"
#include "util/time.h"

struct tp_engine {
	pthread_rwlock_t list_lock;
	TP_LIST(struct tcpx_p2p_conn) conns; /* through elink */
	unsigned nconns;
	/* Destroyed conns no pass reaches any more whose counters are not
	 * folded into gone yet (conn_destroy between the two). */
	TP_LIST(struct tcpx_p2p_conn) leaving; /* through elink */
	unsigned nleaving;
	unsigned rr; /* where the next pass starts (fairness) */
	/* The counters of the conns removed so far (stats.c), and how many. */
	struct tp_stats gone;
	int ngone;

	/* Completion notices for waiters while the thread progresses. */
	pthread_mutex_t done_lock;
	pthread_cond_t done_cv;
	uint64_t completions;

	/* The progress thread (TCPX_P2P_PROGRESS_THREAD), or else, with
	 * heartbeats on, the keepalive thread; tid is the one that runs. */
	bool threaded;
	bool keepalive;
	pthread_t tid;
	pid_t pid; /* the process that started it */
	int64_t last_pass_ns; /* when a pass last started (atomic) */
	pthread_mutex_t work_lock;
	pthread_cond_t work_cv;
	bool stop;
	uint64_t kicks; /* posts seen; the thread sleeps only when idle */
};

#endif
