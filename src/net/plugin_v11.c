/* Adapter for ncclNet_v11_t: init once per session, giving that session's
 * context (net->ctx), which listen and connect take and finalize ends at
 * the session's end; setNetAttr is never called (its hints describe
 * NCCL's collectives); properties add maxMultiRequestSize.  Otherwise
 * v10: size_t sizes, profiler handles (none), irecv flags in *request. */
#include "net/plugin_common.h"

#define T(net) TP_NET_TABLE(net, ncclNet_v11_t)

TP_NET_BASE_OPS(v11, ncclNet_v11_t)

static int v11_init(struct tp_net *net, ncclDebugLogger_t log)
{
	return tp__net_init_v11(net, T(net)->init, log);
}

static void v11_finalize(struct tp_net *net)
{
	tp__net_finalize_v11(net, T(net)->finalize);
}

static int v11_get_properties(struct tp_net *net, int dev, struct tp_net_props *props)
{
	ncclNetProperties_v11_t p = { 0 };
	int rc;

	if (!T(net)->getProperties)
		return tp__net_unsupported(net, "getProperties");
	rc = tp__net_err(net, "getProperties", T(net)->getProperties(dev, &p));
	if (!rc)
		tp__net_props_v11(props, &p);
	return rc;
}

static int v11_listen(struct tp_net *net, int dev, void *handle, void **listen_comm)
{
	return tp__net_listen_v11(net, T(net)->listen, dev, handle, listen_comm);
}

static int v11_connect(struct tp_net *net, int dev, void *handle, void **send_comm)
{
	return tp__net_connect_v11(net, T(net)->connect, dev, handle, send_comm);
}

static int v11_accept(struct tp_net *net, void *listen_comm, void **recv_comm,
		       ncclNetDeviceHandle_v7_t *dev_handle)
{
	return tp__net_accept_v7(net, T(net)->accept, listen_comm, recv_comm, dev_handle);
}

static int v11_reg_mr(struct tp_net *net, void *comm, void *data, size_t size, int type,
		      void **mhandle)
{
	return tp__net_reg_mr(net, T(net)->regMr, comm, data, size, type, mhandle);
}

static int v11_isend(struct tp_net *net, void *comm, void *data, size_t size, int tag,
		     void *mhandle, void **request)
{
	return tp__net_isend_v10(net, T(net)->isend, comm, data, size, tag, mhandle, request);
}

static int v11_irecv(struct tp_net *net, void *comm, void *data, size_t size, int tag,
		     void *mhandle, void **request)
{
	return tp__net_irecv_v10(net, T(net)->irecv, comm, data, size, tag, mhandle, request);
}

static int v11_irecv_consumed(struct tp_net *net, void *recv_comm, void *request)
{
	return tp__net_irecv_consumed(net, T(net)->irecvConsumed, recv_comm, request);
}

const struct tp_net_ops tp__net_ops_v11 = {
	TP_NET_BASE_OPS_INIT(v11),
	.init = v11_init,
	.finalize = v11_finalize,
	.get_properties = v11_get_properties,
	.listen = v11_listen,
	.connect = v11_connect,
	.accept = v11_accept,
	.reg_mr = v11_reg_mr,
	.isend = v11_isend,
	.irecv = v11_irecv,
	.irecv_consumed = v11_irecv_consumed,
};
