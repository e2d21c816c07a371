/* A fake NCCL net plugin that records every call.  Built several times:
 * FAKE_ABI (5..12) picks the table exported, FAKE_ALSO_V7 adds a v7 table
 * next to v8, FAKE_ALL exports every version, FAKE_EMPTY leaves every
 * optional slot NULL, FAKE_INITFAIL makes init fail, FAKE_NOSYM exports
 * no table at all. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fake_plugin.h"

#define EXPORT __attribute__((visibility("default")))

EXPORT struct fake_calls fake_calls;

static ncclNetDeviceHandle_v7_t fake_own_dev_handle = {
	.netDeviceType = NCCL_NET_DEVICE_UNPACK,
	.netDeviceVersion = NCCL_NET_DEVICE_UNPACK_VERSION,
	.handle = (void *)0x8800,
	.size = 24,
};

static ncclResult_t fake_init(ncclDebugLogger_t logger)
{
	fake_calls.init++;
	fake_calls.logger = logger;
#ifdef FAKE_INITFAIL
	return ncclSystemError;
#else
	return ncclSuccess;
#endif
}

static ncclResult_t fake_devices(int *ndev)
{
	fake_calls.devices++;
	*ndev = FAKE_NDEV;
	return fake_calls.result;
}

#define FAKE_PROPS_COMMON(p, d)                           \
	do {                                              \
		fake_calls.get_properties++;              \
		fake_calls.dev = (d);                     \
		(p)->name = "fake-eth0";                  \
		(p)->pciPath = "/sys/devices/fake/0000:01:00.0"; \
		(p)->guid = 0x1234abcdULL;                \
		(p)->ptrSupport = NCCL_PTR_HOST | NCCL_PTR_CUDA; \
		(p)->speed = 200000;                      \
		(p)->port = 3;                            \
		(p)->latency = 1.5f;                      \
		(p)->maxComms = 64;                       \
		(p)->maxRecvs = 1;                        \
	} while (0)

static ncclResult_t fake_listen(int dev, void *handle, void **listen_comm)
{
	fake_calls.listen++;
	fake_calls.dev = dev;
	fake_calls.handle = handle;
	memcpy(handle, "fake-handle", 12);
	*listen_comm = FAKE_LISTEN_COMM;
	return fake_calls.result;
}

static ncclResult_t fake_dereg_mr(void *comm, void *mhandle)
{
	fake_calls.dereg_mr++;
	fake_calls.comm = comm;
	fake_calls.mhandle = mhandle;
	return fake_calls.result;
}

/* NCCL's socket plugin answers a post beyond its requests with an error. */
static int fake_full(int *out)
{
	int max = fake_calls.max_requests ? fake_calls.max_requests : FAKE_MAX_REQUESTS(FAKE_ABI);

	if (*out >= max)
		return 1;
	(*out)++;
	return 0;
}

static ncclResult_t fake_isend(void *comm, void *data, int size, int tag, void *mhandle,
			       void **request)
{
	fake_calls.request_in = *request;
	if (fake_full(&fake_calls.out_send))
		return ncclInternalError;
	fake_calls.isend++;
	fake_calls.comm = comm;
	fake_calls.data = data;
	fake_calls.size = (unsigned long long)size;
	fake_calls.tag = tag;
	fake_calls.mhandle = mhandle;
	*request = FAKE_SEND_REQ;
	return fake_calls.result;
}

static ncclResult_t fake_irecv(void *comm, int n, void **data, int *sizes, int *tags,
			       void **mhandles, void **request)
{
	fake_calls.request_in = *request;
	if (fake_full(&fake_calls.out_recv))
		return ncclInternalError;
	fake_calls.irecv++;
	fake_calls.comm = comm;
	fake_calls.n = n;
	fake_calls.data = data[0];
	fake_calls.size = (unsigned long long)sizes[0];
	fake_calls.tag = tags[0];
	fake_calls.mhandle = mhandles[0];
	*request = FAKE_RECV_REQ;
	return fake_calls.result;
}

