/* The plugin loader and the v5..v12 adapters, against the fake plugins of
 * fake_plugin.c (each records its calls in a fake_calls struct). */
#include <dlfcn.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "fake_plugin.h"
#include "net/net.h"
#include "tcpx_p2p.h"

static struct fake_calls *calls_of(struct tp_net *net)
{
	struct fake_calls *c = dlsym(net->dl, "fake_calls");

	assert_non_null(c);
	return c;
}

static struct tp_net *load(const char *path)
{
	struct tp_net *net = NULL;
	int rc = tp__net_load(path, 0, &net);

	if (rc)
		print_error("load %s: %d %s\n", path, rc, tcpx_p2p_last_error());
	assert_int_equal(rc, 0);
	assert_non_null(net);
	return net;
}

/* Forget earlier calls but keep what init left. */
static struct fake_calls *reset_calls(struct tp_net *net)
{
	struct fake_calls *c = calls_of(net);
	ncclDebugLogger_t logger = c->logger;
	ncclProfilerCallback_t profiler = c->profiler;
	int init = c->init, live_ctx = c->live_ctx;

	memset(c, 0, sizeof(*c));
	c->logger = logger;
	c->profiler = profiler;
	c->init = init;
	c->live_ctx = live_ctx;
	return c;
}

static void assert_detail_has(const char *what)
{
	const char *d = tcpx_p2p_last_error();

	if (!strstr(d, what))
		fail_msg("detail \"%s\" lacks \"%s\"", d, what);
}

static void test_version_preference(void **state)
{
	static const struct {
		const char *path, *name;
		int abi;
		const struct tp_net_ops *ops;
	} cases[] = {
		{ FAKE_V5_PATH, "fake_v5", 5, &tp__net_ops_v5 },
		{ FAKE_V6_PATH, "fake_v6", 6, &tp__net_ops_v6 },
		{ FAKE_V7_PATH, "fake_v7", 7, &tp__net_ops_v7 },
		/* exports ncclNetPlugin_v7 too */
		{ FAKE_V8_PATH, "fake_v8", 8, &tp__net_ops_v8 },
		{ FAKE_V9_PATH, "fake_v9", 9, &tp__net_ops_v9 },
		{ FAKE_V10_PATH, "fake_v10", 10, &tp__net_ops_v10 },
		{ FAKE_V11_PATH, "fake_v11", 11, &tp__net_ops_v11 },
		{ FAKE_V12_PATH, "fake_v12", 12, &tp__net_ops_v12 },
		/* exports v5..v12: the newest wins */
		{ FAKE_ALL_PATH, "fake_v12", 12, &tp__net_ops_v12 },
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct tp_net *net = load(cases[i].path);

		assert_int_equal(net->abi, cases[i].abi);
		assert_string_equal(net->name, cases[i].name);
		assert_ptr_equal(net->ops, cases[i].ops);
		assert_string_equal(net->path, cases[i].path);
		if (cases[i].abi == 8)
			assert_non_null(dlsym(net->dl, "ncclNetPlugin_v7"));
		tp__net_unload(net);
	}
}

