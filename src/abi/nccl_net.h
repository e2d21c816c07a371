/*
 * NCCL network-plugin ABI, versions 5 to 12 (x86-64), as consumed by the
 * library and implemented by the emulator plugin.  Written from NCCL's
 * public plugin headers (net_v5.h .. net_v12.h, net_device.h, nccl_net.h)
 * and the unpack definitions (device/network/unpack/unpack_defs.h).  With
 * handle_layout.h and dev_copy.cuh beside it, this is the only code the
 * library and plugins/emu share.
 *
 * What changes between versions (docs/architecture.md, "Plugin ABI
 * versions", says what the library does with each):
 *   v6   regMrDmaBuf after regMr.
 *   v7   connect/accept take a device-handle pointer; getDeviceMr and
 *        irecvConsumed appended; netDeviceType/Version in the properties.
 *   v8   regMr takes a size_t; regIsGlobal in the properties.
 *   v9   isend/irecv sizes are size_t; makeVDevice appended; properties add
 *        forceFlush, vProps (4 devices), maxP2pBytes, maxCollBytes.  From
 *        here on the caller passes flags in through *request of irecv
 *        (NCCL_NET_OPTIONAL_RECV_COMPLETION), so *request must be NULL
 *        (no flags) before every irecv.
 *   v10  init(logger, profiler callback); connect takes an
 *        ncclNetCommConfig; isend/irecv take profiler handles.
 *   v11  init(&ctx, commId, config, logger, profiler) once per user of the
 *        plugin (NCCL: per communicator), listen/connect take that ctx,
 *        finalize(ctx) and setNetAttr(ctx, attr) appended;
 *        maxMultiRequestSize in the properties.
 *   v12  vProps hold up to 8 devices; railId and planeId in the
 *        properties.
 * Requests per comm NCCL may have outstanding (NCCL_NET_MAX_REQUESTS): 8
 * up to NCCL 2.18, the releases of ABI v5 and v6; 32 from ABI v7 on.
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

/* Profiler callback given to init from v10 on; a plugin calls it to open,
 * update and close events of its own (eHandle), under the pHandle passed
 * to isend/irecv. */
typedef ncclResult_t (*ncclProfilerCallback_t)(void **eHandle, int type, void *pHandle,
					       int64_t pluginId, void *extData);

#define NCCL_NET_HANDLE_MAXSIZE 128
#define NCCL_PTR_HOST 0x1
#define NCCL_PTR_CUDA 0x2
#define NCCL_PTR_DMABUF 0x4

/* Passed in through *request to irecv (v9+): NCCL will not test the
 * request (LL protocols poll a flag in the data instead). */
#define NCCL_NET_OPTIONAL_RECV_COMPLETION 0x1
#define NCCL_NET_TRAFFIC_CLASS_UNDEF (-1)
#define NCCL_NET_ID_UNDEF (-1) /* railId, planeId: not known */

/* NCCL_NET_MAX_REQUESTS: what NCCL promises never to exceed per comm. */
#define TP_NCCL_MAX_REQUESTS_V6 8  /* NCCL <= 2.18: ABI v5, v6 */
#define TP_NCCL_MAX_REQUESTS_V7 32 /* NCCL >= 2.19: ABI v7 and later */

#define NCCL_NET_MAX_DEVS_PER_NIC_V9 4 /* vProps of v9, v10 and v11 */
#define NCCL_NET_MAX_DEVS_PER_NIC_V12 8

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
typedef ncclNetDeviceHandle_v7_t ncclNetDeviceHandle_v9_t;
typedef ncclNetDeviceHandle_v7_t ncclNetDeviceHandle_v10_t;
typedef ncclNetDeviceHandle_v7_t ncclNetDeviceHandle_v11_t;
typedef ncclNetDeviceHandle_v7_t ncclNetDeviceHandle_v12_t;

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


/* v9: sizes grow to size_t; virtual NICs (vProps: the physical devices a
 * virtual one merges); per-operation size limits. */
typedef struct {
	int ndevs;
	int devs[NCCL_NET_MAX_DEVS_PER_NIC_V9];
} ncclNetVDeviceProps_v9_t;
typedef ncclNetVDeviceProps_v9_t ncclNetVDeviceProps_v10_t;
typedef ncclNetVDeviceProps_v9_t ncclNetVDeviceProps_v11_t;

typedef struct {
	int ndevs;
	int devs[NCCL_NET_MAX_DEVS_PER_NIC_V12];
} ncclNetVDeviceProps_v12_t;

typedef struct {
	char *name;
	char *pciPath;
	uint64_t guid;
	int ptrSupport;
	int regIsGlobal;
	int forceFlush; /* receives into CUDA memory need iflush */
	int speed;
	int port;
	float latency;
	int maxComms;
	int maxRecvs;
	ncclNetDeviceType netDeviceType;
	int netDeviceVersion;
	ncclNetVDeviceProps_v9_t vProps;
	size_t maxP2pBytes;  /* largest isend/irecv */
	size_t maxCollBytes;
} ncclNetProperties_v9_t;
typedef ncclNetProperties_v9_t ncclNetProperties_v10_t;

