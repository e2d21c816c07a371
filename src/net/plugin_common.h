/* Helpers shared by the per-version adapters (plugin_v5.c .. plugin_v12.c).
 *
 * Most plugin calls have the same C signature in every ABI version and differ
 * only in where they sit in the table, so each helper here takes the slot's
 * function pointer and does the common work: an empty slot answers ENOTSUP,
 * sizes are checked against the plugin's int, and results go through
 * tp__net_err.  An adapter then only picks slots out of its own table type. */
#ifndef TP_NET_PLUGIN_COMMON_H
#define TP_NET_PLUGIN_COMMON_H

#include "net/net.h"

/* "ncclSystemError" etc.; "unknown ncclResult_t" for values past the enum. */
const char *tp__net_result_name(ncclResult_t r);

/* ENOTSUP with the detail "<plugin>: <op> not supported". */
int tp__net_unsupported(const struct tp_net *net, const char *op);

void tp__net_props_v6(struct tp_net_props *out, const ncclNetProperties_v6_t *p);
void tp__net_props_v7(struct tp_net_props *out, const ncclNetProperties_v7_t *p);
void tp__net_props_v8(struct tp_net_props *out, const ncclNetProperties_v8_t *p);
void tp__net_props_v9(struct tp_net_props *out, const ncclNetProperties_v9_t *p);
void tp__net_props_v11(struct tp_net_props *out, const ncclNetProperties_v11_t *p);
void tp__net_props_v12(struct tp_net_props *out, const ncclNetProperties_v12_t *p);

typedef ncclResult_t (*tp_nccl_devices_fn)(int *ndev);
typedef ncclResult_t (*tp_nccl_listen_fn)(int dev, void *handle, void **listen_comm);
typedef ncclResult_t (*tp_nccl_connect_v5_fn)(int dev, void *handle, void **send_comm);
typedef ncclResult_t (*tp_nccl_accept_v5_fn)(void *listen_comm, void **recv_comm);
typedef ncclResult_t (*tp_nccl_connect_v7_fn)(int dev, void *handle, void **send_comm,
					      ncclNetDeviceHandle_v7_t **dev_comm);
typedef ncclResult_t (*tp_nccl_accept_v7_fn)(void *listen_comm, void **recv_comm,
					     ncclNetDeviceHandle_v7_t **dev_comm);
typedef ncclResult_t (*tp_nccl_reg_mr_int_fn)(void *comm, void *data, int size, int type,
					      void **mhandle);
typedef ncclResult_t (*tp_nccl_reg_mr_fn)(void *comm, void *data, size_t size, int type,
					  void **mhandle);
typedef ncclResult_t (*tp_nccl_dereg_mr_fn)(void *comm, void *mhandle);
typedef ncclResult_t (*tp_nccl_isend_fn)(void *send_comm, void *data, int size, int tag,
					 void *mhandle, void **request);
typedef ncclResult_t (*tp_nccl_irecv_fn)(void *recv_comm, int n, void **data, int *sizes,
					 int *tags, void **mhandles, void **request);
typedef ncclResult_t (*tp_nccl_test_fn)(void *request, int *done, int *sizes);
typedef ncclResult_t (*tp_nccl_consumed_fn)(void *recv_comm, int n, void *request);
typedef ncclResult_t (*tp_nccl_close_fn)(void *comm);
typedef ncclResult_t (*tp_nccl_init_fn)(ncclDebugLogger_t log);
typedef ncclResult_t (*tp_nccl_isend_v9_fn)(void *send_comm, void *data, size_t size, int tag,
					    void *mhandle, void **request);
typedef ncclResult_t (*tp_nccl_irecv_v9_fn)(void *recv_comm, int n, void **data, size_t *sizes,
					    int *tags, void **mhandles, void **request);
typedef ncclResult_t (*tp_nccl_isend_v10_fn)(void *send_comm, void *data, size_t size, int tag,
					     void *mhandle, void *phandle, void **request);
typedef ncclResult_t (*tp_nccl_irecv_v10_fn)(void *recv_comm, int n, void **data, size_t *sizes,
					     int *tags, void **mhandles, void **phandles,
					     void **request);
typedef ncclResult_t (*tp_nccl_connect_v10_fn)(int dev, ncclNetCommConfig_v10_t *config,
					       void *handle, void **send_comm,
					       ncclNetDeviceHandle_v7_t **dev_comm);
