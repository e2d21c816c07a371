/* A fake NCCL net plugin that records every call.  Built several times:
 * FAKE_ABI (5..8) picks the table exported, FAKE_ALSO_V7 adds a v7 table
 * next to v8, FAKE_EMPTY leaves every optional slot NULL, FAKE_INITFAIL
 * makes init fail, FAKE_NOSYM exports no table at all. */
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

static ncclResult_t fake_isend(void *comm, void *data, int size, int tag, void *mhandle,
			       void **request)
{
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
	fake_calls.comm = comm;
	fake_calls.n = n;
	fake_calls.request = request;
	return fake_calls.result;
}

#if !defined(FAKE_NOSYM)

#if defined(FAKE_EMPTY)
EXPORT const ncclNet_v7_t ncclNetPlugin_v7 = {
	.name = "fake_empty",
	.init = fake_init,
	.devices = fake_devices,
};
#elif FAKE_ABI == 5
EXPORT const ncclNet_v5_t ncclNetPlugin_v5 = {
	"fake_v5", fake_init, fake_devices, fake_props_v6, fake_listen, fake_connect_v5,
	fake_accept_v5, fake_reg_mr_int, fake_dereg_mr, fake_isend, fake_irecv, NULL,
	fake_test, fake_close_send, fake_close_recv, fake_close_listen,
};
#elif FAKE_ABI == 6
EXPORT const ncclNet_v6_t ncclNetPlugin_v6 = {
	"fake_v6", fake_init, fake_devices, fake_props_v6, fake_listen, fake_connect_v5,
	fake_accept_v5, fake_reg_mr_int, NULL, fake_dereg_mr, fake_isend, fake_irecv, NULL,
	fake_test, fake_close_send, fake_close_recv, fake_close_listen,
};
#else
/* v7 is also built next to v8 (FAKE_ALSO_V7) to check v8 is preferred. */
#if FAKE_ABI == 7 || defined(FAKE_ALSO_V7)
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
#if FAKE_ABI == 8
EXPORT const ncclNet_v8_t ncclNetPlugin_v8 = {
	"fake_v8", fake_init, fake_devices, fake_props_v8, fake_listen, fake_connect_v7,
	fake_accept_v7, fake_reg_mr_size_t, NULL, fake_dereg_mr, fake_isend, fake_irecv, NULL,
	fake_test, fake_close_send, fake_close_recv, fake_close_listen, NULL,
	fake_irecv_consumed,
};
#endif
#endif

#endif /* !FAKE_NOSYM */