/* Every op reaches the plugin with the caller's arguments. */
static void check_forwarding(const char *path, int abi)
{
	struct tp_net *net = load(path);
	struct fake_calls *c = reset_calls(net);
	const struct tp_net_ops *ops = net->ops;
	char handle[NCCL_NET_HANDLE_MAXSIZE] = { 0 };
	ncclNetDeviceHandle_v7_t devh;
	struct tp_net_props props;
	void *comm = NULL, *mh = NULL, *req = NULL;
	char buf[64];
	int ndev = 0, done = 0, size = 0;

	assert_int_equal(ops->devices(net, &ndev), 0);
	assert_int_equal(ndev, FAKE_NDEV);

	memset(&props, 0x5a, sizeof(props));
	assert_int_equal(ops->get_properties(net, 1, &props), 0);
	assert_int_equal(c->dev, 1);
	assert_string_equal(props.name, "fake-eth0");
	assert_string_equal(props.pci_path, "/sys/devices/fake/0000:01:00.0");
	assert_true(props.guid == 0x1234abcdULL);
	assert_int_equal(props.ptr_support, NCCL_PTR_HOST | NCCL_PTR_CUDA);
	assert_int_equal(props.speed, 200000);
	assert_int_equal(props.port, 3);
	assert_true(props.latency == 1.5f);
	assert_int_equal(props.max_comms, 64);
	assert_int_equal(props.max_recvs, 1);
	assert_int_equal(props.reg_is_global, abi >= 8);
	assert_int_equal(props.dev_type, abi >= 7 ? NCCL_NET_DEVICE_UNPACK : NCCL_NET_DEVICE_HOST);
	assert_int_equal(props.dev_version, abi >= 7 ? NCCL_NET_DEVICE_UNPACK_VERSION : 0);
	assert_int_equal(props.force_flush, abi >= 9);
	assert_true(props.max_p2p_bytes == (abi >= 9 ? (size_t)1 << 33 : 0));
	assert_int_equal(props.max_multi_request, abi >= 11 ? 4 : 1);
	assert_int_equal(props.rail_id, abi >= 12 ? 5 : NCCL_NET_ID_UNDEF);
	assert_int_equal(props.plane_id, abi >= 12 ? 6 : NCCL_NET_ID_UNDEF);

	assert_int_equal(ops->listen(net, 1, handle, &comm), 0);
	assert_int_equal(c->listen, 1);
	assert_ptr_equal(c->handle, handle);
	assert_string_equal(handle, "fake-handle");
	assert_ptr_equal(comm, FAKE_LISTEN_COMM);
	if (abi >= 11) {
		assert_non_null(net->ctx);
		assert_ptr_equal(c->ctx, net->ctx);
		c->ctx = NULL;
	}

	comm = NULL;
	assert_int_equal(ops->connect(net, 0, handle, &comm), 0);
	if (abi >= 11)
		assert_ptr_equal(c->ctx, net->ctx);
	if (abi == 10)
		assert_int_equal(c->traffic_class, NCCL_NET_TRAFFIC_CLASS_UNDEF);
	assert_int_equal(c->connect, 1);
	assert_int_equal(c->dev, 0);
	assert_ptr_equal(c->handle, handle);
	assert_ptr_equal(comm, FAKE_SEND_COMM);
	/* v7+: the plugin got a pointer to storage, never NULL. */
	if (abi >= 7)
		assert_non_null(c->dev_storage);
	else
		assert_null(c->dev_storage);

	comm = NULL;
	memset(&devh, 0, sizeof(devh));
	c->dev_storage = NULL;
	assert_int_equal(ops->accept(net, FAKE_LISTEN_COMM, &comm, &devh), 0);
	assert_int_equal(c->accept, 1);
	assert_ptr_equal(c->comm, FAKE_LISTEN_COMM);
	assert_ptr_equal(comm, FAKE_RECV_COMM);
	if (abi >= 7) {
		assert_ptr_equal(c->dev_storage, &devh);
		assert_int_equal(devh.netDeviceType, NCCL_NET_DEVICE_UNPACK);
		assert_int_equal(devh.netDeviceVersion, NCCL_NET_DEVICE_UNPACK_VERSION);
		assert_ptr_equal(devh.handle, FAKE_DEV_PTR);
		assert_int_equal(devh.size, 24);
		/* A plugin that hands back its own handle: copied to our storage. */
		memset(&devh, 0, sizeof(devh));
		c->swap_dev_handle = 1;
		assert_int_equal(ops->accept(net, FAKE_LISTEN_COMM, &comm, &devh), 0);
		assert_ptr_equal(devh.handle, (void *)0x8800);
		assert_int_equal(devh.netDeviceType, NCCL_NET_DEVICE_UNPACK);
	} else {
		assert_null(c->dev_storage);
		assert_null(devh.handle);
		assert_int_equal(devh.netDeviceType, 0);
	}

	assert_int_equal(ops->reg_mr(net, FAKE_RECV_COMM, buf, 12288, NCCL_PTR_CUDA, &mh), 0);
	assert_int_equal(c->reg_mr, 1);
	assert_ptr_equal(c->comm, FAKE_RECV_COMM);
	assert_ptr_equal(c->data, buf);
	assert_true(c->size == 12288);
	assert_int_equal(c->type, NCCL_PTR_CUDA);
	assert_ptr_equal(mh, FAKE_MHANDLE);

	req = (void *)0x1234; /* callers need not clear it */
	c->phandle = (void *)0x1;
	assert_int_equal(ops->isend(net, FAKE_SEND_COMM, buf + 1, 1000, 77, mh, &req), 0);
	assert_null(c->request_in);
	if (abi >= 10)
		assert_null(c->phandle);
	assert_int_equal(c->isend, 1);
	assert_ptr_equal(c->comm, FAKE_SEND_COMM);
	assert_ptr_equal(c->data, buf + 1);
	assert_true(c->size == 1000);
	assert_int_equal(c->tag, 77);
	assert_ptr_equal(c->mhandle, mh);
	assert_ptr_equal(req, FAKE_SEND_REQ);

	/* From v9 the plugin reads *request as flags: the adapter clears it. */
	req = (void *)NCCL_NET_OPTIONAL_RECV_COMPLETION;
	assert_int_equal(ops->irecv(net, FAKE_RECV_COMM, buf + 2, 2000, 78, mh, &req), 0);
	assert_null(c->request_in);
	assert_int_equal(c->phandles_given, abi >= 10);
	assert_int_equal(c->irecv, 1);
	assert_int_equal(c->n, 1);
	assert_ptr_equal(c->comm, FAKE_RECV_COMM);
	assert_ptr_equal(c->data, buf + 2);
	assert_true(c->size == 2000);
	assert_int_equal(c->tag, 78);
	assert_ptr_equal(c->mhandle, mh);
	assert_ptr_equal(req, FAKE_RECV_REQ);

	assert_int_equal(ops->test(net, req, &done, &size), 0);
	assert_int_equal(c->test, 1);
	assert_ptr_equal(c->request, FAKE_RECV_REQ);
	assert_int_equal(done, 1);
	assert_true(c->sizes_given);
	assert_int_equal(size, 1234); /* what the plugin reported passes through */

	c->n = 0;
	assert_int_equal(ops->irecv_consumed(net, FAKE_RECV_COMM, req), 0);
	if (abi >= 7) {
		assert_int_equal(c->irecv_consumed, 1);
		assert_int_equal(c->n, 1);
		assert_ptr_equal(c->request, FAKE_RECV_REQ);
	} else {
		assert_int_equal(c->irecv_consumed, 0);
	}

	assert_int_equal(ops->dereg_mr(net, FAKE_RECV_COMM, mh), 0);
	assert_int_equal(c->dereg_mr, 1);
	assert_ptr_equal(c->mhandle, FAKE_MHANDLE);
	assert_int_equal(ops->close_send(net, FAKE_SEND_COMM), 0);
	assert_ptr_equal(c->comm, FAKE_SEND_COMM);
	assert_int_equal(ops->close_recv(net, FAKE_RECV_COMM), 0);
	assert_ptr_equal(c->comm, FAKE_RECV_COMM);
	assert_int_equal(ops->close_listen(net, FAKE_LISTEN_COMM), 0);
	assert_ptr_equal(c->comm, FAKE_LISTEN_COMM);
	assert_int_equal(c->close_send + c->close_recv + c->close_listen, 3);
	tp__net_unload(net);
}

