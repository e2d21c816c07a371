/* A session: one process + one GPU (or host memory only) + one plugin
 * (session.c; gpu.c makes its GPU current). */
#ifndef TP_CORE_SESSION_H
#define TP_CORE_SESSION_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/cq.h"
#include "core/setup/nics.h"
#include "device/tp_device.h"
#include "net/net.h"
#include "tcpx_p2p.h"
#include "util/list.h"

struct tp_devq;
struct tp_engine;
struct tp_hcopy;
struct tp_notif_node;
struct tcpx_p2p_conn;
struct tcpx_p2p_mr;

struct tcpx_p2p_session {
	tcpx_p2p_config cfg;
	char plugin_path[PATH_MAX]; /* cfg.plugin_path points here when set */
	struct tp_net *net;
	int net_dev;                  /* nics[0] */
	int nics[TP_MAX_NICS];        /* channel i of a conn uses nics[i % nnics] */
	int nnics;
	char nic_name[TP_MAX_NICS][64];
	char nics_spec[256];          /* cfg.nics points here when set */
	struct tp_net_props props;
	struct tp_devq *devq;         /* the device queue (devq.c); NULL until needed */
	struct tp_hcopy *hcopy;       /* host copy threads; NULL until needed */
#if TP_TEST_HOOKS
	bool test_early_consume;      /* consume before the unpack ends (test builds only) */
	bool test_ignore_credits;     /* send notifications past the peer's credits (ditto) */
	bool test_no_ahead;           /* post no receive ahead of its announcement (ditto) */
#endif
	struct tp_engine *engine;     /* session-wide progress (engine.c) */
	pthread_mutex_t lock;         /* guards the lists and counts below */
	/* Registered regions in ascending id order (ids only grow, so a new
	 * one is appended): a peer's export names a region by id, looked up
	 * by binary search whatever the count (tp__mr_find). */
	struct tcpx_p2p_mr **mrs;
	size_t nmrs, mrs_cap;
	uint64_t mr_ids;              /* last region id handed out */
	int nconns, nlisteners, nservers;
	char *auth_token;             /* cfg.auth_token points here when set */
	pthread_mutex_t notif_lock;   /* guards the delivered notifications */
	struct tp_notif_node *notifs, *notifs_tail;
	uint64_t notif_polls;         /* notif_poll calls so far (notif.c; notif_lock) */
	struct tp_cq cq;              /* ended transfers and the session fd (cq.c) */
	uint64_t auth_id;             /* random: tells a connection to oneself */
	uint64_t epoch;               /* random: this session's incarnation, in its blobs */
	/* tcpx_p2p_session_set_node_id: its stable identity, in its blobs ("":
	 * none); under lock */
	char node_id[32];
	/* Connections the caller destroyed whose close handshake still runs
	 * (close/list.c), through elink; nclosing is also read without the lock. */
	pthread_mutex_t close_lock;
	TP_LIST(struct tcpx_p2p_conn) closing;
	unsigned nclosing;
	uint64_t unclean_closes;      /* comms closed with requests posted (atomic) */
	TP_LINK(struct tcpx_p2p_session) slink; /* the process's sessions (close/sessions.c) */
	unsigned drivers;             /* other threads' closes driving it (close/sessions.c's lock) */
};

/* Make the session's GPU current on this thread before a plugin or CUDA
 * call that picks its device with cudaGetDevice (docs/tcpx.md, plugin
 * contract rule 3).  Asked of CUDA every time rather than cached per
 * thread: the application may switch the thread's device between calls. */
static inline int tp__session_use_gpu(const struct tcpx_p2p_session *s)
{
	return s->cfg.gpu < 0 ? 0 : tp__dev_set(s->cfg.gpu);
}
/* The calling thread's CUDA context is the application's: a public call
 * that may select the session's GPU saves it on entry (NULL for a
 * host-memory session: no CUDA call at all) and gives it back with
 * tp__dev_ctx_restore before returning. */
static inline void *tp__gpu_save(const struct tcpx_p2p_session *s)
{
	return s && s->cfg.gpu >= 0 ? tp__dev_ctx_save() : NULL;
}
/* timeout_ms, or the session's configured one for TCPX_P2P_TIMEOUT_DEFAULT. */
static inline int tp__session_timeout(const struct tcpx_p2p_session *s, int timeout_ms)
{
	return timeout_ms == TCPX_P2P_TIMEOUT_DEFAULT ? s->cfg.timeout_ms : timeout_ms;
}

#endif
