/* Sessions: one process + one GPU (or host memory only) + one plugin. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "core/close/close.h"
#include "core/engine.h"
#include "core/pass.h"
#include "core/pipeline/chunk.h"
#include "core/pipeline/devq.h"
#include "core/pipeline/hostcopy.h"
#include "core/session.h"
#include "core/setup/auth.h"
#include "core/setup/nics.h"
#include "core/setup/topo.h"
#include "util/config.h"
#include "util/error.h"
#include "util/log.h"

/* The devices whose PCI paths are closest to the GPU's (the NICs behind
 * its PCIe switch) into closest; their number, 0 when the GPU's path or
 * every device's is unknown (the emulator reports none). */
static int closest_devs(struct tcpx_p2p_session *s, const struct tp_net_props *props, int ndev,
			int *closest)
{
	char bus[32], gpu_path[PATH_MAX];
	const char **paths;
	int i, n = 0;

	if (tp__dev_pci_bus_id(s->cfg.gpu, bus, sizeof(bus)) ||
	    tp__topo_pci_path(bus, gpu_path, sizeof(gpu_path)))
		return 0;
	paths = calloc((size_t)ndev, sizeof(*paths));
	if (!paths)
		return 0;
	for (i = 0; i < ndev; i++)
		paths[i] = props[i].pci_path;
	n = tp__topo_closest_set(gpu_path, paths, ndev, closest, TP_MAX_NICS);
	free(paths);
	if (n)
		TP_INFO("session", "gpu %d (%s): %d net dev(s) at the least PCIe distance, first %d",
			s->cfg.gpu, bus, n, closest[0]);
	return n;
}

/*
 * The devices the session's channels are striped over: net_dev when set;
 * else TCPX_P2P_NICS over the default set, which is the devices closest to
 * the GPU by PCIe distance, else the GPUs spread evenly over the devices
 * (on A3, 8 GPUs and 4 data NICs: GPU g gets NIC g / 2, the NIC on its
 * switch: docs/tcpx.md, "Running on GCP A3"), else device 0 for a host-only session.
 */
static int pick_nics(struct tcpx_p2p_session *s, int ndev, int ngpu)
{
	struct tp_net_props *props = calloc((size_t)ndev, sizeof(*props));
	const char **names = calloc((size_t)ndev, sizeof(*names));
	int closest[TP_MAX_NICS], nclosest = 0, i, rc = 0;

	if (!props || !names) {
		rc = tp__error(TCPX_P2P_ENOMEM, "session_create: out of memory");
		goto out;
	}
	if (s->cfg.net_dev >= 0) {
		if (s->cfg.net_dev >= ndev) {
			rc = tp__error(TCPX_P2P_EINVAL, "net_dev %d but plugin %s has %d device(s)",
				       s->cfg.net_dev, s->net->name, ndev);
			goto out;
		}
		s->nics[0] = s->cfg.net_dev;
		s->nnics = 1;
		goto out;
	}
	for (i = 0; i < ndev; i++) {
		rc = s->net->ops->get_properties(s->net, i, &props[i]);
		if (rc)
			goto out;
		names[i] = props[i].name;
	}
	if (s->cfg.gpu >= 0 && ngpu > 0) {
		nclosest = closest_devs(s, props, ndev, closest);
		if (!nclosest)
			closest[nclosest++] = (int)((long)s->cfg.gpu * ndev / ngpu) % ndev;
	} else {
		closest[nclosest++] = 0;
	}
	rc = tp__nics_pick(s->cfg.nics, names, ndev, closest, nclosest, s->nics, &s->nnics);
out:
	for (i = 0; !rc && i < s->nnics; i++) {
		struct tp_net_props one;

		if (!s->net->ops->get_properties(s->net, s->nics[i], &one))
			snprintf(s->nic_name[i], sizeof(s->nic_name[i]), "%s", one.name);
	}
	free(names);
	free(props);
	return rc;
}

/* A plugin that bounces receives through pages fails a receive of more
 * than 2048 fragments (TCPX: exit(1)); refuse chunks that could need that
 * many at the path's smallest MSS. */