static ncclResult_t fake_test(void *request, int *done, int *sizes)
{
	fake_calls.test++;
	fake_calls.request = request;
	fake_calls.sizes_given = sizes != NULL;
	if (request == FAKE_SEND_REQ && fake_calls.out_send > 0)
		fake_calls.out_send--;
	/* Before v7 a receive ends at test; later ones at irecvConsumed. */
	if (request == FAKE_RECV_REQ && FAKE_ABI < 7 && fake_calls.out_recv > 0)
		fake_calls.out_recv--;
	*done = 1;
	if (sizes)
		*sizes = 1234;
	return fake_calls.result;
}

static ncclResult_t fake_close_send(void *comm)
{
	fake_calls.close_send++;
	fake_calls.comm = comm;
	return fake_calls.result;
}

static ncclResult_t fake_close_recv(void *comm)
{
	fake_calls.close_recv++;
	fake_calls.comm = comm;
	return fake_calls.result;
}

static ncclResult_t fake_close_listen(void *comm)
{
	fake_calls.close_listen++;
	fake_calls.comm = comm;
	return fake_calls.result;
}

static ncclResult_t fake_reg_mr_int(void *comm, void *data, int size, int type, void **mhandle)
{
	fake_calls.reg_mr++;
	fake_calls.comm = comm;
	fake_calls.data = data;
	fake_calls.size = (unsigned long long)size;
	fake_calls.type = type;
	*mhandle = FAKE_MHANDLE;
	return fake_calls.result;
}

static ncclResult_t fake_reg_mr_size_t(void *comm, void *data, size_t size, int type,
				       void **mhandle)
{
	fake_calls.reg_mr++;
	fake_calls.comm = comm;
	fake_calls.data = data;
	fake_calls.size = size;
	fake_calls.type = type;
	*mhandle = FAKE_MHANDLE;
	return fake_calls.result;
}

static ncclResult_t fake_props_v6(int dev, ncclNetProperties_v6_t *p)
{
	FAKE_PROPS_COMMON(p, dev);
	return fake_calls.result;
}

static ncclResult_t fake_props_v7(int dev, ncclNetProperties_v7_t *p)
{
	FAKE_PROPS_COMMON(p, dev);
	p->netDeviceType = NCCL_NET_DEVICE_UNPACK;
	p->netDeviceVersion = NCCL_NET_DEVICE_UNPACK_VERSION;
	return fake_calls.result;
}

static ncclResult_t fake_props_v8(int dev, ncclNetProperties_v8_t *p)
{
	FAKE_PROPS_COMMON(p, dev);
	p->regIsGlobal = 1;
	p->netDeviceType = NCCL_NET_DEVICE_UNPACK;
	p->netDeviceVersion = NCCL_NET_DEVICE_UNPACK_VERSION;
	return fake_calls.result;
}

static ncclResult_t fake_connect_v5(int dev, void *handle, void **send_comm)
{
	fake_calls.connect++;
	fake_calls.dev = dev;
	fake_calls.handle = handle;
	*send_comm = FAKE_SEND_COMM;
	return fake_calls.result;
}

static ncclResult_t fake_accept_v5(void *listen_comm, void **recv_comm)
{
	fake_calls.accept++;
	fake_calls.comm = listen_comm;
	*recv_comm = FAKE_RECV_COMM;
	return fake_calls.result;
}

static ncclResult_t fake_connect_v7(int dev, void *handle, void **send_comm,
				    ncclNetDeviceHandle_v7_t **dev_comm)
{
	fake_calls.dev_storage = *dev_comm;
	return fake_connect_v5(dev, handle, send_comm);
}

