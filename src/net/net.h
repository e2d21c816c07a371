/* The internal, version-independent view of an NCCL net plugin ("net ops").
 * One adapter per plugin ABI version (plugin_v5.c .. plugin_v12.c) fills a
 * tp_net_ops table; everything above src/net/ calls only these.  Every op
 * returns 0 or a TCPX_P2P_E* code; an empty slot in the plugin's table
 * answers TCPX_P2P_ENOTSUP.  ncclResult_t is translated in tp__net_err only. */
#ifndef TP_NET_NET_H
#define TP_NET_NET_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "abi/nccl_net.h"

struct tp_net_props {
	char name[64];
	char pci_path[256];
	uint64_t guid;
	int ptr_support; /* NCCL_PTR_* */
	int reg_is_global;
	int speed;
	int port;
	float latency;
	int max_comms;
	int max_recvs;
	int dev_type;    /* ncclNetDeviceType; HOST before v7 */
	int dev_version;
	/* v9+; before v9: 0, 0 (no limit), 0, NCCL_NET_ID_UNDEF twice. */
	int force_flush;
	size_t max_p2p_bytes;
	int max_multi_request; /* v11+; 1 before */
	int rail_id;           /* v12+ */
	int plane_id;
};

struct tp_net;

struct tp_net_ops {
	/* Called by the loader: once per process up to v10, once per session
	 * (net->ctx) from v11 on, with finalize at the session's end. */
	int (*init)(struct tp_net *net, ncclDebugLogger_t log);
	void (*finalize)(struct tp_net *net);
	int (*devices)(struct tp_net *net, int *ndev);
	int (*get_properties)(struct tp_net *net, int dev, struct tp_net_props *props);
	int (*listen)(struct tp_net *net, int dev, void *handle, void **listen_comm);
	/* May leave *send_comm NULL (not ready): call again with the same handle. */
	int (*connect)(struct tp_net *net, int dev, void *handle, void **send_comm);
	/* May leave *recv_comm NULL.  dev_handle is caller-owned storage, passed
	 * to v7+ plugins; older ones leave it zeroed. */
	int (*accept)(struct tp_net *net, void *listen_comm, void **recv_comm,
		      ncclNetDeviceHandle_v7_t *dev_handle);
	/* EINVAL when size does not fit the plugin's int size (before v8). */
	int (*reg_mr)(struct tp_net *net, void *comm, void *data, size_t size, int type,
		      void **mhandle);
	int (*dereg_mr)(struct tp_net *net, void *comm, void *mhandle);
	/* May leave *request NULL (not ready): retry later.  *request is set
	 * to NULL before the plugin sees it (v9+ read flags from it). */
	int (*isend)(struct tp_net *net, void *send_comm, void *data, size_t size, int tag,
		     void *mhandle, void **request);
	int (*irecv)(struct tp_net *net, void *recv_comm, void *data, size_t size, int tag,
		     void *mhandle, void **request);
	/* *size: the bytes the plugin says the request moved, or
	 * TP_NET_SIZE_UNKNOWN where it did not say (TCPX never does). */
	int (*test)(struct tp_net *net, void *request, int *done, int *size);
	/* No-op (0) before v7, where receives end at test. */
	int (*irecv_consumed)(struct tp_net *net, void *recv_comm, void *request);
	int (*close_send)(struct tp_net *net, void *send_comm);
	int (*close_recv)(struct tp_net *net, void *recv_comm);
	int (*close_listen)(struct tp_net *net, void *listen_comm);
};

/* test() left the size alone: the plugin does not report sizes. */
#define TP_NET_SIZE_UNKNOWN (-1)

/* What one session holds of a plugin: tp__net_load gives every caller its
 * own, over a plugin file loaded once per process. */
struct tp_net {
	const struct tp_net_ops *ops;
	const void *table;  /* the plugin's ncclNet_vN_t */
	int abi;            /* N */
	const char *name;   /* the plugin's own name */
	void *dl;           /* dlopen handle */
	char path[PATH_MAX];
	void *ctx;          /* v11+: what init returned for this session */
	/* Requests the library may keep outstanding per comm (docs/configuration.md,
	 * "Windows"): NCCL's promise for the ABI, lowered to what the plugin
	 * is known to take. */
	int max_requests;
	/* Loaded by the search as its last resort, the bundled emulator:
	 * tried says what came before and why it was not used. */
	int fallback;
	char tried[2048];
	struct tp_net_file *file; /* the loader's record of the file */
};

extern const struct tp_net_ops tp__net_ops_v5, tp__net_ops_v6, tp__net_ops_v7, tp__net_ops_v8,
	tp__net_ops_v9, tp__net_ops_v10, tp__net_ops_v11, tp__net_ops_v12;

/* Translate a plugin result into a TCPX_P2P_E* code and record the detail
 * ("<plugin> <op>: <what>").  The one place ncclResult_t is interpreted. */
int tp__net_fail(const struct tp_net *net, const char *op, ncclResult_t r);
static inline int tp__net_err(const struct tp_net *net, const char *op, ncclResult_t r)
{
	return r == ncclSuccess ? 0 : tp__net_fail(net, op, r);
}

/* Load a plugin for one session.  explicit_path non-empty: only that file.
 * Otherwise the search order of docs/configuration.md: NCCL_NET_PLUGIN
 * when set, else the places TCPX is installed, then libnccl-net.so on the
 * library path; the bundled emulator beside this library last, unless
 * require (TCPX_P2P_REQUIRE_PLUGIN) forbids it.  A file is dlopen()ed once
 * per process and never closed; up to v10 its init runs once per process,
 * from v11 on once per load (and finalize at unload).
 * ENOPLUGIN: the detail names every file tried and why it failed. */
int tp__net_load(const char *explicit_path, int require, struct tp_net **out);
void tp__net_unload(struct tp_net *net);

/* Lower *send_window and *recv_window to net->max_requests (INFO when it
 * does); returns the cap. */
int tp__net_cap_windows(const struct tp_net *net, int *send_window, int *recv_window);

/* Zero the in-progress connect fields (src/abi/handle_layout.h) of a
 * NCCL_NET_HANDLE_MAXSIZE-byte handle received from a peer, for the plugin
 * named `plugin`.  Returns 1 when the layout is known, else 0 (handle left
 * as it is).  *dirty_off: the first of those bytes that was non-zero, or -1;
 * a fresh handle from a peer's listen never has one. */
int tp__net_handle_scrub(const char *plugin, unsigned char *handle, int *dirty_off);
/* For known layouts, the socket and thread counts the plugin will index its
 * arrays with are in range; -1 with *bad_off at the first that is not. */
int tp__net_handle_counts(const char *plugin, const unsigned char *handle, int *bad_off);

/* File name of the bundled emulator plugin. */
#define TP_EMU_PLUGIN_FILE "libnccl-net-tcpxemu.so"

#endif