typedef ncclResult_t (*tp_nccl_connect_v11_fn)(void *ctx, int dev, void *handle,
					       void **send_comm,
					       ncclNetDeviceHandle_v7_t **dev_comm);
typedef ncclResult_t (*tp_nccl_init_v11_fn)(void **ctx, uint64_t comm_id,
					    ncclNetCommConfig_v11_t *config, ncclDebugLogger_t log,
					    ncclProfilerCallback_t prof);
typedef ncclResult_t (*tp_nccl_finalize_fn)(void *ctx);
typedef ncclResult_t (*tp_nccl_listen_v11_fn)(void *ctx, int dev, void *handle,
					      void **listen_comm);

int tp__net_devices(struct tp_net *net, tp_nccl_devices_fn fn, int *ndev);
int tp__net_listen(struct tp_net *net, tp_nccl_listen_fn fn, int dev, void *handle,
		   void **listen_comm);
int tp__net_connect_v5(struct tp_net *net, tp_nccl_connect_v5_fn fn, int dev, void *handle,
		       void **send_comm);
int tp__net_accept_v5(struct tp_net *net, tp_nccl_accept_v5_fn fn, void *listen_comm,
		      void **recv_comm, ncclNetDeviceHandle_v7_t *dev_handle);
int tp__net_connect_v7(struct tp_net *net, tp_nccl_connect_v7_fn fn, int dev, void *handle,
		       void **send_comm);
int tp__net_accept_v7(struct tp_net *net, tp_nccl_accept_v7_fn fn, void *listen_comm,
		      void **recv_comm, ncclNetDeviceHandle_v7_t *dev_handle);
int tp__net_reg_mr_int(struct tp_net *net, tp_nccl_reg_mr_int_fn fn, void *comm, void *data,
		       size_t size, int type, void **mhandle);
int tp__net_reg_mr(struct tp_net *net, tp_nccl_reg_mr_fn fn, void *comm, void *data,
		   size_t size, int type, void **mhandle);
int tp__net_dereg_mr(struct tp_net *net, tp_nccl_dereg_mr_fn fn, void *comm, void *mhandle);
int tp__net_isend(struct tp_net *net, tp_nccl_isend_fn fn, void *send_comm, void *data,
		  size_t size, int tag, void *mhandle, void **request);
int tp__net_irecv(struct tp_net *net, tp_nccl_irecv_fn fn, void *recv_comm, void *data,
		  size_t size, int tag, void *mhandle, void **request);
int tp__net_test(struct tp_net *net, tp_nccl_test_fn fn, void *request, int *done, int *size);
int tp__net_irecv_consumed(struct tp_net *net, tp_nccl_consumed_fn fn, void *recv_comm,
			   void *request);
int tp__net_close(struct tp_net *net, tp_nccl_close_fn fn, const char *op, void *comm);

/* init(logger), the form up to v9. */
int tp__net_init_log(struct tp_net *net, tp_nccl_init_fn fn, ncclDebugLogger_t log);
/* Given to v10+ plugins as their profiler: the library records no plugin
 * events; it answers success with no event handle. */
ncclResult_t tp__net_profiler(void **eHandle, int type, void *pHandle, int64_t pluginId,
			      void *extData);
/* v9+: size_t sizes.  v10+: profiler handles too, always NULL (no events). */
int tp__net_isend_v9(struct tp_net *net, tp_nccl_isend_v9_fn fn, void *send_comm, void *data,
		     size_t size, int tag, void *mhandle, void **request);
int tp__net_irecv_v9(struct tp_net *net, tp_nccl_irecv_v9_fn fn, void *recv_comm, void *data,
		     size_t size, int tag, void *mhandle, void **request);
int tp__net_isend_v10(struct tp_net *net, tp_nccl_isend_v10_fn fn, void *send_comm, void *data,
		      size_t size, int tag, void *mhandle, void **request);
int tp__net_irecv_v10(struct tp_net *net, tp_nccl_irecv_v10_fn fn, void *recv_comm, void *data,
		      size_t size, int tag, void *mhandle, void **request);
/* v10: connect with a comm config (the plugin's default traffic class). */
int tp__net_connect_v10(struct tp_net *net, tp_nccl_connect_v10_fn fn, int dev, void *handle,
			void **send_comm);
/* v11+: init gives net->ctx, the session's context (a fresh commId for
 * each; the plugin's default traffic class); finalize ends it, logging a
 * failure (nothing is left to undo). */
