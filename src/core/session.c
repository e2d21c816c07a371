/* Sessions: one process + one GPU (or host memory only) + one plugin. */
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "core/auth.h"
#include "core/core.h"
#include "core/topo.h"
#include "util/config.h"
#include "util/error.h"
#include "util/log.h"

/* Asks CUDA every time rather than caching per thread: the application may
 * switch the thread's device between our calls. */
int tp__session_use_gpu(struct tcpx_p2p_session *s)
{
	return s->cfg.gpu < 0 ? 0 : tp__dev_set(s->cfg.gpu);
}

/* The plugin device whose PCI path is closest to the GPU's (the NIC behind
 * the same PCIe switch), or -1 when either path is unknown (the emulator
 * reports none). */
static int closest_net_dev(struct tcpx_p2p_session *s, int ndev)
{
	char bus[32], gpu_path[PATH_MAX];
	struct tp_net_props props;
	const char **paths;
	char (*store)[sizeof(props.pci_path)];
	int i, best = -1;

	if (tp__dev_pci_bus_id(s->cfg.gpu, bus, sizeof(bus)) ||
	    tp__topo_pci_path(bus, gpu_path, sizeof(gpu_path)))
		return -1;
	paths = calloc((size_t)ndev, sizeof(*paths));
	store = calloc((size_t)ndev, sizeof(*store));
	if (paths && store) {
		for (i = 0; i < ndev; i++) {
			if (s->net->ops->get_properties(s->net, i, &props))
				continue;
			memcpy(store[i], props.pci_path, sizeof(store[i]));
			paths[i] = store[i];
		}
		best = tp__topo_closest(gpu_path, paths, ndev);
	}
	free(store);
	free(paths);
	if (best >= 0)
		TP_INFO("session", "gpu %d (%s) -> net dev %d by PCIe distance", s->cfg.gpu, bus,
			best);
	return best;
}

/* Configured, else by PCIe distance, else GPUs spread evenly over the
 * devices: on A3 (8 GPUs, 4 data NICs) GPU g gets NIC g / 2, the NIC on
 * its switch (DESIGN §11) — right when all GPUs are visible. */
static int pick_net_dev(struct tcpx_p2p_session *s, int ndev, int ngpu)
{
	int dev;

	if (s->cfg.net_dev >= 0)
		return s->cfg.net_dev;
	if (s->cfg.gpu < 0 || ngpu <= 0)
		return 0;
	dev = closest_net_dev(s, ndev);
	if (dev >= 0)
		return dev;
	return (int)((long)s->cfg.gpu * ndev / ngpu) % ndev;
}

/* A plugin that bounces receives through pages fails a receive of more
 * than 2048 fragments (TCPX: exit(1)); refuse chunks that could need that
 * many at the path's smallest MSS. */
static int check_chunk(const struct tcpx_p2p_session *s)
{
	uint64_t frags = tp_chunk_max_frags(s->cfg.chunk_bytes, (uint64_t)s->cfg.mss);

	if (s->props.dev_type != NCCL_NET_DEVICE_UNPACK || frags <= TP_UNPACK_MAX_PAGES)
		return 0;
	return tp__error(TCPX_P2P_EINVAL, "chunk_bytes %zu could need %llu fragments per "
			 "receive at MSS %d; plugin %s allows %d (lower TCPX_P2P_CHUNK_BYTES, or "
			 "raise TCPX_P2P_MSS if the path's MSS is larger)", s->cfg.chunk_bytes,
			 (unsigned long long)frags, s->cfg.mss, s->net->name, TP_UNPACK_MAX_PAGES);
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
	if (tp__auth_random(&s->auth_id, sizeof(s->auth_id)))
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
	int ndev = 0, ngpu = 0, rc;

	tp__log_init();
	if (!out)
		return tp__error(TCPX_P2P_EINVAL, "session_create: out is NULL");
	if (!cfg) {
		rc = tcpx_p2p_config_init(&defaults);
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
	rc = keep_token(s);
	if (rc)
		goto free_session;
	rc = open_gpu(s, &ngpu);
	if (rc)
		goto free_session;
	rc = tp__net_load(s->cfg.plugin_path, &s->net);
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
	s->net_dev = pick_net_dev(s, ndev, ngpu);
	if (s->net_dev >= ndev) {
		rc = tp__error(TCPX_P2P_EINVAL, "net_dev %d but plugin %s has %d device(s)",
			       s->net_dev, s->net->name, ndev);
		goto unload;
	}
	rc = s->net->ops->get_properties(s->net, s->net_dev, &s->props);
	if (rc)
		goto unload;
#if TP_TEST_HOOKS
	/* Test builds only: proves that the GPU poison tests catch a consume
	 * that does not wait for its unpack (tests/gpu/test_cuda_transfer.c). */
	s->test_early_consume = getenv("TCPX_P2P_TEST_EARLY_CONSUME") != NULL;
	if (s->test_early_consume)
		TP_WARN("session", "TCPX_P2P_TEST_EARLY_CONSUME: receives are consumed before "
			"their unpack finished; data WILL be corrupted (test use only)");
#endif
	rc = check_chunk(s);
	if (rc)
		goto unload;
	if (pthread_mutex_init(&s->lock, NULL)) {
		rc = tp__error(TCPX_P2P_ENOMEM, "session_create: mutex init failed");
		goto unload;
	}
	rc = tp__engine_create(s);
	if (rc)
		goto destroy_lock;
	TP_INFO("session", "plugin %s (%s, ABI v%d) net dev %d (%s), gpu %d, %d channels, "
		"chunk %zu", s->net->name, s->net->path, s->net->abi, s->net_dev,
		s->props.name, s->cfg.gpu, s->cfg.num_channels, s->cfg.chunk_bytes);
	*out = s;
	return 0;

destroy_lock:
	pthread_mutex_destroy(&s->lock);
unload:
	tp__net_unload(s->net);
free_session:
	drop_token(s);
	free(s);
	return rc;
}

int tcpx_p2p_session_destroy(tcpx_p2p_session *s)
{
	int busy;

	if (!s)
		return tp__error(TCPX_P2P_EINVAL, "session_destroy: NULL session");
	pthread_mutex_lock(&s->lock);
	busy = s->nconns || s->nlisteners || s->nservers || s->mrs;
	pthread_mutex_unlock(&s->lock);
	if (busy)
		return tp__error(TCPX_P2P_EBUSY,
				 "session_destroy: conns, listeners, servers or mrs remain");
	tp__engine_destroy(s);
	tp__unpacker_destroy(s->unpacker);
	tp__net_unload(s->net);
	pthread_mutex_destroy(&s->lock);
	drop_token(s);
	free(s);
	return 0;
}

int tcpx_p2p_session_progress(tcpx_p2p_session *s)
{
	struct tp_progress st;

	if (!s)
		return tp__error(TCPX_P2P_EINVAL, "session_progress: NULL session");
	tp__engine_pass(s, NULL, &st);
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
	out.unpack = s->cfg.unpack;
	memcpy(info, &out, n);
	return 0;
}