static void test_forward_v5(void **state)
{
	check_forwarding(FAKE_V5_PATH, 5);
}

static void test_forward_v6(void **state)
{
	check_forwarding(FAKE_V6_PATH, 6);
}

static void test_forward_v7(void **state)
{
	check_forwarding(FAKE_V7_PATH, 7);
}

static void test_forward_v8(void **state)
{
	check_forwarding(FAKE_V8_PATH, 8);
}

static void test_forward_v9(void **state)
{
	check_forwarding(FAKE_V9_PATH, 9);
}

static void test_forward_v10(void **state)
{
	check_forwarding(FAKE_V10_PATH, 10);
}

static void test_forward_v11(void **state)
{
	check_forwarding(FAKE_V11_PATH, 11);
}

static void test_forward_v12(void **state)
{
	check_forwarding(FAKE_V12_PATH, 12);
}

/* Up to v10 init runs once per process, with the profiler from v10 on. */
static void test_init_once(void **state)
{
	struct tp_net *a = load(FAKE_V10_PATH), *b = load(FAKE_V10_PATH);

	assert_ptr_not_equal(a, b); /* each caller its own view */
	assert_ptr_equal(a->table, b->table);
	assert_int_equal(calls_of(a)->init, 1);
	assert_non_null(calls_of(a)->profiler);
	assert_null(a->ctx);
	tp__net_unload(b);
	tp__net_unload(a);
	a = load(FAKE_V10_PATH);
	assert_int_equal(calls_of(a)->init, 1);
	tp__net_unload(a);
}

/* From v11 on every load is a user with a context of its own, finalized at
 * unload; the plugin's devices are asked once. */
static void check_context_per_session(const char *path)
{
	struct tp_net *a = load(path), *b;
	struct fake_calls *c = calls_of(a);
	char handle[NCCL_NET_HANDLE_MAXSIZE] = { 0 };
	int init = c->init, devices = c->devices, fin = c->finalize, live = c->live_ctx;
	uint64_t id_a = c->comm_id;
	void *lc = NULL;

	b = load(path);
	assert_int_equal(c->init, init + 1);
	assert_int_equal(c->devices, devices);
	assert_non_null(a->ctx);
	assert_non_null(b->ctx);
	assert_ptr_not_equal(a->ctx, b->ctx);
	assert_true(c->comm_id != id_a);
	assert_non_null(c->profiler);
	assert_int_equal(c->traffic_class, NCCL_NET_TRAFFIC_CLASS_UNDEF);
	assert_int_equal(b->ops->listen(b, 0, handle, &lc), 0);
	assert_ptr_equal(c->ctx, b->ctx);
	assert_int_equal(a->ops->listen(a, 0, handle, &lc), 0);
	assert_ptr_equal(c->ctx, a->ctx);
	tp__net_unload(a);
	assert_int_equal(c->finalize, fin + 1);
	tp__net_unload(b);
	assert_int_equal(c->finalize, fin + 2);
	assert_int_equal(c->live_ctx, live - 1);
}

