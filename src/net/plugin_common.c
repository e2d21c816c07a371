/* What the per-version adapters share: result translation, property
 * conversion, and the calls whose signature every ABI version has in common. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "net/plugin_common.h"
#include "util/error.h"
#include "util/log.h"

/*
 * Set-up calls (listen, connect, accept, regMr, deregMr) go to a plugin of
 * ABI v7 or later one at a time in the process.  TCPX keeps per-GPU state
 * that it creates lazily and unlocked: two accepts completing at once in
 * two threads each import the GPU's receive buffer, and the second import
 * unmaps the first, whose address the first comm's device handle already
 * carries (seen over Google's plugin: that comm's unpack then reads
 * unmapped memory).  These calls return at once on such plugins (NCCL has
 * required connect and accept to be non-blocking since then), so the lock
 * costs nothing; the data path is not under it.  Older plugins may block
 * in accept until the peer connects (google/nccl-fastsocket does): with
 * both peers in one process the lock would deadlock them, so their calls
 * are not serialised.
 */
static pthread_mutex_t tp_setup_lock = PTHREAD_MUTEX_INITIALIZER;

#define SETUP_CALL(net, call)                                   \
	({                                                      \
		bool tp__l = (net)->abi >= 7;                   \
		if (tp__l)                                      \
			pthread_mutex_lock(&tp_setup_lock);     \
		ncclResult_t tp__r = (call);                    \
		if (tp__l)                                      \
			pthread_mutex_unlock(&tp_setup_lock);   \
		tp__r;                                          \
	})

static const char *const tp_nccl_result_names[] = {
	[ncclSuccess] = "ncclSuccess",
	[ncclUnhandledCudaError] = "ncclUnhandledCudaError",
	[ncclSystemError] = "ncclSystemError",
	[ncclInternalError] = "ncclInternalError",
	[ncclInvalidArgument] = "ncclInvalidArgument",
	[ncclInvalidUsage] = "ncclInvalidUsage",
	[ncclRemoteError] = "ncclRemoteError",
	[ncclInProgress] = "ncclInProgress",
};

#define TP_NRESULTS (sizeof(tp_nccl_result_names) / sizeof(tp_nccl_result_names[0]))

const char *tp__net_result_name(ncclResult_t r)
{
	/* Plugins built against newer NCCL may return values we do not know. */
	if ((unsigned int)r >= TP_NRESULTS)
		return "unknown ncclResult_t";
	return tp_nccl_result_names[r];
}

int tp__net_fail(const struct tp_net *net, const char *op, ncclResult_t r)
{
	int code;

	switch (r) {
	case ncclUnhandledCudaError:
		code = TCPX_P2P_ECUDA;
		break;
	case ncclSystemError:
		code = TCPX_P2P_ENET;
		break;
	case ncclInvalidArgument:
		code = TCPX_P2P_EINVAL;
		break;
	case ncclRemoteError:
		code = TCPX_P2P_ECLOSED;
		break;
	case ncclInProgress:
		code = TCPX_P2P_EAGAIN;
		break;
	case ncclInternalError:
	case ncclInvalidUsage:
	default:
		code = TCPX_P2P_EPLUGIN;
		break;
	}
	return tp__error(code, "%s %s: %s (%d)", net->name, op, tp__net_result_name(r), (int)r);
}

int tp__net_unsupported(const struct tp_net *net, const char *op)
{
	return tp__error(TCPX_P2P_ENOTSUP, "%s: %s not supported", net->name, op);
}

/* Sizes above INT_MAX would wrap negative in the plugin's int. */
static int int_size(const struct tp_net *net, const char *op, size_t size, int *out)
{
	if (size > INT_MAX)
		return tp__error(TCPX_P2P_EINVAL,
				 "%s %s: size %zu exceeds the int limit of ABI v%d", net->name, op,
				 size, net->abi);
	*out = (int)size;
	return 0;
}

static void copy_str(char *dst, size_t len, const char *src)
{
	snprintf(dst, len, "%s", src ? src : "");
}

/* The fields every properties version shares, by name. */
#define TP_PROPS_COMMON(out, p)                                            \
	do {                                                               \
		memset((out), 0, sizeof(*(out)));                          \
		copy_str((out)->name, sizeof((out)->name), (p)->name);     \
		copy_str((out)->pci_path, sizeof((out)->pci_path), (p)->pciPath); \
		(out)->guid = (p)->guid;                                   \
		(out)->ptr_support = (p)->ptrSupport;                      \
		(out)->speed = (p)->speed;                                 \
		(out)->port = (p)->port;                                   \
		(out)->latency = (p)->latency;                             \
		(out)->max_comms = (p)->maxComms;                          \
		(out)->max_recvs = (p)->maxRecvs;                          \
		(out)->max_multi_request = 1;                              \
		(out)->rail_id = NCCL_NET_ID_UNDEF;                        \
		(out)->plane_id = NCCL_NET_ID_UNDEF;                       \
	} while (0)

