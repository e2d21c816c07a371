/*
 * NCCL network-plugin ABI, versions 5 to 8 (x86-64), as consumed by the
 * library and implemented by the emulator plugin.  Written from the NCCL
 * net headers (net_v5.h .. net_v8.h, net_device.h) and the unpack
 * definitions (device/network/unpack/unpack_defs.h).  This is the only code
 * the library and plugins/emu share.
 */
#ifndef TP_ABI_NCCL_NET_H
#define TP_ABI_NCCL_NET_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
	ncclSuccess = 0,
	ncclUnhandledCudaError = 1,
	ncclSystemError = 2,
	ncclInternalError = 3,
	ncclInvalidArgument = 4,
	ncclInvalidUsage = 5,
	ncclRemoteError = 6,
	ncclInProgress = 7,
} ncclResult_t;

typedef enum {
	NCCL_LOG_NONE = 0,
	NCCL_LOG_VERSION = 1,
	NCCL_LOG_WARN = 2,
	NCCL_LOG_INFO = 3,
	NCCL_LOG_ABORT = 4,
	NCCL_LOG_TRACE = 5,
} ncclDebugLogLevel;

typedef void (*ncclDebugLogger_t)(ncclDebugLogLevel level, unsigned long flags,
				  const char *file, int line, const char *fmt, ...);

#define NCCL_NET_HANDLE_MAXSIZE 128
#define NCCL_PTR_HOST 0x1
#define NCCL_PTR_CUDA 0x2
#define NCCL_PTR_DMABUF 0x4

/* ---- device-side (unpack) offload, net_device.h ------------------------ */

typedef enum {
	NCCL_NET_DEVICE_HOST = 0,
	NCCL_NET_DEVICE_UNPACK = 1,
} ncclNetDeviceType;

#define NCCL_NET_DEVICE_INVALID_VERSION 0x0
#define NCCL_NET_DEVICE_UNPACK_VERSION 0x7

typedef struct {
	ncclNetDeviceType netDeviceType;
	int netDeviceVersion;
	void *handle; /* unpack: device pointer to struct tp_unpack_handle */
	size_t size;
	int needsProxyProgress;
} ncclNetDeviceHandle_v7_t;
typedef ncclNetDeviceHandle_v7_t ncclNetDeviceHandle_v8_t;

/* unpack_defs.h: the meta ring the plugin fills for every receive. */
#define TP_UNPACK_QUEUE_DEPTH 16   /* NCCL_NET_DEVICE_UNPACK_MAX_QUEUE_DEPTH */
#define TP_UNPACK_MAX_PAGES 2048   /* NET_UNPACK_MAX_SLICE_PAGES */
#define TP_UNPACK_PAGE_SIZE 4096   /* SLICE_PAGE_SIZE */

typedef union {
	uint64_t r64[2];
	struct {
		uint32_t src_off; /* from bounce_buf */
		uint32_t len;     /* <= TP_UNPACK_PAGE_SIZE */
		uint64_t dst_off; /* into the receive buffer */
	};
} __attribute__((aligned(16))) tp_unpack_rec;

struct tp_unpack_meta {
	tp_unpack_rec mem[TP_UNPACK_QUEUE_DEPTH][TP_UNPACK_MAX_PAGES];
	uint64_t cnt[TP_UNPACK_QUEUE_DEPTH];
};

/* What ncclNetDeviceHandle_v7_t.handle points at (24 bytes). */
struct tp_unpack_handle {
	struct tp_unpack_meta *meta; /* device alias of pinned mapped host memory */
	void *bounce_buf;
	uint64_t head;
};

/* ---- properties --------------------------------------------------------- */

typedef struct {
	char *name;
	char *pciPath;
	uint64_t guid;
	int ptrSupport;
	int speed;
	int port;
	float latency;
	int maxComms;
	int maxRecvs;
} ncclNetProperties_v6_t;
typedef ncclNetProperties_v6_t ncclNetProperties_v5_t;