static ncclResult_t fake_accept_v7(void *listen_comm, void **recv_comm,
				   ncclNetDeviceHandle_v7_t **dev_comm)
{
	fake_calls.dev_storage = *dev_comm;
	if (fake_calls.swap_dev_handle) {
		*dev_comm = &fake_own_dev_handle;
	} else {
		/* What TCPX does: fill the storage it was handed. */
		(*dev_comm)->netDeviceType = NCCL_NET_DEVICE_UNPACK;
		(*dev_comm)->netDeviceVersion = NCCL_NET_DEVICE_UNPACK_VERSION;
		(*dev_comm)->handle = FAKE_DEV_PTR;
		(*dev_comm)->size = 24;
	}
	return fake_accept_v5(listen_comm, recv_comm);
}

static ncclResult_t fake_irecv_consumed(void *comm, int n, void *request)
{
	fake_calls.irecv_consumed++;
	if (fake_calls.out_recv > 0)
		fake_calls.out_recv--;
	fake_calls.comm = comm;
	fake_calls.n = n;
	fake_calls.request = request;
	return fake_calls.result;
}

/* ---- v9..v12 ------------------------------------------------------------ */

static ncclResult_t fake_isend_v9(void *comm, void *data, size_t size, int tag, void *mhandle,
				  void **request)
{
	ncclResult_t r = fake_isend(comm, data, 0, tag, mhandle, request);

	fake_calls.size = size;
	return r;
}

static ncclResult_t fake_irecv_v9(void *comm, int n, void **data, size_t *sizes, int *tags,
				  void **mhandles, void **request)
{
	int isize = 0;
	ncclResult_t r = fake_irecv(comm, n, data, &isize, tags, mhandles, request);

	fake_calls.size = sizes[0];
	return r;
}

static ncclResult_t fake_isend_v10(void *comm, void *data, size_t size, int tag, void *mhandle,
				   void *phandle, void **request)
{
	fake_calls.phandle = phandle;
	return fake_isend_v9(comm, data, size, tag, mhandle, request);
}

static ncclResult_t fake_irecv_v10(void *comm, int n, void **data, size_t *sizes, int *tags,
				   void **mhandles, void **phandles, void **request)
{
	fake_calls.phandles_given = phandles != NULL;
	return fake_irecv_v9(comm, n, data, sizes, tags, mhandles, request);
}

#define FAKE_PROPS_V9(p, d)                                       \
	do {                                                      \
		FAKE_PROPS_COMMON(p, d);                          \
		(p)->regIsGlobal = 1;                             \
		(p)->forceFlush = 1;                              \
		(p)->netDeviceType = NCCL_NET_DEVICE_UNPACK;      \
		(p)->netDeviceVersion = NCCL_NET_DEVICE_UNPACK_VERSION; \
		(p)->vProps.ndevs = 1;                            \
		(p)->vProps.devs[0] = (d);                        \
		(p)->maxP2pBytes = (size_t)1 << 33;               \
		(p)->maxCollBytes = (size_t)1 << 30;              \
	} while (0)

static ncclResult_t fake_props_v9(int dev, ncclNetProperties_v9_t *p)
{
	FAKE_PROPS_V9(p, dev);
	return fake_calls.result;
}

static ncclResult_t fake_props_v11(int dev, ncclNetProperties_v11_t *p)
{
	FAKE_PROPS_V9(p, dev);
	p->maxMultiRequestSize = 4;
	return fake_calls.result;
}

static ncclResult_t fake_props_v12(int dev, ncclNetProperties_v12_t *p)
{
	FAKE_PROPS_V9(p, dev);
	p->maxMultiRequestSize = 4;
	p->railId = 5;
	p->planeId = 6;
	return fake_calls.result;
}

static ncclResult_t fake_init_v10(ncclDebugLogger_t logger, ncclProfilerCallback_t prof)
{
	fake_calls.profiler = prof;
	return fake_init(logger);
}

static ncclResult_t fake_connect_v10(int dev, ncclNetCommConfig_v10_t *config, void *handle,
				     void **send_comm, ncclNetDeviceHandle_v10_t **dev_comm)
{
	fake_calls.traffic_class = config ? config->trafficClass : 12345;
	return fake_connect_v7(dev, handle, send_comm, dev_comm);
}

/* Contexts are heap objects holding their comm id, so that a wrong or
 * finalized one is seen. */
