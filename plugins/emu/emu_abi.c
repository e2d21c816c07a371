/*
 * The emulator's ncclNetPlugin_vN tables, one per NCCL net ABI version
 * from v5 to v12, over the same entry points (which speak v7).
 *
 * EMU_EXPORT_MASK (bit N: export ncclNetPlugin_vN) picks the tables a
 * build exports.  The bundled emulator exports v7 alone, as GPUDirect-TCPX
 * does, so that the library drives it through the adapter it drives TCPX
 * with; the test builds export one version each, or all of them, so that
 * every adapter of the library runs over a real plugin.
 *
 * What each version asks of the emulator besides the v7 calls:
 *   v5, v6  no device handle and no irecvConsumed: receives land in place
 *           and end at test, and a comm takes 8 requests, as NCCL promised
 *           plugins of that time (emu_plugin.c, tp__emu_config_load).
 *   v8      size_t regMr.
 *   v9      size_t isend/irecv; *request carries flags into irecv, so it
 *           must be NULL or NCCL_NET_OPTIONAL_RECV_COMPLETION.
 *   v10     init takes a profiler callback, connect a comm config,
 *           isend/irecv profiler handles.
 *   v11/12  init makes a context per user, listen and connect take it,
 *           finalize ends it: every one is checked.
 */
#include <limits.h>
#include <stdlib.h>

#include "emu.h"

#ifndef EMU_EXPORT_MASK
#define EMU_EXPORT_MASK (1u << 7)
#endif
#define EMU_EXPORTS(v) ((EMU_EXPORT_MASK >> (v)) & 1u)
#define EXPORT __attribute__((visibility("default")))
/* Only the exported tables use their adapters. */
#define EMU_ADAPTER static __attribute__((unused))

#define EMU_CTX_MAGIC 0x43545845u /* "EXTC" */

/* A v11+ context: what init handed out and finalize takes back. */
struct emu_ctx {
	uint32_t magic;
	uint64_t comm_id;
};

EMU_ADAPTER int emu_ctx_ok(const char *op, void *ctx)
{
	const struct emu_ctx *c = ctx;

	if (c && c->magic == EMU_CTX_MAGIC)
		return 1;
	EMU_WARN("%s: %p is not a context this plugin's init returned", op, ctx);
	return 0;
}

#define EMU_INIT(v)                                                    \
	EMU_ADAPTER ncclResult_t emu_init_v##v(ncclDebugLogger_t logger)    \
	{                                                              \
		tp__emu_abi = v;                                       \
		return tp__emu_init(logger);                           \
	}
EMU_INIT(5)
EMU_INIT(6)
EMU_INIT(7)
EMU_INIT(8)
EMU_INIT(9)

EMU_ADAPTER ncclResult_t emu_init_v10(ncclDebugLogger_t logger, ncclProfilerCallback_t prof)
{
	tp__emu_abi = 10;
	return tp__emu_init(logger);
}