typedef struct {
	char *name;
	char *pciPath;
	uint64_t guid;
	int ptrSupport;
	int speed;
	int port;
	float latency;
	int maxComms;
	int maxRecvs;
	ncclNetDeviceType netDeviceType;
	int netDeviceVersion;
} ncclNetProperties_v7_t;

typedef struct {
	char *name;
	char *pciPath;
	uint64_t guid;
	int ptrSupport;
	int regIsGlobal;
	int speed;
	int port;
	float latency;
	int maxComms;
	int maxRecvs;
	ncclNetDeviceType netDeviceType;
	int netDeviceVersion;
} ncclNetProperties_v8_t;

/* ---- function tables ---------------------------------------------------- */

typedef struct {
	const char *name;
	ncclResult_t (*init)(ncclDebugLogger_t logFunction);
	ncclResult_t (*devices)(int *ndev);
	ncclResult_t (*getProperties)(int dev, ncclNetProperties_v5_t *props);
	ncclResult_t (*listen)(int dev, void *handle, void **listenComm);
	ncclResult_t (*connect)(int dev, void *handle, void **sendComm);
	ncclResult_t (*accept)(void *listenComm, void **recvComm);
	ncclResult_t (*regMr)(void *comm, void *data, int size, int type, void **mhandle);
	ncclResult_t (*deregMr)(void *comm, void *mhandle);
	ncclResult_t (*isend)(void *sendComm, void *data, int size, int tag, void *mhandle,
			      void **request);
	ncclResult_t (*irecv)(void *recvComm, int n, void **data, int *sizes, int *tags,
			      void **mhandles, void **request);
	ncclResult_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles,
			       void **request);
	ncclResult_t (*test)(void *request, int *done, int *sizes);
	ncclResult_t (*closeSend)(void *sendComm);
	ncclResult_t (*closeRecv)(void *recvComm);
	ncclResult_t (*closeListen)(void *listenComm);
} ncclNet_v5_t;

typedef struct {
	const char *name;
	ncclResult_t (*init)(ncclDebugLogger_t logFunction);
	ncclResult_t (*devices)(int *ndev);
	ncclResult_t (*getProperties)(int dev, ncclNetProperties_v6_t *props);
	ncclResult_t (*listen)(int dev, void *handle, void **listenComm);
	ncclResult_t (*connect)(int dev, void *handle, void **sendComm);
	ncclResult_t (*accept)(void *listenComm, void **recvComm);
	ncclResult_t (*regMr)(void *comm, void *data, int size, int type, void **mhandle);
	ncclResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type,
				    uint64_t offset, int fd, void **mhandle);
	ncclResult_t (*deregMr)(void *comm, void *mhandle);
	ncclResult_t (*isend)(void *sendComm, void *data, int size, int tag, void *mhandle,
			      void **request);
	ncclResult_t (*irecv)(void *recvComm, int n, void **data, int *sizes, int *tags,
			      void **mhandles, void **request);
	ncclResult_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles,
			       void **request);
	ncclResult_t (*test)(void *request, int *done, int *sizes);
	ncclResult_t (*closeSend)(void *sendComm);
	ncclResult_t (*closeRecv)(void *recvComm);
	ncclResult_t (*closeListen)(void *listenComm);
} ncclNet_v6_t;

