/* What the fake plugins (fake_plugin.c) record, read by the tests through
 * dlsym(net->dl, "fake_calls"). */
#ifndef TP_TEST_FAKE_PLUGIN_H
#define TP_TEST_FAKE_PLUGIN_H

#include <stddef.h>

#include "abi/nccl_net.h"

#define FAKE_LISTEN_COMM ((void *)0x1100)
#define FAKE_SEND_COMM ((void *)0x2200)
#define FAKE_RECV_COMM ((void *)0x3300)
#define FAKE_MHANDLE ((void *)0x4400)
#define FAKE_SEND_REQ ((void *)0x5500)
#define FAKE_RECV_REQ ((void *)0x6600)
#define FAKE_DEV_PTR ((void *)0x7700)
#define FAKE_NDEV 2

struct fake_calls {
	int init, devices, get_properties, listen, connect, accept, reg_mr, dereg_mr;
	int isend, irecv, test, irecv_consumed, close_send, close_recv, close_listen;
	ncclDebugLogger_t logger;
	ncclResult_t result; /* what every op after init returns */
	/* Arguments of the most recent call of any op. */
	int dev, type, tag, n;
	unsigned long long size; /* int or size_t, as the plugin received it */
	void *handle, *comm, *data, *mhandle, *request;
	ncclNetDeviceHandle_v7_t *dev_storage; /* *devComm as passed (v7+) */
	int sizes_given;                      /* test got a non-NULL sizes */
	/* accept (v7+): replace *devComm with the plugin's own handle instead
	 * of filling the caller's storage. */
	int swap_dev_handle;
};

#endif