static int check_chunk(const struct tcpx_p2p_session *s)
{
	uint64_t frags = tp_chunk_max_frags(s->cfg.chunk_bytes, (uint64_t)s->cfg.mss);

	if (s->props.max_p2p_bytes && s->cfg.chunk_bytes > s->props.max_p2p_bytes)
		return tp__error(TCPX_P2P_EINVAL, "chunk_bytes %zu exceeds the %zu bytes per request "
				 "plugin %s takes (its maxP2pBytes): lower TCPX_P2P_CHUNK_BYTES",
				 s->cfg.chunk_bytes, s->props.max_p2p_bytes, s->net->name);
	if (s->props.dev_type != NCCL_NET_DEVICE_UNPACK || frags <= TP_UNPACK_MAX_PAGES)
		return 0;
	return tp__error(TCPX_P2P_EINVAL, "chunk_bytes %zu could need %llu fragments per "
			 "receive at MSS %d; plugin %s allows %d (lower TCPX_P2P_CHUNK_BYTES, or "
			 "raise TCPX_P2P_MSS if the path's MSS is larger)", s->cfg.chunk_bytes,
			 (unsigned long long)frags, s->cfg.mss, s->net->name, TP_UNPACK_MAX_PAGES);
}

/*
 * TCPX cuts each request into tasks of NCCL_DYNAMIC_CHUNK_SIZE bytes, one
 * socket each.  Where two tasks of one receive share a socket, the second
 * restarts the socket's list of page tokens, so irecvConsumed hands back
 * only the last task's pages: the others stay with the kernel until the
 * socket closes, and the receive buffer runs dry (seen over Google's plugin
 * under the simulator: transfers stalled after ~300 MB of 2 MiB chunks).
 * One task per request is safe however the plugin spreads tasks over
 * sockets.  Unset (0), the plugin sends nothing at all.
 */
static int fit_tcpx_chunk(struct tcpx_p2p_session *s)
{
	const char *v = getenv("NCCL_DYNAMIC_CHUNK_SIZE");
	char *end = NULL;
	long long task = v ? strtoll(v, &end, 0) : 0;
	bool tcpx = !strncmp(s->net->name, "GPUDirectTCPX", 13);
	bool set = v && *v && !*end && task > 0;

	/* The emulator keeps the rule when the variable is set (it refuses
	 * such receives), so the tests can hold the library to it. */
	if (!tcpx && !(set && !strncmp(s->net->name, "TCPXEmu", 7)))
		return 0;
	if (!set)
		return tp__error(TCPX_P2P_EINVAL, "plugin %s needs NCCL_DYNAMIC_CHUNK_SIZE (e.g. "
				 "524288, as scripts/tcpx_env.sh sets it): without it the plugin "
				 "sends nothing", s->net->name);
	if (s->cfg.chunk_bytes > (unsigned long long)task) {
		TP_INFO("session", "chunk_bytes %zu -> %lld (NCCL_DYNAMIC_CHUNK_SIZE): plugin %s "
			"returns a receive's pages only for one task per socket",
			s->cfg.chunk_bytes, task, s->net->name);
		s->cfg.chunk_bytes = (size_t)task;
	}
	return 0;
}

static int open_gpu(struct tcpx_p2p_session *s, int *ngpu)
{
	int rc = tp__dev_count(ngpu);

	if (rc)
		return rc;
	if (s->cfg.gpu < 0)
		return 0;
	if (s->cfg.gpu >= *ngpu)
		return tp__error(TCPX_P2P_ECUDA, "gpu %d requested but %d usable CUDA device(s)",
				 s->cfg.gpu, *ngpu);
	return tp__session_use_gpu(s);
}

/* The session keeps its own copy of the secret (the caller's string may
 * go away) and wipes it at the end. */
static int keep_token(struct tcpx_p2p_session *s)
{
	const char *t = s->cfg.auth_token;

	s->cfg.auth_token = NULL;
	if (tp__auth_random(&s->auth_id, sizeof(s->auth_id)) ||
	    tp__auth_random(&s->epoch, sizeof(s->epoch)))
		return TCPX_P2P_ENET;
	if (!t || !*t)
		return 0;
	s->auth_token = strdup(t);
	if (!s->auth_token)
		return tp__error(TCPX_P2P_ENOMEM, "session_create: out of memory");
	if (strlen(t) < 16)
		TP_WARN("session", "TCPX_P2P_AUTH_TOKEN is %zu bytes: use at least 16 random "
			"bytes", strlen(t));
	s->cfg.auth_token = s->auth_token;
	return 0;
}

static void drop_token(struct tcpx_p2p_session *s)
{
	if (s->auth_token) {
		OPENSSL_cleanse(s->auth_token, strlen(s->auth_token));
		free(s->auth_token);
	}
}