void tp__net_props_v6(struct tp_net_props *out, const ncclNetProperties_v6_t *p)
{
	TP_PROPS_COMMON(out, p);
	out->dev_type = NCCL_NET_DEVICE_HOST;
	out->dev_version = NCCL_NET_DEVICE_INVALID_VERSION;
}

void tp__net_props_v7(struct tp_net_props *out, const ncclNetProperties_v7_t *p)
{
	TP_PROPS_COMMON(out, p);
	out->dev_type = p->netDeviceType;
	out->dev_version = p->netDeviceVersion;
}

void tp__net_props_v8(struct tp_net_props *out, const ncclNetProperties_v8_t *p)
{
	TP_PROPS_COMMON(out, p);
	out->reg_is_global = p->regIsGlobal;
	out->dev_type = p->netDeviceType;
	out->dev_version = p->netDeviceVersion;
}

/* The fields v9 added, by name; v10..v12 keep them. */
#define TP_PROPS_V9(out, p)                                                \
	do {                                                               \
		TP_PROPS_COMMON(out, p);                                   \
		(out)->reg_is_global = (p)->regIsGlobal;                   \
		(out)->dev_type = (p)->netDeviceType;                      \
		(out)->dev_version = (p)->netDeviceVersion;                \
		(out)->force_flush = (p)->forceFlush;                      \
		(out)->max_p2p_bytes = (p)->maxP2pBytes;                   \
	} while (0)

void tp__net_props_v9(struct tp_net_props *out, const ncclNetProperties_v9_t *p)
{
	TP_PROPS_V9(out, p);
}

void tp__net_props_v11(struct tp_net_props *out, const ncclNetProperties_v11_t *p)
{
	TP_PROPS_V9(out, p);
	out->max_multi_request = p->maxMultiRequestSize;
}

void tp__net_props_v12(struct tp_net_props *out, const ncclNetProperties_v12_t *p)
{
	TP_PROPS_V9(out, p);
	out->max_multi_request = p->maxMultiRequestSize;
	out->rail_id = p->railId;
	out->plane_id = p->planeId;
}

int tp__net_devices(struct tp_net *net, tp_nccl_devices_fn fn, int *ndev)
{
	if (!fn)
		return tp__net_unsupported(net, "devices");
	return tp__net_err(net, "devices", fn(ndev));
}

int tp__net_listen(struct tp_net *net, tp_nccl_listen_fn fn, int dev, void *handle,
		   void **listen_comm)
{
	if (!fn)
		return tp__net_unsupported(net, "listen");
	return tp__net_err(net, "listen", SETUP_CALL(net, fn(dev, handle, listen_comm)));
}

int tp__net_connect_v5(struct tp_net *net, tp_nccl_connect_v5_fn fn, int dev, void *handle,
		       void **send_comm)
{
	if (!fn)
		return tp__net_unsupported(net, "connect");
	return tp__net_err(net, "connect", SETUP_CALL(net, fn(dev, handle, send_comm)));
}

int tp__net_accept_v5(struct tp_net *net, tp_nccl_accept_v5_fn fn, void *listen_comm,
		      void **recv_comm, ncclNetDeviceHandle_v7_t *dev_handle)
{
	if (!fn)
		return tp__net_unsupported(net, "accept");
	return tp__net_err(net, "accept", SETUP_CALL(net, fn(listen_comm, recv_comm)));
}

/* A plugin may fill the storage we point it at (TCPX does, and crashes on
 * the first receive without it) or swap in a pointer to its own handle;
 * either way the caller ends up with a copy in its storage. */
static void take_dev_handle(ncclNetDeviceHandle_v7_t *dst, const ncclNetDeviceHandle_v7_t *got)
{
	if (got && got != dst)
		*dst = *got;
}

int tp__net_connect_v7(struct tp_net *net, tp_nccl_connect_v7_fn fn, int dev, void *handle,
		       void **send_comm)
{
	/* Sends have no device offload; the storage only keeps plugins that
	 * write through the pointer from writing through NULL. */
	ncclNetDeviceHandle_v7_t storage = { 0 };
	ncclNetDeviceHandle_v7_t *ptr = &storage;

	if (!fn)
		return tp__net_unsupported(net, "connect");
	return tp__net_err(net, "connect", SETUP_CALL(net, fn(dev, handle, send_comm, &ptr)));
}