static void test_context_per_session(void **state)
{
	check_context_per_session(FAKE_V11_PATH);
	check_context_per_session(FAKE_V12_PATH);
}

/* Windows: what NCCL promised the ABI (8 requests per comm before v7), a
 * plugin's own smaller limit (TCPX: 16), and the library's 16. */
static void test_window_cap(void **state)
{
	static const struct {
		const char *path;
		int max;
	} cases[] = {
		{ FAKE_V5_PATH, 8 },  { FAKE_V6_PATH, 8 },  { FAKE_V7_PATH, 16 },
		{ FAKE_V8_PATH, 16 }, { FAKE_V9_PATH, 16 }, { FAKE_V12_PATH, 16 },
		{ FAKE_TCPXNAME_PATH, 16 },
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct tp_net *net = load(cases[i].path);
		int sw = 16, rw = 3;

		assert_int_equal(net->max_requests, cases[i].max);
		assert_int_equal(tp__net_cap_windows(net, &sw, &rw), cases[i].max);
		assert_int_equal(sw, cases[i].max);
		assert_int_equal(rw, 3);
		tp__net_unload(net);
	}
}

/* The fake before v7 takes 8 requests per comm, as NCCL's socket plugin of
 * that time did: a window of 8 fits, a 9th post fails. */
static void test_fake_refuses_ninth(void **state)
{
	struct tp_net *net = load(FAKE_V6_PATH);
	struct fake_calls *c = reset_calls(net);
	void *req = NULL;
	char buf[8];
	int i, done = 0, size = 0;

	for (i = 0; i < net->max_requests; i++)
		assert_int_equal(net->ops->isend(net, FAKE_SEND_COMM, buf, 8, i, NULL, &req), 0);
	assert_int_equal(net->ops->isend(net, FAKE_SEND_COMM, buf, 8, i, NULL, &req),
			 TCPX_P2P_EPLUGIN);
	assert_int_equal(net->ops->test(net, FAKE_SEND_REQ, &done, &size), 0);
	assert_int_equal(net->ops->isend(net, FAKE_SEND_COMM, buf, 8, i, NULL, &req), 0);
	assert_int_equal(c->out_send, 8);
	tp__net_unload(net);
}

static void check_overflow(const char *path, int regmr_is_int)
{
	struct tp_net *net = load(path);
	struct fake_calls *c = reset_calls(net);
	size_t big = (size_t)INT_MAX + 1, huge = (size_t)3 << 30;
	void *mh = NULL, *req = NULL;
	char buf[1];
	int rc;

	assert_int_equal(net->ops->isend(net, FAKE_SEND_COMM, buf, big, 1, NULL, &req),
			 TCPX_P2P_EINVAL);
	assert_detail_has("isend");
	assert_int_equal(net->ops->irecv(net, FAKE_RECV_COMM, buf, big, 1, NULL, &req),
			 TCPX_P2P_EINVAL);
	assert_detail_has("irecv");
	assert_int_equal(c->isend + c->irecv, 0);
	assert_null(req);

	assert_int_equal(net->ops->isend(net, FAKE_SEND_COMM, buf, INT_MAX, 1, NULL, &req), 0);
	assert_true(c->size == INT_MAX);

	if (regmr_is_int) {
		rc = net->ops->reg_mr(net, FAKE_RECV_COMM, buf, big, NCCL_PTR_HOST, &mh);
		assert_int_equal(rc, TCPX_P2P_EINVAL);
		assert_detail_has("regMr");
		assert_detail_has(net->name);
		assert_int_equal(c->reg_mr, 0);
		assert_null(mh);
	} else {
		rc = net->ops->reg_mr(net, FAKE_RECV_COMM, buf, huge, NCCL_PTR_HOST, &mh);
		assert_int_equal(rc, 0);
		assert_int_equal(c->reg_mr, 1);
		assert_true(c->size == huge);
	}
	tp__net_unload(net);
}

/* From v9 isend and irecv take size_t: nothing to refuse. */
static void check_no_overflow(const char *path)
{
	struct tp_net *net = load(path);
	struct fake_calls *c = reset_calls(net);
	size_t huge = (size_t)3 << 30;
	void *req = NULL;
	char buf[1];

	assert_int_equal(net->ops->isend(net, FAKE_SEND_COMM, buf, huge, 1, NULL, &req), 0);
	assert_true(c->size == huge);
	assert_int_equal(net->ops->irecv(net, FAKE_RECV_COMM, buf, huge + 1, 1, NULL, &req), 0);
	assert_true(c->size == huge + 1);
	tp__net_unload(net);
}