typedef struct {
	const char *name;
	ncclResult_t (*init)(ncclDebugLogger_t logFunction);
	ncclResult_t (*devices)(int *ndev);
	ncclResult_t (*getProperties)(int dev, ncclNetProperties_v7_t *props);
	ncclResult_t (*listen)(int dev, void *handle, void **listenComm);
	ncclResult_t (*connect)(int dev, void *handle, void **sendComm,
				ncclNetDeviceHandle_v7_t **sendDevComm);
	ncclResult_t (*accept)(void *listenComm, void **recvComm,
			       ncclNetDeviceHandle_v7_t **recvDevComm);
	ncclResult_t (*regMr)(void *comm, void *data, int size, int type, void **mhandle);
	ncclResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type,
				    uint64_t offset, int fd, void **mhandle);
	ncclResult_t (*deregMr)(void *comm, void *mhandle);
	ncclResult_t (*isend)(void *sendComm, void *data, int size, int tag, void *mhandle,
			      void **request);
	ncclResult_t (*irecv)(void *recvComm, int n, void **data, int *sizes, int *tags,
			      void **mhandles, void **request);
	ncclResult_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles,
			       void **request);
	ncclResult_t (*test)(void *request, int *done, int *sizes);
	ncclResult_t (*closeSend)(void *sendComm);
	ncclResult_t (*closeRecv)(void *recvComm);
	ncclResult_t (*closeListen)(void *listenComm);
	ncclResult_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
	ncclResult_t (*irecvConsumed)(void *recvComm, int n, void *request);
} ncclNet_v7_t;

typedef struct {
	const char *name;
	ncclResult_t (*init)(ncclDebugLogger_t logFunction);
	ncclResult_t (*devices)(int *ndev);
	ncclResult_t (*getProperties)(int dev, ncclNetProperties_v8_t *props);
	ncclResult_t (*listen)(int dev, void *handle, void **listenComm);
	ncclResult_t (*connect)(int dev, void *handle, void **sendComm,
				ncclNetDeviceHandle_v8_t **sendDevComm);
	ncclResult_t (*accept)(void *listenComm, void **recvComm,
			       ncclNetDeviceHandle_v8_t **recvDevComm);
	ncclResult_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);
	ncclResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type,
				    uint64_t offset, int fd, void **mhandle);
	ncclResult_t (*deregMr)(void *comm, void *mhandle);
	ncclResult_t (*isend)(void *sendComm, void *data, int size, int tag, void *mhandle,
			      void **request);
	ncclResult_t (*irecv)(void *recvComm, int n, void **data, int *sizes, int *tags,
			      void **mhandles, void **request);
	ncclResult_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles,
			       void **request);
	ncclResult_t (*test)(void *request, int *done, int *sizes);
	ncclResult_t (*closeSend)(void *sendComm);
	ncclResult_t (*closeRecv)(void *recvComm);
	ncclResult_t (*closeListen)(void *listenComm);
	ncclResult_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
	ncclResult_t (*irecvConsumed)(void *recvComm, int n, void *request);
} ncclNet_v8_t;

#ifdef __cplusplus
#define TP_STATIC_ASSERT(c, m) static_assert(c, m)
#else
#define TP_STATIC_ASSERT(c, m) _Static_assert(c, m)
#endif
TP_STATIC_ASSERT(sizeof(ncclNetDeviceHandle_v7_t) == 32, "device handle is 32 bytes");
TP_STATIC_ASSERT(sizeof(struct tp_unpack_handle) == 24, "unpack handle is 24 bytes");
TP_STATIC_ASSERT(sizeof(tp_unpack_rec) == 16, "meta record is 16 bytes");
TP_STATIC_ASSERT(sizeof(ncclNetProperties_v6_t) == 48, "v6 properties are 48 bytes");
TP_STATIC_ASSERT(sizeof(ncclNetProperties_v7_t) == 56, "v7 properties are 56 bytes");
TP_STATIC_ASSERT(sizeof(ncclNetProperties_v8_t) == 64, "v8 properties are 64 bytes");
TP_STATIC_ASSERT(sizeof(ncclNet_v5_t) == 16 * sizeof(void *), "v5 table has 16 slots");
TP_STATIC_ASSERT(sizeof(ncclNet_v7_t) == 19 * sizeof(void *), "v7 table has 19 slots");
TP_STATIC_ASSERT(sizeof(ncclNet_v8_t) == 19 * sizeof(void *), "v8 table has 19 slots");

#endif