int tcpx_p2p_session_create(const tcpx_p2p_config *cfg, tcpx_p2p_session **out)
{
	struct tcpx_p2p_session *s;
	tcpx_p2p_config defaults;
	void *ctx = NULL;
	int ndev = 0, ngpu = 0, rc;

	tp__log_init();
	if (!out)
		return tp__error(TCPX_P2P_EINVAL, "session_create: out is NULL");
	if (!cfg) {
		rc = tp__config_init(&defaults);
		if (rc)
			return rc;
		cfg = &defaults;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return tp__error(TCPX_P2P_ENOMEM, "session_create: out of memory");
	rc = tp__config_resolve(cfg, &s->cfg);
	if (rc)
		goto free_session;
	if (s->cfg.plugin_path && s->cfg.plugin_path[0]) {
		if (strlen(s->cfg.plugin_path) >= sizeof(s->plugin_path)) {
			rc = tp__error(TCPX_P2P_EINVAL, "plugin_path longer than %zu bytes",
				       sizeof(s->plugin_path) - 1);
			goto free_session;
		}
		strcpy(s->plugin_path, s->cfg.plugin_path);
		s->cfg.plugin_path = s->plugin_path;
	} else {
		s->cfg.plugin_path = NULL;
	}
	if (s->cfg.nics) {
		if (strlen(s->cfg.nics) >= sizeof(s->nics_spec)) {
			rc = tp__error(TCPX_P2P_EINVAL, "nics longer than %zu bytes",
				       sizeof(s->nics_spec) - 1);
			goto free_session;
		}
		strcpy(s->nics_spec, s->cfg.nics);
		s->cfg.nics = s->nics_spec;
	}
	rc = keep_token(s);
	if (rc)
		goto free_session;
	ctx = tp__gpu_save(s);
	rc = open_gpu(s, &ngpu);
	if (rc)
		goto free_session;
	rc = tp__net_load(s->cfg.plugin_path, s->cfg.require_plugin, &s->net);
	if (rc)
		goto free_session;
	rc = s->net->ops->devices(s->net, &ndev);
	if (rc)
		goto unload;
	if (ndev <= 0) {
		rc = tp__error(TCPX_P2P_EPLUGIN, "plugin %s reports no network devices",
			       s->net->name);
		goto unload;
	}
	rc = pick_nics(s, ndev, ngpu);
	if (rc)
		goto unload;
	s->net_dev = s->nics[0];
	rc = s->net->ops->get_properties(s->net, s->net_dev, &s->props);
	if (rc)
		goto unload;
	tp__net_cap_windows(s->net, &s->cfg.send_window, &s->cfg.recv_window);
#if TP_TEST_HOOKS
	/* Test builds only: proves that the GPU poison tests catch a consume
	 * that does not wait for its unpack (tests/gpu/test_cuda_transfer.c). */
	s->test_early_consume = getenv("TCPX_P2P_TEST_EARLY_CONSUME") != NULL;
	if (s->test_early_consume)
		TP_WARN("session", "TCPX_P2P_TEST_EARLY_CONSUME: receives are consumed before "
			"their unpack finished; data WILL be corrupted (test use only)");
	/* A peer that ignores its notification credits, for the tests of
	 * peer_max_notifs (tests/integration/test_peer_limits.c). */
	s->test_ignore_credits = getenv("TCPX_P2P_TEST_IGNORE_CREDITS") != NULL;
	/* Receives posted only once their announcement is matched, as before
	 * receives ahead: a before/after in one binary (docs/benchmarks.md,
	 * "Timeline"). */
	s->test_no_ahead = getenv("TCPX_P2P_TEST_NO_AHEAD") != NULL;
#endif
	rc = fit_tcpx_chunk(s);
	if (!rc)
		rc = check_chunk(s);
	if (rc)
		goto unload;
	if (pthread_mutex_init(&s->lock, NULL)) {
		rc = tp__error(TCPX_P2P_ENOMEM, "session_create: mutex init failed");
		goto unload;
	}
	if (pthread_mutex_init(&s->notif_lock, NULL)) {
		rc = tp__error(TCPX_P2P_ENOMEM, "session_create: mutex init failed");
		goto destroy_lock;
	}
	if (pthread_mutex_init(&s->close_lock, NULL)) {
		rc = tp__error(TCPX_P2P_ENOMEM, "session_create: mutex init failed");
		goto destroy_notif_lock;
	}
	rc = tp__cq_init(&s->cq);
	if (rc)
		goto destroy_close_lock;
	rc = tp__engine_create(s);
	if (rc)
		goto destroy_cq;
	TP_INFO("session", "plugin %s (%s, ABI v%d) net dev %d (%s) of %d striped, gpu %d, "
		"%d channels, chunk %zu, up to %d a channel's share", s->net->name, s->net->path,
		s->net->abi, s->net_dev, s->props.name, s->nnics, s->cfg.gpu, s->cfg.num_channels,
		s->cfg.chunk_bytes, s->cfg.chunks_per_channel);
	tp__close_register(s);
	tp__dev_ctx_restore(ctx);
	*out = s;
	return 0;

destroy_cq:
	tp__cq_fini(&s->cq);
destroy_close_lock:
	pthread_mutex_destroy(&s->close_lock);
destroy_notif_lock:
	pthread_mutex_destroy(&s->notif_lock);
destroy_lock:
	pthread_mutex_destroy(&s->lock);
unload:
	tp__net_unload(s->net);
free_session:
	tp__dev_ctx_restore(ctx);
	drop_token(s);
	free(s);
	return rc;
}

int tcpx_p2p_session_destroy(tcpx_p2p_session *s)
{
	void *ctx;
	int busy;

	if (!s)
		return tp__error(TCPX_P2P_EINVAL, "session_destroy: NULL session");
	pthread_mutex_lock(&s->lock);
	busy = s->nconns || s->nlisteners || s->nservers;
	pthread_mutex_unlock(&s->lock);
	if (!busy) {
		/* Closes still under way end now (within the session's timeout);
		 * their internal regions go with them. */
		ctx = tp__gpu_save(s);
		tp__close_all(s);
		tp__dev_ctx_restore(ctx);
		pthread_mutex_lock(&s->lock);
		busy = s->nmrs != 0;
		pthread_mutex_unlock(&s->lock);
	}
	if (busy)
		return tp__error(TCPX_P2P_EBUSY,
				 "session_destroy: conns, listeners, servers or mrs remain");
	tp__close_unregister(s);
	tp__engine_destroy(s);
	tp__devq_destroy(s->devq);
	tp__hcopy_destroy(s->hcopy);
	tp__net_unload(s->net);
	tp__cq_fini(&s->cq);
	pthread_mutex_destroy(&s->close_lock);
	pthread_mutex_destroy(&s->notif_lock);
	pthread_mutex_destroy(&s->lock);
	drop_token(s);
	free(s->mrs);
	free(s);
	return 0;
}

int tcpx_p2p_session_progress(tcpx_p2p_session *s)
{
	struct tp_pass_result st;

	if (!s)
		return tp__error(TCPX_P2P_EINVAL, "session_progress: NULL session");
	tp__engine_pass(s, NULL, &st);
	return 0;
}

int tcpx_p2p_session_set_node_id(tcpx_p2p_session *s, const char *node_id)
{
	size_t n = node_id ? strlen(node_id) : 0;

	if (!s || n >= sizeof(s->node_id))
		return tp__error(TCPX_P2P_EINVAL, "session_set_node_id: NULL session, or a node id "
				 "of %zu bytes (at most %zu)", n, sizeof(s->node_id) - 1);
	for (size_t i = 0; i < n; i++)
		if (node_id[i] < 0x21 || node_id[i] > 0x7e)
			return tp__error(TCPX_P2P_EINVAL, "session_set_node_id: byte %zu of the node "
					 "id is not printable ASCII (0x%02x)", i,
					 (unsigned char)node_id[i]);
	pthread_mutex_lock(&s->lock);
	memset(s->node_id, 0, sizeof(s->node_id));
	if (n)
		memcpy(s->node_id, node_id, n);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

int tcpx_p2p_session_query(const tcpx_p2p_session *s, tcpx_p2p_session_info *info)
{
	tcpx_p2p_session_info out;
	size_t n;

	if (!s || !info || info->struct_size < sizeof(size_t))
		return tp__error(TCPX_P2P_EINVAL, "session_query: NULL argument or struct_size");
	n = info->struct_size < sizeof(out) ? info->struct_size : sizeof(out);
	out.struct_size = n;
	out.plugin_path = s->net->path;
	out.plugin_name = s->net->name;
	out.plugin_abi = s->net->abi;
	out.net_dev = s->net_dev;
	out.gpu = s->cfg.gpu;
	out.nnics = s->nnics;
	for (int i = 0; i < TCPX_P2P_MAX_NICS; i++) {
		out.nic[i] = i < s->nnics ? s->nics[i] : -1;
		out.nic_name[i] = i < s->nnics ? s->nic_name[i] : NULL;
	}
	out.unpack = s->cfg.unpack;
	out.chunk_bytes = s->cfg.chunk_bytes;
	out.plugin_fallback = s->net->fallback;
	out.plugin_tried = s->net->tried;
	out.send_window = s->cfg.send_window;
	out.recv_window = s->cfg.recv_window;
	out.conns_closing = (int)__atomic_load_n(&s->nclosing, __ATOMIC_ACQUIRE);
	out.unclean_closes = __atomic_load_n(&s->unclean_closes, __ATOMIC_RELAXED);
	memcpy(info, &out, n);
	return 0;
}