int tp__net_init_v11(struct tp_net *net, tp_nccl_init_v11_fn fn, ncclDebugLogger_t log);
void tp__net_finalize_v11(struct tp_net *net, tp_nccl_finalize_fn fn);
/* v11+: listen and connect in the session's context. */
int tp__net_listen_v11(struct tp_net *net, tp_nccl_listen_v11_fn fn, int dev, void *handle,
		       void **listen_comm);
int tp__net_connect_v11(struct tp_net *net, tp_nccl_connect_v11_fn fn, int dev, void *handle,
			void **send_comm);

/* The adapter's own table. */
#define TP_NET_TABLE(net, type) ((const type *)(net)->table)

/* Wrappers for the slots whose signature every version shares; an adapter
 * invokes this once with its prefix and table type, then lists
 * TP_NET_BASE_OPS_INIT(prefix) in its tp_net_ops initialiser.
 * TP_NET_COMMON_OPS adds the slots v5..v8 share as well. */
#define TP_NET_BASE_OPS(pfx, type)                                                       \
	static int pfx##_devices(struct tp_net *net, int *ndev)                          \
	{                                                                                \
		return tp__net_devices(net, TP_NET_TABLE(net, type)->devices, ndev);     \
	}                                                                                \
	static int pfx##_dereg_mr(struct tp_net *net, void *comm, void *mhandle)         \
	{                                                                                \
		return tp__net_dereg_mr(net, TP_NET_TABLE(net, type)->deregMr, comm,     \
					mhandle);                                        \
	}                                                                                \
	static int pfx##_test(struct tp_net *net, void *request, int *done, int *size)   \
	{                                                                                \
		return tp__net_test(net, TP_NET_TABLE(net, type)->test, request, done,   \
				    size);                                               \
	}                                                                                \
	static int pfx##_close_send(struct tp_net *net, void *comm)                      \
	{                                                                                \
		return tp__net_close(net, TP_NET_TABLE(net, type)->closeSend,            \
				     "closeSend", comm);                                 \
	}                                                                                \
	static int pfx##_close_recv(struct tp_net *net, void *comm)                      \
	{                                                                                \
		return tp__net_close(net, TP_NET_TABLE(net, type)->closeRecv,            \
				     "closeRecv", comm);                                 \
	}                                                                                \
	static int pfx##_close_listen(struct tp_net *net, void *comm)                    \
	{                                                                                \
		return tp__net_close(net, TP_NET_TABLE(net, type)->closeListen,          \
				     "closeListen", comm);                               \
	}

#define TP_NET_BASE_OPS_INIT(pfx)                                                        \
	.devices = pfx##_devices, .dereg_mr = pfx##_dereg_mr, .test = pfx##_test,        \
	.close_send = pfx##_close_send, .close_recv = pfx##_close_recv,                  \
	.close_listen = pfx##_close_listen

#define TP_NET_COMMON_OPS(pfx, type)                                                     \
	TP_NET_BASE_OPS(pfx, type)                                                       \
	static int pfx##_init(struct tp_net *net, ncclDebugLogger_t log)                 \
	{                                                                                \
		return tp__net_init_log(net, TP_NET_TABLE(net, type)->init, log);        \
	}                                                                                \
	static int pfx##_listen(struct tp_net *net, int dev, void *handle, void **lcomm) \
	{                                                                                \
		return tp__net_listen(net, TP_NET_TABLE(net, type)->listen, dev, handle, \
				      lcomm);                                            \
	}                                                                                \
	static int pfx##_isend(struct tp_net *net, void *comm, void *data, size_t size,  \
			       int tag, void *mhandle, void **request)                   \
	{                                                                                \
		return tp__net_isend(net, TP_NET_TABLE(net, type)->isend, comm, data,    \
				     size, tag, mhandle, request);                       \
	}                                                                                \
	static int pfx##_irecv(struct tp_net *net, void *comm, void *data, size_t size,  \
			       int tag, void *mhandle, void **request)                   \
	{                                                                                \
		return tp__net_irecv(net, TP_NET_TABLE(net, type)->irecv, comm, data,    \
				     size, tag, mhandle, request);                       \
	}

#define TP_NET_COMMON_OPS_INIT(pfx)                                                      \
	TP_NET_BASE_OPS_INIT(pfx), .init = pfx##_init, .listen = pfx##_listen,           \
	.isend = pfx##_isend, .irecv = pfx##_irecv

#endif