typedef struct {
	char *name;
	char *pciPath;
	uint64_t guid;
	int ptrSupport;
	int regIsGlobal;
	int forceFlush;
	int speed;
	int port;
	float latency;
	int maxComms;
	int maxRecvs;
	ncclNetDeviceType netDeviceType;
	int netDeviceVersion;
	ncclNetVDeviceProps_v11_t vProps;
	size_t maxP2pBytes;
	size_t maxCollBytes;
	int maxMultiRequestSize;
} ncclNetProperties_v11_t;

typedef struct {
	char *name;
	char *pciPath;
	uint64_t guid;
	int ptrSupport;
	int regIsGlobal;
	int forceFlush;
	int speed;
	int port;
	float latency;
	int maxComms;
	int maxRecvs;
	ncclNetDeviceType netDeviceType;
	int netDeviceVersion;
	ncclNetVDeviceProps_v12_t vProps;
	size_t maxP2pBytes;
	size_t maxCollBytes;
	int maxMultiRequestSize;
	int16_t railId;  /* NCCL_NET_ID_UNDEF when not known */
	int16_t planeId;
} ncclNetProperties_v12_t;

/* v10+: per-connection configuration given to connect (v10) or init (v11+). */
typedef struct {
	int trafficClass; /* NCCL_NET_TRAFFIC_CLASS_UNDEF: the plugin's default */
} ncclNetCommConfig_v10_t;
typedef ncclNetCommConfig_v10_t ncclNetCommConfig_v11_t;
typedef ncclNetCommConfig_v10_t ncclNetCommConfig_v12_t;

/* v11+: setNetAttr's hints (NCCL's collective/algorithm in use). */
typedef struct {
	int32_t maxConcurrentPeers;
	int32_t minConcurrentPeers;
	int32_t maxFlowsPerPeer;
	int32_t minFlowsPerPeer;
} ncclNetCommAttr_v11_t;

typedef struct {
	ncclNetCommAttr_v11_t sendCommAttr;
	ncclNetCommAttr_v11_t recvCommAttr;
	uint32_t op;
	uint32_t algo;
	uint32_t proto;
} ncclNetAttr_v11_t;
typedef ncclNetAttr_v11_t ncclNetAttr_v12_t;

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

typedef struct {
	const char *name;
	ncclResult_t (*init)(ncclDebugLogger_t logFunction);
	ncclResult_t (*devices)(int *ndev);
	ncclResult_t (*getProperties)(int dev, ncclNetProperties_v9_t *props);
	ncclResult_t (*listen)(int dev, void *handle, void **listenComm);
	ncclResult_t (*connect)(int dev, void *handle, void **sendComm,
				ncclNetDeviceHandle_v9_t **sendDevComm);
	ncclResult_t (*accept)(void *listenComm, void **recvComm,
			       ncclNetDeviceHandle_v9_t **recvDevComm);
	ncclResult_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);
	ncclResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type,
				    uint64_t offset, int fd, void **mhandle);
	ncclResult_t (*deregMr)(void *comm, void *mhandle);
	ncclResult_t (*isend)(void *sendComm, void *data, size_t size, int tag, void *mhandle,
			      void **request);
	ncclResult_t (*irecv)(void *recvComm, int n, void **data, size_t *sizes, int *tags,
			      void **mhandles, void **request);
	ncclResult_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles,
			       void **request);
	ncclResult_t (*test)(void *request, int *done, int *sizes);
	ncclResult_t (*closeSend)(void *sendComm);
	ncclResult_t (*closeRecv)(void *recvComm);
	ncclResult_t (*closeListen)(void *listenComm);
	ncclResult_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
	ncclResult_t (*irecvConsumed)(void *recvComm, int n, void *request);
	ncclResult_t (*makeVDevice)(int *d, ncclNetVDeviceProps_v9_t *props);
} ncclNet_v9_t;

typedef struct {
	const char *name;
	ncclResult_t (*init)(ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction);
	ncclResult_t (*devices)(int *ndev);
	ncclResult_t (*getProperties)(int dev, ncclNetProperties_v10_t *props);
	ncclResult_t (*listen)(int dev, void *handle, void **listenComm);
	ncclResult_t (*connect)(int dev, ncclNetCommConfig_v10_t *config, void *handle,
				void **sendComm, ncclNetDeviceHandle_v10_t **sendDevComm);
	ncclResult_t (*accept)(void *listenComm, void **recvComm,
			       ncclNetDeviceHandle_v10_t **recvDevComm);
	ncclResult_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);
	ncclResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type,
				    uint64_t offset, int fd, void **mhandle);
	ncclResult_t (*deregMr)(void *comm, void *mhandle);
	ncclResult_t (*isend)(void *sendComm, void *data, size_t size, int tag, void *mhandle,
			      void *phandle, void **request);
	ncclResult_t (*irecv)(void *recvComm, int n, void **data, size_t *sizes, int *tags,
			      void **mhandles, void **phandles, void **request);
	ncclResult_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles,
			       void **request);
	ncclResult_t (*test)(void *request, int *done, int *sizes);
	ncclResult_t (*closeSend)(void *sendComm);
	ncclResult_t (*closeRecv)(void *recvComm);
	ncclResult_t (*closeListen)(void *listenComm);
	ncclResult_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
	ncclResult_t (*irecvConsumed)(void *recvComm, int n, void *request);
	ncclResult_t (*makeVDevice)(int *d, ncclNetVDeviceProps_v10_t *props);
} ncclNet_v10_t;