static void test_int_overflow(void **state)
{
	check_overflow(FAKE_V5_PATH, 1);
	check_overflow(FAKE_V6_PATH, 1);
	check_overflow(FAKE_V7_PATH, 1);
	check_overflow(FAKE_V8_PATH, 0);
	check_no_overflow(FAKE_V9_PATH);
	check_no_overflow(FAKE_V10_PATH);
	check_no_overflow(FAKE_V11_PATH);
	check_no_overflow(FAKE_V12_PATH);
}

static void test_empty_slots(void **state)
{
	struct tp_net *net = load(FAKE_EMPTY_PATH);
	struct fake_calls *c = reset_calls(net);
	const struct tp_net_ops *ops = net->ops;
	char handle[NCCL_NET_HANDLE_MAXSIZE];
	ncclNetDeviceHandle_v7_t devh = { 0 };
	struct tp_net_props props;
	void *p = NULL;
	int ndev = 0, done = 0, size = 0;

	assert_int_equal(net->abi, 7);
	assert_int_equal(ops->devices(net, &ndev), 0);
	assert_int_equal(ndev, FAKE_NDEV);

#define EXPECT_ENOTSUP(call, op)                                          \
	do {                                                              \
		assert_int_equal(call, TCPX_P2P_ENOTSUP);                 \
		assert_string_equal(tcpx_p2p_last_error(),                \
				    "fake_empty: " op " not supported");  \
	} while (0)
	EXPECT_ENOTSUP(ops->get_properties(net, 0, &props), "getProperties");
	EXPECT_ENOTSUP(ops->listen(net, 0, handle, &p), "listen");
	EXPECT_ENOTSUP(ops->connect(net, 0, handle, &p), "connect");
	EXPECT_ENOTSUP(ops->accept(net, p, &p, &devh), "accept");
	EXPECT_ENOTSUP(ops->reg_mr(net, p, handle, 16, NCCL_PTR_HOST, &p), "regMr");
	EXPECT_ENOTSUP(ops->dereg_mr(net, p, p), "deregMr");
	EXPECT_ENOTSUP(ops->isend(net, p, handle, 16, 0, p, &p), "isend");
	EXPECT_ENOTSUP(ops->irecv(net, p, handle, 16, 0, p, &p), "irecv");
	EXPECT_ENOTSUP(ops->test(net, p, &done, &size), "test");
	EXPECT_ENOTSUP(ops->close_send(net, p), "closeSend");
	EXPECT_ENOTSUP(ops->close_recv(net, p), "closeRecv");
	EXPECT_ENOTSUP(ops->close_listen(net, p), "closeListen");
#undef EXPECT_ENOTSUP
	/* Receives simply end at test when there is nothing to hand back. */
	assert_int_equal(ops->irecv_consumed(net, p, p), 0);
	assert_int_equal(c->devices, 1);
	tp__net_unload(net);
}

static void test_result_translation(void **state)
{
	static const struct {
		ncclResult_t r;
		int code;
		const char *detail;
	} cases[] = {
		{ ncclSuccess, 0, NULL },
		{ ncclUnhandledCudaError, TCPX_P2P_ECUDA,
		  "fake_v7 isend: ncclUnhandledCudaError (1)" },
		{ ncclSystemError, TCPX_P2P_ENET, "fake_v7 isend: ncclSystemError (2)" },
		{ ncclInternalError, TCPX_P2P_EPLUGIN, "fake_v7 isend: ncclInternalError (3)" },
		{ ncclInvalidArgument, TCPX_P2P_EINVAL, "fake_v7 isend: ncclInvalidArgument (4)" },
		{ ncclInvalidUsage, TCPX_P2P_EPLUGIN, "fake_v7 isend: ncclInvalidUsage (5)" },
		{ ncclRemoteError, TCPX_P2P_ECLOSED, "fake_v7 isend: ncclRemoteError (6)" },
		{ ncclInProgress, TCPX_P2P_EAGAIN, "fake_v7 isend: ncclInProgress (7)" },
		{ (ncclResult_t)42, TCPX_P2P_EPLUGIN, "fake_v7 isend: unknown ncclResult_t (42)" },
	};
	struct tp_net *net = load(FAKE_V7_PATH);
	struct fake_calls *c = reset_calls(net);
	struct tp_net other = { .name = "other" };
	void *req;
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		c->result = cases[i].r;
		req = NULL;
		assert_int_equal(net->ops->isend(net, FAKE_SEND_COMM, &req, 8, 0, NULL, &req),
				 cases[i].code);
		if (cases[i].detail)
			assert_string_equal(tcpx_p2p_last_error(), cases[i].detail);
		assert_int_equal(tp__net_err(&other, "test", cases[i].r), cases[i].code);
	}
	assert_int_equal(c->isend, (int)i);
	assert_int_equal(tp__net_err(&other, "closeRecv", ncclRemoteError), TCPX_P2P_ECLOSED);
	assert_string_equal(tcpx_p2p_last_error(), "other closeRecv: ncclRemoteError (6)");
	c->result = ncclSuccess;
	tp__net_unload(net);
}