int tp__net_accept_v7(struct tp_net *net, tp_nccl_accept_v7_fn fn, void *listen_comm,
		      void **recv_comm, ncclNetDeviceHandle_v7_t *dev_handle)
{
	ncclNetDeviceHandle_v7_t *ptr = dev_handle;
	int rc;

	if (!fn)
		return tp__net_unsupported(net, "accept");
	if (!dev_handle)
		return tp__error(TCPX_P2P_EINVAL, "%s accept: no device-handle storage", net->name);
	rc = tp__net_err(net, "accept", SETUP_CALL(net, fn(listen_comm, recv_comm, &ptr)));
	if (!rc)
		take_dev_handle(dev_handle, ptr);
	return rc;
}

int tp__net_reg_mr_int(struct tp_net *net, tp_nccl_reg_mr_int_fn fn, void *comm, void *data,
		       size_t size, int type, void **mhandle)
{
	int isize = 0, rc;

	if (!fn)
		return tp__net_unsupported(net, "regMr");
	rc = int_size(net, "regMr", size, &isize);
	if (rc)
		return rc;
	return tp__net_err(net, "regMr", SETUP_CALL(net, fn(comm, data, isize, type, mhandle)));
}

int tp__net_reg_mr(struct tp_net *net, tp_nccl_reg_mr_fn fn, void *comm, void *data,
		   size_t size, int type, void **mhandle)
{
	if (!fn)
		return tp__net_unsupported(net, "regMr");
	return tp__net_err(net, "regMr", SETUP_CALL(net, fn(comm, data, size, type, mhandle)));
}

int tp__net_dereg_mr(struct tp_net *net, tp_nccl_dereg_mr_fn fn, void *comm, void *mhandle)
{
	if (!fn)
		return tp__net_unsupported(net, "deregMr");
	return tp__net_err(net, "deregMr", SETUP_CALL(net, fn(comm, mhandle)));
}

int tp__net_isend(struct tp_net *net, tp_nccl_isend_fn fn, void *send_comm, void *data,
		  size_t size, int tag, void *mhandle, void **request)
{
	int isize = 0, rc;

	*request = NULL;
	if (!fn)
		return tp__net_unsupported(net, "isend");
	rc = int_size(net, "isend", size, &isize);
	if (rc)
		return rc;
	return tp__net_err(net, "isend", fn(send_comm, data, isize, tag, mhandle, request));
}

int tp__net_irecv(struct tp_net *net, tp_nccl_irecv_fn fn, void *recv_comm, void *data,
		  size_t size, int tag, void *mhandle, void **request)
{
	int isize = 0, rc;

	*request = NULL;
	if (!fn)
		return tp__net_unsupported(net, "irecv");
	rc = int_size(net, "irecv", size, &isize);
	if (rc)
		return rc;
	return tp__net_err(net, "irecv",
			   fn(recv_comm, 1, &data, &isize, &tag, &mhandle, request));
}

int tp__net_test(struct tp_net *net, tp_nccl_test_fn fn, void *request, int *done, int *size)
{
	/* TCPX never writes the size, TCP plugins do (docs/tcpx.md, plugin
	 * contract rule 8): a value that stays below zero means "not said". */
	if (!fn)
		return tp__net_unsupported(net, "test");
	/* Some plugins write done only once the request completes. */
	*done = 0;
	*size = TP_NET_SIZE_UNKNOWN;
	return tp__net_err(net, "test", fn(request, done, size));
}

int tp__net_irecv_consumed(struct tp_net *net, tp_nccl_consumed_fn fn, void *recv_comm,
			   void *request)
{
	/* Without the slot a receive is finished once test says done. */
	if (!fn)
		return 0;
	return tp__net_err(net, "irecvConsumed", fn(recv_comm, 1, request));
}

int tp__net_close(struct tp_net *net, tp_nccl_close_fn fn, const char *op, void *comm)
{
	if (!fn)
		return tp__net_unsupported(net, op);
	return tp__net_err(net, op, fn(comm));
}

int tp__net_init_log(struct tp_net *net, tp_nccl_init_fn fn, ncclDebugLogger_t log)
{
	if (!fn)
		return 0;
	return tp__net_err(net, "init", fn(log));
}

ncclResult_t tp__net_profiler(void **eHandle, int type, void *pHandle, int64_t pluginId,
			      void *extData)
{
	if (eHandle)
		*eHandle = NULL;
	return ncclSuccess;
}

