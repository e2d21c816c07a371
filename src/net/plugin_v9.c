/* Adapter for ncclNet_v9_t: the v8 table with size_t sizes in isend and
 * irecv, makeVDevice appended (not used: channels are striped over real
 * devices by the library), and properties with forceFlush, vProps and
 * maxP2pBytes.  irecv reads *request as flags from here on. */
#include "net/plugin_common.h"

#define T(net) TP_NET_TABLE(net, ncclNet_v9_t)

TP_NET_BASE_OPS(v9, ncclNet_v9_t)

static int v9_init(struct tp_net *net, ncclDebugLogger_t log)
{
	return tp__net_init_log(net, T(net)->init, log);
}

static int v9_get_properties(struct tp_net *net, int dev, struct tp_net_props *props)
{
	ncclNetProperties_v9_t p = { 0 };
	int rc;

	if (!T(net)->getProperties)
		return tp__net_unsupported(net, "getProperties");
	rc = tp__net_err(net, "getProperties", T(net)->getProperties(dev, &p));
	if (!rc)
		tp__net_props_v9(props, &p);
	return rc;
}

static int v9_listen(struct tp_net *net, int dev, void *handle, void **listen_comm)
{
	return tp__net_listen(net, T(net)->listen, dev, handle, listen_comm);
}

static int v9_connect(struct tp_net *net, int dev, void *handle, void **send_comm)
{
	return tp__net_connect_v7(net, T(net)->connect, dev, handle, send_comm);
}

static int v9_accept(struct tp_net *net, void *listen_comm, void **recv_comm,
		     ncclNetDeviceHandle_v7_t *dev_handle)
{
	return tp__net_accept_v7(net, T(net)->accept, listen_comm, recv_comm, dev_handle);
}

static int v9_reg_mr(struct tp_net *net, void *comm, void *data, size_t size, int type,
		     void **mhandle)
{
	return tp__net_reg_mr(net, T(net)->regMr, comm, data, size, type, mhandle);
}

static int v9_isend(struct tp_net *net, void *comm, void *data, size_t size, int tag,
		    void *mhandle, void **request)
{
	return tp__net_isend_v9(net, T(net)->isend, comm, data, size, tag, mhandle, request);
}

static int v9_irecv(struct tp_net *net, void *comm, void *data, size_t size, int tag,
		    void *mhandle, void **request)
{
	return tp__net_irecv_v9(net, T(net)->irecv, comm, data, size, tag, mhandle, request);
}

static int v9_irecv_consumed(struct tp_net *net, void *recv_comm, void *request)
{
	return tp__net_irecv_consumed(net, T(net)->irecvConsumed, recv_comm, request);
}

const struct tp_net_ops tp__net_ops_v9 = {
	TP_NET_BASE_OPS_INIT(v9),
	.init = v9_init,
	.get_properties = v9_get_properties,
	.listen = v9_listen,
	.connect = v9_connect,
	.accept = v9_accept,
	.reg_mr = v9_reg_mr,
	.isend = v9_isend,
	.irecv = v9_irecv,
	.irecv_consumed = v9_irecv_consumed,
};