static void test_missing_explicit(void **state)
{
	struct tp_net *net = NULL;

	assert_int_equal(tp__net_load("/nonexistent/libnccl-net-nope.so", 0, &net),
			 TCPX_P2P_ENOPLUGIN);
	assert_null(net);
	assert_detail_has("/nonexistent/libnccl-net-nope.so (");
	assert_detail_has("No such file");
}

static void test_default_search(void **state)
{
	static const char *const tcpx[] = {
		"/usr/local/tcpx/lib64/libnccl-net-tcpx.so",
		"/var/lib/tcpx/lib64/libnccl-net.so",
		"/usr/local/nvidia/lib64/libnccl-net.so",
		"/home/kubernetes/bin/nvidia/lib64/libnccl-net.so",
	};
	struct tp_net *net = NULL;
	char exe[PATH_MAX], bundled[PATH_MAX + 32], tried[PATH_MAX + 48];
	void *dl;
	ssize_t n;
	size_t i;

	unsetenv("NCCL_NET_PLUGIN");
	for (i = 0; i < sizeof(tcpx) / sizeof(tcpx[0]); i++)
		if (!access(tcpx[i], F_OK))
			skip();
	dl = dlopen("libnccl-net.so", RTLD_NOW | RTLD_LOCAL);
	if (dl) {
		dlclose(dl);
		skip();
	}
	/* Linked into this program, the loader looks beside the program. */
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	assert_true(n > 0);
	exe[n] = '\0';
	*strrchr(exe, '/') = '\0';
	snprintf(bundled, sizeof(bundled), "%s/%s", exe, TP_EMU_PLUGIN_FILE);
	if (!access(bundled, F_OK))
		skip();
	snprintf(tried, sizeof(tried), "%s (", bundled);

	assert_int_equal(tp__net_load(NULL, 0, &net), TCPX_P2P_ENOPLUGIN);
	assert_null(net);
	for (i = 0; i < sizeof(tcpx) / sizeof(tcpx[0]); i++) {
		char want[PATH_MAX];

		snprintf(want, sizeof(want), "%s (", tcpx[i]);
		assert_detail_has(want);
	}
	assert_detail_has("; libnccl-net.so (");
	assert_detail_has(tried);
	/* "" means search too. */
	assert_int_equal(tp__net_load("", 0, &net), TCPX_P2P_ENOPLUGIN);
	assert_detail_has(tried);
}

/* NCCL_NET_PLUGIN as NCCL reads it, after TCPX_P2P_PLUGIN. */
static void test_nccl_net_plugin(void **state)
{
	const char *ldpath = getenv("LD_LIBRARY_PATH");
	struct tp_net *net = NULL;
	char list[2 * PATH_MAX];

	/* A path. */
	setenv("NCCL_NET_PLUGIN", FAKE_V9_PATH, 1);
	net = load(NULL);
	assert_int_equal(net->abi, 9);
	assert_string_equal(net->path, FAKE_V9_PATH);
	assert_int_equal(net->fallback, 0);
	tp__net_unload(net);
	/* TCPX_P2P_PLUGIN wins. */
	net = load(FAKE_V6_PATH);
	assert_int_equal(net->abi, 6);
	tp__net_unload(net);

	/* A list: the first that loads. */
	snprintf(list, sizeof(list), "/nonexistent/libnccl-net-x.so,%s", FAKE_V8_PATH);
	setenv("NCCL_NET_PLUGIN", list, 1);
	net = load(NULL);
	assert_int_equal(net->abi, 8);
	assert_non_null(strstr(net->tried, "/nonexistent/libnccl-net-x.so ("));
	tp__net_unload(net);

	/* A name: as given, then as libnccl-net-<name>.so; nothing else, and
	 * not the emulator. */
	setenv("NCCL_NET_PLUGIN", "nope", 1);
	assert_int_equal(tp__net_load(NULL, 0, &net), TCPX_P2P_ENOPLUGIN);
	assert_detail_has("NCCL_NET_PLUGIN");
	assert_detail_has("tried nope (");
	assert_detail_has("; libnccl-net-nope.so (");
	assert_null(strstr(tcpx_p2p_last_error(), "tcpx"));
	/* A library name is not expanded. */
	setenv("NCCL_NET_PLUGIN", "libnope.so", 1);
	assert_int_equal(tp__net_load(NULL, 0, &net), TCPX_P2P_ENOPLUGIN);
	assert_detail_has("tried libnope.so (");
	assert_null(strstr(tcpx_p2p_last_error(), "libnccl-net-libnope"));

	/* A name found through the dynamic linker's path (the test is
	 * registered with this folder on LD_LIBRARY_PATH). */
	if (ldpath && strstr(ldpath, FAKE_DIR)) {
		setenv("NCCL_NET_PLUGIN", "fakename", 1);
		net = load(NULL);
		assert_string_equal(net->name, "fake_v10");
		assert_string_equal(net->path, FAKE_DIR "/libnccl-net-fakename.so");
		assert_non_null(strstr(net->tried, "fakename ("));
		tp__net_unload(net);
	} else {
		print_message("LD_LIBRARY_PATH lacks %s: name lookup not checked\n", FAKE_DIR);
	}

	/* "none": no external plugin, so only the emulator (absent beside
	 * this program) is left. */
	setenv("NCCL_NET_PLUGIN", "none", 1);
	assert_int_equal(tp__net_load(NULL, 0, &net), TCPX_P2P_ENOPLUGIN);
	assert_detail_has("NCCL_NET_PLUGIN=none (no external plugin)");
	assert_null(strstr(tcpx_p2p_last_error(), "/usr/local/tcpx"));
	unsetenv("NCCL_NET_PLUGIN");
}

