/* Adapter for ncclNet_v8_t: the v7 table with a size_t regMr and
 * regIsGlobal in the properties; isend/irecv sizes are still int. */
#include "net/plugin_common.h"

#define T(net) TP_NET_TABLE(net, ncclNet_v8_t)

TP_NET_COMMON_OPS(v8, ncclNet_v8_t)

static int v8_get_properties(struct tp_net *net, int dev, struct tp_net_props *props)
{
	ncclNetProperties_v8_t p = { 0 };
	int rc;

	if (!T(net)->getProperties)
		return tp__net_unsupported(net, "getProperties");
	rc = tp__net_err(net, "getProperties", T(net)->getProperties(dev, &p));
	if (!rc)
		tp__net_props_v8(props, &p);
	return rc;
}

static int v8_connect(struct tp_net *net, int dev, void *handle, void **send_comm)
{
	return tp__net_connect_v7(net, T(net)->connect, dev, handle, send_comm);
}

static int v8_accept(struct tp_net *net, void *listen_comm, void **recv_comm,
		     ncclNetDeviceHandle_v7_t *dev_handle)
{
	return tp__net_accept_v7(net, T(net)->accept, listen_comm, recv_comm, dev_handle);
}

static int v8_reg_mr(struct tp_net *net, void *comm, void *data, size_t size, int type,
		     void **mhandle)
{
	return tp__net_reg_mr(net, T(net)->regMr, comm, data, size, type, mhandle);
}

static int v8_irecv_consumed(struct tp_net *net, void *recv_comm, void *request)
{
	return tp__net_irecv_consumed(net, T(net)->irecvConsumed, recv_comm, request);
}

const struct tp_net_ops tp__net_ops_v8 = {
	TP_NET_COMMON_OPS_INIT(v8),
	.get_properties = v8_get_properties,
	.connect = v8_connect,
	.accept = v8_accept,
	.reg_mr = v8_reg_mr,
	.irecv_consumed = v8_irecv_consumed,
};