/* From v9 on the plugin reads *request as flags before it writes the
 * request: NULL asks for an ordinary, tested receive. */
int tp__net_isend_v9(struct tp_net *net, tp_nccl_isend_v9_fn fn, void *send_comm, void *data,
		     size_t size, int tag, void *mhandle, void **request)
{
	*request = NULL;
	if (!fn)
		return tp__net_unsupported(net, "isend");
	return tp__net_err(net, "isend", fn(send_comm, data, size, tag, mhandle, request));
}

int tp__net_irecv_v9(struct tp_net *net, tp_nccl_irecv_v9_fn fn, void *recv_comm, void *data,
		     size_t size, int tag, void *mhandle, void **request)
{
	*request = NULL;
	if (!fn)
		return tp__net_unsupported(net, "irecv");
	return tp__net_err(net, "irecv", fn(recv_comm, 1, &data, &size, &tag, &mhandle, request));
}

int tp__net_isend_v10(struct tp_net *net, tp_nccl_isend_v10_fn fn, void *send_comm, void *data,
		      size_t size, int tag, void *mhandle, void **request)
{
	*request = NULL;
	if (!fn)
		return tp__net_unsupported(net, "isend");
	return tp__net_err(net, "isend", fn(send_comm, data, size, tag, mhandle, NULL, request));
}

int tp__net_irecv_v10(struct tp_net *net, tp_nccl_irecv_v10_fn fn, void *recv_comm, void *data,
		      size_t size, int tag, void *mhandle, void **request)
{
	/* One profiler handle per buffer, none of them an event. */
	void *phandle = NULL;

	*request = NULL;
	if (!fn)
		return tp__net_unsupported(net, "irecv");
	return tp__net_err(net, "irecv",
			   fn(recv_comm, 1, &data, &size, &tag, &mhandle, &phandle, request));
}

int tp__net_connect_v10(struct tp_net *net, tp_nccl_connect_v10_fn fn, int dev, void *handle,
			void **send_comm)
{
	ncclNetCommConfig_v10_t config = { .trafficClass = NCCL_NET_TRAFFIC_CLASS_UNDEF };
	ncclNetDeviceHandle_v7_t storage = { 0 };
	ncclNetDeviceHandle_v7_t *ptr = &storage;

	if (!fn)
		return tp__net_unsupported(net, "connect");
	return tp__net_err(net, "connect",
			   SETUP_CALL(net, fn(dev, &config, handle, send_comm, &ptr)));
}

int tp__net_listen_v11(struct tp_net *net, tp_nccl_listen_v11_fn fn, int dev, void *handle,
		       void **listen_comm)
{
	if (!fn)
		return tp__net_unsupported(net, "listen");
	return tp__net_err(net, "listen", SETUP_CALL(net, fn(net->ctx, dev, handle, listen_comm)));
}

int tp__net_connect_v11(struct tp_net *net, tp_nccl_connect_v11_fn fn, int dev, void *handle,
			void **send_comm)
{
	ncclNetDeviceHandle_v7_t storage = { 0 };
	ncclNetDeviceHandle_v7_t *ptr = &storage;

	if (!fn)
		return tp__net_unsupported(net, "connect");
	return tp__net_err(net, "connect",
			   SETUP_CALL(net, fn(net->ctx, dev, handle, send_comm, &ptr)));
}

int tp__net_init_v11(struct tp_net *net, tp_nccl_init_v11_fn fn, ncclDebugLogger_t log)
{
	static atomic_uint_fast32_t seq;
	ncclNetCommConfig_v11_t config = { .trafficClass = NCCL_NET_TRAFFIC_CLASS_UNDEF };
	/* NCCL passes a hash unique to the communicator; a plugin may key
	 * state on it, so no two sessions of the process share one. */
	uint64_t comm_id = (uint64_t)getpid() << 32 | (uint32_t)(atomic_fetch_add(&seq, 1) + 1);

	net->ctx = NULL;
	if (!fn)
		return 0;
	return tp__net_err(net, "init", fn(&net->ctx, comm_id, &config, log, tp__net_profiler));
}

void tp__net_finalize_v11(struct tp_net *net, tp_nccl_finalize_fn fn)
{
	ncclResult_t r;

	if (!fn)
		return;
	r = fn(net->ctx);
	if (r != ncclSuccess)
		TP_WARN("net", "%s finalize: %s (%d)", net->name, tp__net_result_name(r), (int)r);
	net->ctx = NULL;
}