static void test_no_symbol(void **state)
{
	struct tp_net *net = NULL;

	assert_int_equal(tp__net_load(FAKE_NOSYM_PATH, 0, &net), TCPX_P2P_ENOPLUGIN);
	assert_null(net);
	assert_detail_has(FAKE_NOSYM_PATH " (no ncclNetPlugin_v5..v12 symbol)");
}

static void test_not_a_library(void **state)
{
	char path[] = "/tmp/tp_loader_notelf_XXXXXX";
	struct tp_net *net = NULL;
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, "not an ELF file\n", 16), 16);
	close(fd);
	assert_int_equal(tp__net_load(path, 0, &net), TCPX_P2P_ENOPLUGIN);
	unlink(path);
	assert_detail_has(path);
	/* dlerror's own copy of the path is dropped. */
	assert_null(strstr(strstr(tcpx_p2p_last_error(), path) + 1, path));
}

static void test_init_failure(void **state)
{
	struct tp_net *net = NULL;
	struct fake_calls *c;
	void *dl;

	assert_int_equal(tp__net_load(FAKE_INITFAIL_PATH, 0, &net), TCPX_P2P_EPLUGIN);
	assert_null(net);
	assert_detail_has(FAKE_INITFAIL_PATH);
	assert_detail_has("fake_initfail init: ncclSystemError (2)");
	/* Again: the same answer, and init is not called a second time. */
	assert_int_equal(tp__net_load(FAKE_INITFAIL_PATH, 0, &net), TCPX_P2P_EPLUGIN);
	assert_detail_has("fake_initfail init: ");
	dl = dlopen(FAKE_INITFAIL_PATH, RTLD_NOW | RTLD_NOLOAD);
	assert_non_null(dl); /* kept loaded: init may have started threads */
	c = dlsym(dl, "fake_calls");
	assert_non_null(c);
	assert_int_equal(c->init, 1);
	assert_int_equal(c->devices, 0);
	dlclose(dl);
}

static void test_shared_file(void **state)
{
	char dir[] = "/tmp/tp_loader_link_XXXXXX", link[64];
	struct tp_net *a, *b, *d;
	struct fake_calls *c;
	void *dl;

	a = load(FAKE_V6_PATH);
	b = load(FAKE_V6_PATH);
	assert_ptr_not_equal(a, b);
	assert_ptr_equal(a->dl, b->dl);
	assert_ptr_equal(a->table, b->table);
	assert_ptr_equal(a->file, b->file);
	c = calls_of(a);
	assert_int_equal(c->init, 1);
	assert_non_null(c->logger);

	/* Another name for the same file is the same plugin. */
	assert_non_null(mkdtemp(dir));
	snprintf(link, sizeof(link), "%s/other.so", dir);
	assert_int_equal(symlink(FAKE_V6_PATH, link), 0);
	d = load(link);
	unlink(link);
	rmdir(dir);
	assert_ptr_equal(d->file, a->file);
	assert_string_equal(d->path, FAKE_V6_PATH);

	tp__net_unload(d);
	tp__net_unload(b);
	tp__net_unload(a);
	tp__net_unload(NULL);

	/* Unloaded, the plugin stays loaded and comes back without a new init. */
	dl = dlopen(FAKE_V6_PATH, RTLD_NOW | RTLD_NOLOAD);
	assert_non_null(dl);
	dlclose(dl);
	b = load(FAKE_V6_PATH);
	assert_int_equal(calls_of(b)->init, 1);
	tp__net_unload(b);
}