/* v11 and v12 differ only in their properties and vProps. */
#define TP_NCCL_NET_V11_TABLE(props_t, vprops_t, attr_t, config_t)                          \
	struct {                                                                           \
		const char *name;                                                          \
		ncclResult_t (*init)(void **ctx, uint64_t commId, config_t *config,        \
				     ncclDebugLogger_t logFunction,                        \
				     ncclProfilerCallback_t profFunction);                 \
		ncclResult_t (*devices)(int *ndev);                                        \
		ncclResult_t (*getProperties)(int dev, props_t *props);                    \
		ncclResult_t (*listen)(void *ctx, int dev, void *handle, void **listenComm); \
		ncclResult_t (*connect)(void *ctx, int dev, void *handle, void **sendComm, \
					ncclNetDeviceHandle_v7_t **sendDevComm);           \
		ncclResult_t (*accept)(void *listenComm, void **recvComm,                  \
				       ncclNetDeviceHandle_v7_t **recvDevComm);            \
		ncclResult_t (*regMr)(void *comm, void *data, size_t size, int type,       \
				      void **mhandle);                                     \
		ncclResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type, \
					    uint64_t offset, int fd, void **mhandle);      \
		ncclResult_t (*deregMr)(void *comm, void *mhandle);                        \
		ncclResult_t (*isend)(void *sendComm, void *data, size_t size, int tag,    \
				      void *mhandle, void *phandle, void **request);       \
		ncclResult_t (*irecv)(void *recvComm, int n, void **data, size_t *sizes,   \
				      int *tags, void **mhandles, void **phandles,         \
				      void **request);                                     \
		ncclResult_t (*iflush)(void *recvComm, int n, void **data, int *sizes,     \
				       void **mhandles, void **request);                   \
		ncclResult_t (*test)(void *request, int *done, int *sizes);                \
		ncclResult_t (*closeSend)(void *sendComm);                                 \
		ncclResult_t (*closeRecv)(void *recvComm);                                 \
		ncclResult_t (*closeListen)(void *listenComm);                             \
		ncclResult_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle); \
		ncclResult_t (*irecvConsumed)(void *recvComm, int n, void *request);       \
		ncclResult_t (*makeVDevice)(int *d, vprops_t *props);                      \
		ncclResult_t (*finalize)(void *ctx);                                       \
		ncclResult_t (*setNetAttr)(void *ctx, attr_t *netAttr);                    \
	}

typedef TP_NCCL_NET_V11_TABLE(ncclNetProperties_v11_t, ncclNetVDeviceProps_v11_t,
			      ncclNetAttr_v11_t, ncclNetCommConfig_v11_t) ncclNet_v11_t;
typedef TP_NCCL_NET_V11_TABLE(ncclNetProperties_v12_t, ncclNetVDeviceProps_v12_t,
			      ncclNetAttr_v12_t, ncclNetCommConfig_v12_t) ncclNet_v12_t;

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
TP_STATIC_ASSERT(sizeof(ncclNetProperties_v9_t) == 104, "v9/v10 properties are 104 bytes");
TP_STATIC_ASSERT(offsetof(ncclNetProperties_v9_t, maxP2pBytes) == 88, "v9 maxP2pBytes at 88");
TP_STATIC_ASSERT(sizeof(ncclNetProperties_v11_t) == 112, "v11 properties are 112 bytes");
TP_STATIC_ASSERT(sizeof(ncclNetProperties_v12_t) == 128, "v12 properties are 128 bytes");
TP_STATIC_ASSERT(offsetof(ncclNetProperties_v12_t, railId) == 124, "v12 railId at 124");
TP_STATIC_ASSERT(sizeof(ncclNet_v9_t) == 20 * sizeof(void *), "v9 table has 20 slots");
TP_STATIC_ASSERT(sizeof(ncclNet_v10_t) == 20 * sizeof(void *), "v10 table has 20 slots");
TP_STATIC_ASSERT(sizeof(ncclNet_v11_t) == 22 * sizeof(void *), "v11 table has 22 slots");
TP_STATIC_ASSERT(sizeof(ncclNet_v12_t) == 22 * sizeof(void *), "v12 table has 22 slots");
TP_STATIC_ASSERT(offsetof(ncclNet_v12_t, finalize) == 20 * sizeof(void *), "v12 finalize slot");

#endif