struct fake_ctx {
	uint64_t magic, comm_id;
};
#define FAKE_CTX_MAGIC 0xfa4ec7c7ull

static int fake_ctx_ok(void *ctx)
{
	fake_calls.ctx = ctx;
	return ctx && ((struct fake_ctx *)ctx)->magic == FAKE_CTX_MAGIC;
}

static ncclResult_t fake_init_v11(void **ctx, uint64_t comm_id, ncclNetCommConfig_v11_t *config,
				  ncclDebugLogger_t logger, ncclProfilerCallback_t prof)
{
	struct fake_ctx *c;
	ncclResult_t r = fake_init(logger);

	fake_calls.profiler = prof;
	fake_calls.comm_id = comm_id;
	fake_calls.traffic_class = config ? config->trafficClass : 12345;
	if (r != ncclSuccess)
		return r;
	c = malloc(sizeof(*c));
	if (!c)
		return ncclSystemError;
	c->magic = FAKE_CTX_MAGIC;
	c->comm_id = comm_id;
	*ctx = c;
	fake_calls.live_ctx++;
	return ncclSuccess;
}

static ncclResult_t fake_finalize(void *ctx)
{
	fake_calls.finalize++;
	if (!fake_ctx_ok(ctx))
		return ncclInvalidArgument;
	((struct fake_ctx *)ctx)->magic = 0;
	free(ctx);
	fake_calls.live_ctx--;
	return ncclSuccess;
}

static ncclResult_t fake_listen_v11(void *ctx, int dev, void *handle, void **listen_comm)
{
	if (!fake_ctx_ok(ctx))
		return ncclInvalidArgument;
	return fake_listen(dev, handle, listen_comm);
}

static ncclResult_t fake_connect_v11(void *ctx, int dev, void *handle, void **send_comm,
				     ncclNetDeviceHandle_v11_t **dev_comm)
{
	if (!fake_ctx_ok(ctx))
		return ncclInvalidArgument;
	return fake_connect_v7(dev, handle, send_comm, dev_comm);
}

#if !defined(FAKE_NOSYM)

