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
	void *request_in;         /* *request as isend/irecv found it */
	void *phandle;            /* v10+: isend's profiler handle */
	int phandles_given;       /* v10+: irecv got a phandles array */
	ncclProfilerCallback_t profiler; /* v10+: what init got */
	int traffic_class;        /* v10: connect's config; v11+: init's */
	int finalize;             /* v11+ */
	void *ctx;                /* v11+: the ctx listen/connect/finalize got */
	uint64_t comm_id;         /* v11+: init's */
	int live_ctx;             /* v11+: contexts made and not finalized */
	/* Requests outstanding per direction: a send until test reports it,
	 * a receive until test (before v7) or irecvConsumed; a post beyond
	 * max_requests fails as NCCL's socket plugin fails it. */
	int out_send, out_recv, max_requests;
};

/* The most requests per comm the fake takes: 8 before ABI v7 (what NCCL
 * promised such plugins), 16 after (TCPX's limit). */
#define FAKE_MAX_REQUESTS(abi) ((abi) < 7 ? 8 : 16)

#endif
