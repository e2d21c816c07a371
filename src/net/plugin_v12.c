/* Adapter for ncclNet_v12_t: the v11 table (init per session with a
 * context, finalize at its end) with properties that add railId and
 * planeId and virtual NICs of up to 8 devices (not used by the library). */
#include "net/plugin_common.h"

#define T(net) TP_NET_TABLE(net, ncclNet_v12_t)

TP_NET_BASE_OPS(v12, ncclNet_v12_t)

static int v12_init(struct tp_net *net, ncclDebugLogger_t log)
{
	return tp__net_init_v11(net, T(net)->init, log);
}

static void v12_finalize(struct tp_net *net)
{
	tp__net_finalize_v11(net, T(net)->finalize);
}

static int v12_get_properties(struct tp_net *net, int dev, struct tp_net_props *props)
{
	ncclNetProperties_v12_t p = { 0 };
	int rc;

	if (!T(net)->getProperties)
		return tp__net_unsupported(net, "getProperties");
	rc = tp__net_err(net, "getProperties", T(net)->getProperties(dev, &p));
	if (!rc)
		tp__net_props_v12(props, &p);
	return rc;
}

static int v12_listen(struct tp_net *net, int dev, void *handle, void **listen_comm)
{
	return tp__net_listen_v11(net, T(net)->listen, dev, handle, listen_comm);
}

static int v12_connect(struct tp_net *net, int dev, void *handle, void **send_comm)
{
	return tp__net_connect_v11(net, T(net)->connect, dev, handle, send_comm);
}

static int v12_accept(struct tp_net *net, void *listen_comm, void **recv_comm,
		       ncclNetDeviceHandle_v7_t *dev_handle)
{
	return tp__net_accept_v7(net, T(net)->accept, listen_comm, recv_comm, dev_handle);
}

static int v12_reg_mr(struct tp_net *net, void *comm, void *data, size_t size, int type,
		      void **mhandle)
{
	return tp__net_reg_mr(net, T(net)->regMr, comm, data, size, type, mhandle);
}

static int v12_isend(struct tp_net *net, void *comm, void *data, size_t size, int tag,
		     void *mhandle, void **request)
{
	return tp__net_isend_v10(net, T(net)->isend, comm, data, size, tag, mhandle, request);
}

static int v12_irecv(struct tp_net *net, void *comm, void *data, size_t size, int tag,
		     void *mhandle, void **request)
{
	return tp__net_irecv_v10(net, T(net)->irecv, comm, data, size, tag, mhandle, request);
}

static int v12_irecv_consumed(struct tp_net *net, void *recv_comm, void *request)
{
	return tp__net_irecv_consumed(net, T(net)->irecvConsumed, recv_comm, request);
}

const struct tp_net_ops tp__net_ops_v12 = {
	TP_NET_BASE_OPS_INIT(v12),
	.init = v12_init,
	.finalize = v12_finalize,
	.get_properties = v12_get_properties,
	.listen = v12_listen,
	.connect = v12_connect,
	.accept = v12_accept,
	.reg_mr = v12_reg_mr,
	.isend = v12_isend,
	.irecv = v12_irecv,
	.irecv_consumed = v12_irecv_consumed,
};