#if defined(FAKE_EMPTY)
EXPORT const ncclNet_v7_t ncclNetPlugin_v7 = {
	.name = "fake_empty",
	.init = fake_init,
	.devices = fake_devices,
};
#elif FAKE_ABI == 5 && !defined(FAKE_ALL)
EXPORT const ncclNet_v5_t ncclNetPlugin_v5 = {
	"fake_v5", fake_init, fake_devices, fake_props_v6, fake_listen, fake_connect_v5,
	fake_accept_v5, fake_reg_mr_int, fake_dereg_mr, fake_isend, fake_irecv, NULL,
	fake_test, fake_close_send, fake_close_recv, fake_close_listen,
};
#elif FAKE_ABI == 6 && !defined(FAKE_ALL)
EXPORT const ncclNet_v6_t ncclNetPlugin_v6 = {
	"fake_v6", fake_init, fake_devices, fake_props_v6, fake_listen, fake_connect_v5,
	fake_accept_v5, fake_reg_mr_int, NULL, fake_dereg_mr, fake_isend, fake_irecv, NULL,
	fake_test, fake_close_send, fake_close_recv, fake_close_listen,
};
#else
#if defined(FAKE_ALL)
EXPORT const ncclNet_v5_t ncclNetPlugin_v5 = {
	"fake_v5", fake_init, fake_devices, fake_props_v6, fake_listen, fake_connect_v5,
	fake_accept_v5, fake_reg_mr_int, fake_dereg_mr, fake_isend, fake_irecv, NULL,
	fake_test, fake_close_send, fake_close_recv, fake_close_listen,
};
#endif
#if FAKE_ABI == 6 || defined(FAKE_ALL)
EXPORT const ncclNet_v6_t ncclNetPlugin_v6 = {
	"fake_v6", fake_init, fake_devices, fake_props_v6, fake_listen, fake_connect_v5,
	fake_accept_v5, fake_reg_mr_int, NULL, fake_dereg_mr, fake_isend, fake_irecv, NULL,
	fake_test, fake_close_send, fake_close_recv, fake_close_listen,
};
#endif
/* v7 is also built next to v8 (FAKE_ALSO_V7) to check v8 is preferred. */
#if FAKE_ABI == 7 || defined(FAKE_ALSO_V7) || defined(FAKE_ALL)
EXPORT const ncclNet_v7_t ncclNetPlugin_v7 = {
#ifdef FAKE_INITFAIL
	"fake_initfail",
#elif defined(FAKE_TCPX_NAME)
	"GPUDirectTCPX_v7", /* what the library keys TCPX's rules on */
#else
	"fake_v7",
#endif
	fake_init, fake_devices, fake_props_v7, fake_listen, fake_connect_v7, fake_accept_v7,
	fake_reg_mr_int, NULL, fake_dereg_mr, fake_isend, fake_irecv, NULL, fake_test,
	fake_close_send, fake_close_recv, fake_close_listen, NULL, fake_irecv_consumed,
};
#endif
#if FAKE_ABI == 8 || defined(FAKE_ALL)
EXPORT const ncclNet_v8_t ncclNetPlugin_v8 = {
	"fake_v8", fake_init, fake_devices, fake_props_v8, fake_listen, fake_connect_v7,
	fake_accept_v7, fake_reg_mr_size_t, NULL, fake_dereg_mr, fake_isend, fake_irecv, NULL,
	fake_test, fake_close_send, fake_close_recv, fake_close_listen, NULL,
	fake_irecv_consumed,
};
#endif
#if FAKE_ABI == 9 || defined(FAKE_ALL)
EXPORT const ncclNet_v9_t ncclNetPlugin_v9 = {
	"fake_v9", fake_init, fake_devices, fake_props_v9, fake_listen, fake_connect_v7,
	fake_accept_v7, fake_reg_mr_size_t, NULL, fake_dereg_mr, fake_isend_v9, fake_irecv_v9,
	NULL, fake_test, fake_close_send, fake_close_recv, fake_close_listen, NULL,
	fake_irecv_consumed, NULL,
};
#endif
#if FAKE_ABI == 10 || defined(FAKE_ALL)
EXPORT const ncclNet_v10_t ncclNetPlugin_v10 = {
	"fake_v10", fake_init_v10, fake_devices, fake_props_v9, fake_listen, fake_connect_v10,
	fake_accept_v7, fake_reg_mr_size_t, NULL, fake_dereg_mr, fake_isend_v10, fake_irecv_v10,
	NULL, fake_test, fake_close_send, fake_close_recv, fake_close_listen, NULL,
	fake_irecv_consumed, NULL,
};
#endif
#if FAKE_ABI == 11 || defined(FAKE_ALL)
EXPORT const ncclNet_v11_t ncclNetPlugin_v11 = {
	"fake_v11", fake_init_v11, fake_devices, fake_props_v11, fake_listen_v11,
	fake_connect_v11, fake_accept_v7, fake_reg_mr_size_t, NULL, fake_dereg_mr,
	fake_isend_v10, fake_irecv_v10, NULL, fake_test, fake_close_send, fake_close_recv,
	fake_close_listen, NULL, fake_irecv_consumed, NULL, fake_finalize, NULL,
};
#endif
#if FAKE_ABI == 12
EXPORT const ncclNet_v12_t ncclNetPlugin_v12 = {
	"fake_v12", fake_init_v11, fake_devices, fake_props_v12, fake_listen_v11,
	fake_connect_v11, fake_accept_v7, fake_reg_mr_size_t, NULL, fake_dereg_mr,
	fake_isend_v10, fake_irecv_v10, NULL, fake_test, fake_close_send, fake_close_recv,
	fake_close_listen, NULL, fake_irecv_consumed, NULL, fake_finalize, NULL,
};
#endif
#endif

#endif /* !FAKE_NOSYM */
