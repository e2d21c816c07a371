/* Adapter for ncclNet_v10_t: v9 with a profiler callback given to init,
 * a comm config given to connect (the plugin's default traffic class) and
 * profiler handles on isend/irecv (none: the library records no plugin
 * events). */
#include "net/plugin_common.h"

#define T(net) TP_NET_TABLE(net, ncclNet_v10_t)

TP_NET_BASE_OPS(v10, ncclNet_v10_t)

static int v10_init(struct tp_net *net, ncclDebugLogger_t log)
{
	if (!T(net)->init)
		return 0;
	return tp__net_err(net, "init", T(net)->init(log, tp__net_profiler));
}

static int v10_get_properties(struct tp_net *net, int dev, struct tp_net_props *props)
{
	ncclNetProperties_v10_t p = { 0 };
	int rc;

	if (!T(net)->getProperties)
		return tp__net_unsupported(net, "getProperties");
	rc = tp__net_err(net, "getProperties", T(net)->getProperties(dev, &p));
	if (!rc)
		tp__net_props_v9(props, &p);
	return rc;
}

static int v10_listen(struct tp_net *net, int dev, void *handle, void **listen_comm)
{
	return tp__net_listen(net, T(net)->listen, dev, handle, listen_comm);
}

static int v10_connect(struct tp_net *net, int dev, void *handle, void **send_comm)
{
	return tp__net_connect_v10(net, T(net)->connect, dev, handle, send_comm);
}

static int v10_accept(struct tp_net *net, void *listen_comm, void **recv_comm,
		      ncclNetDeviceHandle_v7_t *dev_handle)
{
	return tp__net_accept_v7(net, T(net)->accept, listen_comm, recv_comm, dev_handle);
}

static int v10_reg_mr(struct tp_net *net, void *comm, void *data, size_t size, int type,
		      void **mhandle)
{
	return tp__net_reg_mr(net, T(net)->regMr, comm, data, size, type, mhandle);
}

static int v10_isend(struct tp_net *net, void *comm, void *data, size_t size, int tag,
		     void *mhandle, void **request)
{
	return tp__net_isend_v10(net, T(net)->isend, comm, data, size, tag, mhandle, request);
}

static int v10_irecv(struct tp_net *net, void *comm, void *data, size_t size, int tag,
		     void *mhandle, void **request)
{
	return tp__net_irecv_v10(net, T(net)->irecv, comm, data, size, tag, mhandle, request);
}

static int v10_irecv_consumed(struct tp_net *net, void *recv_comm, void *request)
{
	return tp__net_irecv_consumed(net, T(net)->irecvConsumed, recv_comm, request);
}

const struct tp_net_ops tp__net_ops_v10 = {
	TP_NET_BASE_OPS_INIT(v10),
	.init = v10_init,
	.get_properties = v10_get_properties,
	.listen = v10_listen,
	.connect = v10_connect,
	.accept = v10_accept,
	.reg_mr = v10_reg_mr,
	.isend = v10_isend,
	.irecv = v10_irecv,
	.irecv_consumed = v10_irecv_consumed,
};