EMU_ADAPTER ncclResult_t emu_init_ctx(int abi, void **ctx, uint64_t comm_id,
				 ncclNetCommConfig_v11_t *config, ncclDebugLogger_t logger)
{
	struct emu_ctx *c;
	ncclResult_t r;

	tp__emu_abi = abi;
	r = tp__emu_init(logger);
	if (r != ncclSuccess)
		return r;
	if (!ctx || !config) {
		EMU_WARN("init: NULL context pointer or config");
		return ncclInvalidArgument;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return ncclSystemError;
	c->magic = EMU_CTX_MAGIC;
	c->comm_id = comm_id;
	*ctx = c;
	return ncclSuccess;
}

EMU_ADAPTER ncclResult_t emu_init_v11(void **ctx, uint64_t comm_id, ncclNetCommConfig_v11_t *config,
				 ncclDebugLogger_t logger, ncclProfilerCallback_t prof)
{
	return emu_init_ctx(11, ctx, comm_id, config, logger);
}

EMU_ADAPTER ncclResult_t emu_init_v12(void **ctx, uint64_t comm_id, ncclNetCommConfig_v12_t *config,
				 ncclDebugLogger_t logger, ncclProfilerCallback_t prof)
{
	return emu_init_ctx(12, ctx, comm_id, config, logger);
}

EMU_ADAPTER ncclResult_t emu_finalize(void *ctx)
{
	struct emu_ctx *c = ctx;

	if (!emu_ctx_ok("finalize", ctx))
		return ncclInvalidArgument;
	c->magic = 0;
	free(c);
	return ncclSuccess;
}

EMU_ADAPTER ncclResult_t emu_set_net_attr(void *ctx, ncclNetAttr_v11_t *attr)
{
	return emu_ctx_ok("setNetAttr", ctx) ? ncclSuccess : ncclInvalidArgument;
}

/* ---- properties --------------------------------------------------------- */

#define EMU_PROPS_COMMON(out, p)                                  \
	do {                                                      \
		(out)->name = (p).name;                           \
		(out)->pciPath = (p).pciPath;                     \
		(out)->guid = (p).guid;                           \
		(out)->ptrSupport = (p).ptrSupport;               \
		(out)->speed = (p).speed;                         \
		(out)->port = (p).port;                           \
		(out)->latency = (p).latency;                     \
		(out)->maxComms = (p).maxComms;                   \
		(out)->maxRecvs = (p).maxRecvs;                   \
	} while (0)

/* Before v7 nothing tells the caller about bounce pages: none are used. */
EMU_ADAPTER ncclResult_t emu_props_v6(int dev, ncclNetProperties_v6_t *out)
{
	ncclNetProperties_v7_t p;
	ncclResult_t r = tp__emu_get_properties(dev, &p);

	if (r == ncclSuccess)
		EMU_PROPS_COMMON(out, p);
	return r;
}

EMU_ADAPTER ncclResult_t emu_props_v8(int dev, ncclNetProperties_v8_t *out)
{
	ncclNetProperties_v7_t p;
	ncclResult_t r = tp__emu_get_properties(dev, &p);

	if (r != ncclSuccess)
		return r;
	EMU_PROPS_COMMON(out, p);
	out->regIsGlobal = 0;
	out->netDeviceType = p.netDeviceType;
	out->netDeviceVersion = p.netDeviceVersion;
	return ncclSuccess;
}

/* The fields v9 added; the entry points take int sizes. */
#define EMU_PROPS_V9(out, p, dev)                                 \
	do {                                                      \
		EMU_PROPS_COMMON(out, p);                         \
		(out)->regIsGlobal = 0;                           \
		(out)->forceFlush = 0;                            \
		(out)->netDeviceType = (p).netDeviceType;         \
		(out)->netDeviceVersion = (p).netDeviceVersion;   \
		(out)->vProps.ndevs = 1;                          \
		(out)->vProps.devs[0] = (dev);                    \
		(out)->maxP2pBytes = INT_MAX;                     \
		(out)->maxCollBytes = INT_MAX;                    \
	} while (0)

EMU_ADAPTER ncclResult_t emu_props_v9(int dev, ncclNetProperties_v9_t *out)
{
	ncclNetProperties_v7_t p;
	ncclResult_t r = tp__emu_get_properties(dev, &p);

	if (r == ncclSuccess)
		EMU_PROPS_V9(out, p, dev);
	return r;
}

EMU_ADAPTER ncclResult_t emu_props_v11(int dev, ncclNetProperties_v11_t *out)
{
	ncclNetProperties_v7_t p;
	ncclResult_t r = tp__emu_get_properties(dev, &p);

	if (r != ncclSuccess)
		return r;
	EMU_PROPS_V9(out, p, dev);
	out->maxMultiRequestSize = 1;
	return ncclSuccess;
}

EMU_ADAPTER ncclResult_t emu_props_v12(int dev, ncclNetProperties_v12_t *out)
{
	ncclNetProperties_v7_t p;
	ncclResult_t r = tp__emu_get_properties(dev, &p);

	if (r != ncclSuccess)
		return r;
	EMU_PROPS_V9(out, p, dev);
	out->maxMultiRequestSize = 1;
	out->railId = (int16_t)dev;
	out->planeId = 0;
	return ncclSuccess;
}

/* ---- connection set-up -------------------------------------------------- */

EMU_ADAPTER ncclResult_t emu_connect_v5(int dev, void *handle, void **send_comm)
{
	return tp__emu_connect(dev, handle, send_comm, NULL);
}

EMU_ADAPTER ncclResult_t emu_accept_v5(void *listen_comm, void **recv_comm)
{
	return tp__emu_accept(listen_comm, recv_comm, NULL);
}

EMU_ADAPTER ncclResult_t emu_connect_v10(int dev, ncclNetCommConfig_v10_t *config, void *handle,
				    void **send_comm, ncclNetDeviceHandle_v10_t **dev_handle)
{
	if (!config) {
		EMU_WARN("connect: NULL comm config");
		return ncclInvalidArgument;
	}
	return tp__emu_connect(dev, handle, send_comm, dev_handle);
}

EMU_ADAPTER ncclResult_t emu_listen_v11(void *ctx, int dev, void *handle, void **listen_comm)
{
	if (!emu_ctx_ok("listen", ctx))
		return ncclInvalidArgument;
	return tp__emu_listen(dev, handle, listen_comm);
}

EMU_ADAPTER ncclResult_t emu_connect_v11(void *ctx, int dev, void *handle, void **send_comm,
				    ncclNetDeviceHandle_v11_t **dev_handle)
{
	if (!emu_ctx_ok("connect", ctx))
		return ncclInvalidArgument;
	return tp__emu_connect(dev, handle, send_comm, dev_handle);
}

/* ---- registration and requests with size_t sizes ------------------------ */

EMU_ADAPTER ncclResult_t emu_reg_mr_v8(void *comm, void *data, size_t size, int type, void **mhandle)
{
	if (size > INT_MAX) {
		EMU_WARN("regMr: %zu bytes; the emulator registers at most INT_MAX", size);
		return ncclInvalidArgument;
	}
	return tp__emu_reg_mr(comm, data, (int)size, type, mhandle);
}

EMU_ADAPTER ncclResult_t emu_isend_v9(void *send_comm, void *data, size_t size, int tag,
				 void *mhandle, void **request)
{
	if (size > INT_MAX) {
		EMU_WARN("isend: %zu bytes exceeds maxP2pBytes", size);
		return ncclInvalidArgument;
	}
	return tp__emu_isend(send_comm, data, (int)size, tag, mhandle, request);
}

/* From v9 on *request brings flags in: anything but none or the optional
 * completion hint is a caller that forgot to clear it. */
EMU_ADAPTER ncclResult_t emu_irecv_v9(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
				 void **mhandles, void **request)
{
	int isize;

	if (*request && *request != (void *)NCCL_NET_OPTIONAL_RECV_COMPLETION) {
		EMU_WARN("irecv: *request is %p on entry; it carries flags (NULL or "
			 "NCCL_NET_OPTIONAL_RECV_COMPLETION)", *request);
		return ncclInvalidUsage;
	}
	if (n != 1 || sizes[0] > INT_MAX) {
		EMU_WARN("irecv: n = %d or size too large", n);
		return ncclInvalidArgument;
	}
	isize = (int)sizes[0];
	return tp__emu_irecv(recv_comm, n, data, &isize, tags, mhandles, request);
}

EMU_ADAPTER ncclResult_t emu_isend_v10(void *send_comm, void *data, size_t size, int tag,
				  void *mhandle, void *phandle, void **request)
{
	return emu_isend_v9(send_comm, data, size, tag, mhandle, request);
}

EMU_ADAPTER ncclResult_t emu_irecv_v10(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
				  void **mhandles, void **phandles, void **request)
{
	return emu_irecv_v9(recv_comm, n, data, sizes, tags, mhandles, request);
}

/* ---- the tables ---------------------------------------------------------- */

#if EMU_EXPORTS(5)
EXPORT const ncclNet_v5_t ncclNetPlugin_v5 = {
	"TCPXEmu_v5", emu_init_v5, tp__emu_devices, emu_props_v6, tp__emu_listen,
	emu_connect_v5, emu_accept_v5, tp__emu_reg_mr, tp__emu_dereg_mr, tp__emu_isend,
	tp__emu_irecv, NULL, tp__emu_test, tp__emu_close_send, tp__emu_close_recv,
	tp__emu_close_listen,
};
#endif

#if EMU_EXPORTS(6)
EXPORT const ncclNet_v6_t ncclNetPlugin_v6 = {
	"TCPXEmu_v6", emu_init_v6, tp__emu_devices, emu_props_v6, tp__emu_listen,
	emu_connect_v5, emu_accept_v5, tp__emu_reg_mr, NULL, tp__emu_dereg_mr, tp__emu_isend,
	tp__emu_irecv, NULL, tp__emu_test, tp__emu_close_send, tp__emu_close_recv,
	tp__emu_close_listen,
};
#endif

#if EMU_EXPORTS(7)
EXPORT const ncclNet_v7_t ncclNetPlugin_v7 = {
	.name = "TCPXEmu_v7",
	.init = emu_init_v7,
	.devices = tp__emu_devices,
	.getProperties = tp__emu_get_properties,
	.listen = tp__emu_listen,
	.connect = tp__emu_connect,
	.accept = tp__emu_accept,
	.regMr = tp__emu_reg_mr,
	.regMrDmaBuf = NULL,
	.deregMr = tp__emu_dereg_mr,
	.isend = tp__emu_isend,
	.irecv = tp__emu_irecv,
	.iflush = NULL,
	.test = tp__emu_test,
	.closeSend = tp__emu_close_send,
	.closeRecv = tp__emu_close_recv,
	.closeListen = tp__emu_close_listen,
	.getDeviceMr = NULL,
	.irecvConsumed = tp__emu_irecv_consumed,
};
#endif

#if EMU_EXPORTS(8)
EXPORT const ncclNet_v8_t ncclNetPlugin_v8 = {
	"TCPXEmu_v8", emu_init_v8, tp__emu_devices, emu_props_v8, tp__emu_listen,
	tp__emu_connect, tp__emu_accept, emu_reg_mr_v8, NULL, tp__emu_dereg_mr, tp__emu_isend,
	tp__emu_irecv, NULL, tp__emu_test, tp__emu_close_send, tp__emu_close_recv,
	tp__emu_close_listen, NULL, tp__emu_irecv_consumed,
};
#endif

#if EMU_EXPORTS(9)
EXPORT const ncclNet_v9_t ncclNetPlugin_v9 = {
	"TCPXEmu_v9", emu_init_v9, tp__emu_devices, emu_props_v9, tp__emu_listen,
	tp__emu_connect, tp__emu_accept, emu_reg_mr_v8, NULL, tp__emu_dereg_mr, emu_isend_v9,
	emu_irecv_v9, NULL, tp__emu_test, tp__emu_close_send, tp__emu_close_recv,
	tp__emu_close_listen, NULL, tp__emu_irecv_consumed, NULL,
};
#endif

#if EMU_EXPORTS(10)
EXPORT const ncclNet_v10_t ncclNetPlugin_v10 = {
	"TCPXEmu_v10", emu_init_v10, tp__emu_devices, emu_props_v9, tp__emu_listen,
	emu_connect_v10, tp__emu_accept, emu_reg_mr_v8, NULL, tp__emu_dereg_mr, emu_isend_v10,
	emu_irecv_v10, NULL, tp__emu_test, tp__emu_close_send, tp__emu_close_recv,
	tp__emu_close_listen, NULL, tp__emu_irecv_consumed, NULL,
};
#endif

#if EMU_EXPORTS(11)
EXPORT const ncclNet_v11_t ncclNetPlugin_v11 = {
	"TCPXEmu_v11", emu_init_v11, tp__emu_devices, emu_props_v11, emu_listen_v11,
	emu_connect_v11, tp__emu_accept, emu_reg_mr_v8, NULL, tp__emu_dereg_mr, emu_isend_v10,
	emu_irecv_v10, NULL, tp__emu_test, tp__emu_close_send, tp__emu_close_recv,
	tp__emu_close_listen, NULL, tp__emu_irecv_consumed, NULL, emu_finalize,
	emu_set_net_attr,
};
#endif

#if EMU_EXPORTS(12)
EXPORT const ncclNet_v12_t ncclNetPlugin_v12 = {
	"TCPXEmu_v12", emu_init_v12, tp__emu_devices, emu_props_v12, emu_listen_v11,
	emu_connect_v11, tp__emu_accept, emu_reg_mr_v8, NULL, tp__emu_dereg_mr, emu_isend_v10,
	emu_irecv_v10, NULL, tp__emu_test, tp__emu_close_send, tp__emu_close_recv,
	tp__emu_close_listen, NULL, tp__emu_irecv_consumed, NULL, emu_finalize,
	emu_set_net_attr,
};
#endif