struct captured {
	int n, level;
	char subsys[32], msg[512];
};

static void capture(int level, const char *subsys, const char *msg, void *arg)
{
	struct captured *cap = arg;

	cap->n++;
	cap->level = level;
	snprintf(cap->subsys, sizeof(cap->subsys), "%s", subsys);
	snprintf(cap->msg, sizeof(cap->msg), "%s", msg);
}

static void test_plugin_logger(void **state)
{
	struct tp_net *net = load(FAKE_V7_PATH);
	ncclDebugLogger_t log = calls_of(net)->logger;
	struct captured cap = { 0 };

	assert_non_null(log);
	assert_int_equal(tcpx_p2p_set_log(capture, &cap, TCPX_P2P_LOG_INFO), 0);

	log(NCCL_LOG_WARN, 0, "net_tcpx.cc", 42, "no devmem %d\n", 7);
	assert_int_equal(cap.n, 1);
	assert_int_equal(cap.level, TCPX_P2P_LOG_WARN);
	assert_string_equal(cap.subsys, "plugin");
	assert_non_null(strstr(cap.msg, "net_tcpx.cc:42"));
	assert_non_null(strstr(cap.msg, "no devmem 7"));
	assert_int_not_equal(cap.msg[strlen(cap.msg) - 1], '\n');

	log(NCCL_LOG_ABORT, 0, "a.cc", 1, "fatal %s", "x");
	assert_int_equal(cap.n, 2);
	assert_int_equal(cap.level, TCPX_P2P_LOG_WARN);

	/* The plugin's INFO is our DEBUG: hidden at INFO, shown at DEBUG. */
	log(NCCL_LOG_INFO, 0, "a.cc", 2, "chatty %d", 1);
	assert_int_equal(cap.n, 2);
	assert_int_equal(tcpx_p2p_set_log(capture, &cap, TCPX_P2P_LOG_DEBUG), 0);
	log(NCCL_LOG_INFO, 0, "a.cc", 3, "chatty %d", 2);
	assert_int_equal(cap.n, 3);
	assert_int_equal(cap.level, TCPX_P2P_LOG_DEBUG);
	assert_non_null(strstr(cap.msg, "chatty 2"));

	log(NCCL_LOG_TRACE, 0, "a.cc", 4, "trace %d", 1);
	assert_int_equal(cap.n, 3);
	assert_int_equal(tcpx_p2p_set_log(capture, &cap, TCPX_P2P_LOG_TRACE), 0);
	log(NCCL_LOG_TRACE, 0, "a.cc", 5, "trace %d", 2);
#ifdef NDEBUG
	assert_int_equal(cap.n, 3);
#else
	assert_int_equal(cap.n, 4);
	assert_int_equal(cap.level, TCPX_P2P_LOG_TRACE);
#endif
	log(NCCL_LOG_NONE, 0, "a.cc", 6, "nothing");
	assert_int_equal(tcpx_p2p_set_log(NULL, NULL, TCPX_P2P_LOG_WARN), 0);
	tp__net_unload(net);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_version_preference),
		cmocka_unit_test(test_forward_v5),
		cmocka_unit_test(test_forward_v6),
		cmocka_unit_test(test_forward_v7),
		cmocka_unit_test(test_forward_v8),
		cmocka_unit_test(test_forward_v9),
		cmocka_unit_test(test_forward_v10),
		cmocka_unit_test(test_forward_v11),
		cmocka_unit_test(test_forward_v12),
		cmocka_unit_test(test_init_once),
		cmocka_unit_test(test_context_per_session),
		cmocka_unit_test(test_window_cap),
		cmocka_unit_test(test_fake_refuses_ninth),
		cmocka_unit_test(test_int_overflow),
		cmocka_unit_test(test_empty_slots),
		cmocka_unit_test(test_result_translation),
		cmocka_unit_test(test_missing_explicit),
		cmocka_unit_test(test_default_search),
		cmocka_unit_test(test_nccl_net_plugin),
		cmocka_unit_test(test_no_symbol),
		cmocka_unit_test(test_not_a_library),
		cmocka_unit_test(test_init_failure),
		cmocka_unit_test(test_shared_file),
		cmocka_unit_test(test_plugin_logger),
	};

	return cmocka_run_group_tests(tests, NULL, NULL) ? 1 : 0;
}
