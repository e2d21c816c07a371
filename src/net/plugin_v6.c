/* Adapter for ncclNet_v6_t: v5 plus regMrDmaBuf (not used); no device handles, int sizes. */
#include "net/plugin_common.h"

#define T(net) TP_NET_TABLE(net, ncclNet_v6_t)

TP_NET_COMMON_OPS(v6, ncclNet_v6_t)

static int v6_get_properties(struct tp_net *net, int dev, struct tp_net_props *props)
{
	ncclNetProperties_v6_t p = { 0 };
	int rc;

	if (!T(net)->getProperties)
		return tp__net_unsupported(net, "getProperties");
	rc = tp__net_err(net, "getProperties", T(net)->getProperties(dev, &p));
	if (!rc)
		tp__net_props_v6(props, &p);
	return rc;
}

static int v6_connect(struct tp_net *net, int dev, void *handle, void **send_comm)
{
	return tp__net_connect_v5(net, T(net)->connect, dev, handle, send_comm);
}

static int v6_accept(struct tp_net *net, void *listen_comm, void **recv_comm,
		     ncclNetDeviceHandle_v7_t *dev_handle)
{
	return tp__net_accept_v5(net, T(net)->accept, listen_comm, recv_comm, dev_handle);
}

static int v6_reg_mr(struct tp_net *net, void *comm, void *data, size_t size, int type,
		     void **mhandle)
{
	return tp__net_reg_mr_int(net, T(net)->regMr, comm, data, size, type, mhandle);
}

static int v6_irecv_consumed(struct tp_net *net, void *recv_comm, void *request)
{
	return 0;
}

const struct tp_net_ops tp__net_ops_v6 = {
	TP_NET_COMMON_OPS_INIT(v6),
	.get_properties = v6_get_properties,
	.connect = v6_connect,
	.accept = v6_accept,
	.reg_mr = v6_reg_mr,
	.irecv_consumed = v6_irecv_consumed,
};
