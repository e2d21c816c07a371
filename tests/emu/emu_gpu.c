/*
 * GPU checks of the emulator: CUDA regMr alignment, device-mode bounce
 * receives (unpack handle in device memory, meta ring in mapped host
 * memory, fragments in device pages) and CUDA sends; a host-memory
 * receive on a device-bounce comm is refused (TCPX's data sockets are
 * steered into GPU pages, where its plain recv() fails with EFAULT).  Exits
 * 77 without a usable GPU.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <cuda_runtime_api.h>

#include "emu_harness.h"

static void test_regmr_alignment(void **state)
{
	struct emu_pair p;
	void *raw = NULL, *d, *mh = NULL;

	assert_int_equal(emu_pair_open(&p), 0);
	/* cudaMalloc only promises 256 bytes of alignment for small blocks. */
	assert_int_equal(cudaMalloc(&raw, (1 << 20) + 4096), cudaSuccess);
	d = (void *)(((uintptr_t)raw + 4095) & ~(uintptr_t)4095);
	assert_int_equal(net->regMr(p.rcomm, d, 1 << 20, NCCL_PTR_CUDA, &mh), ncclSuccess);
	net->deregMr(p.rcomm, mh);
	emu_clear_warn();
	assert_int_equal(net->regMr(p.rcomm, (char *)d + 64, 4096, NCCL_PTR_CUDA, &mh),
			 ncclInvalidArgument);
	assert_true(emu_warned("4096-byte aligned"));
	assert_int_equal(net->regMr(p.rcomm, d, 0, NCCL_PTR_CUDA, &mh), ncclInvalidArgument);
	cudaFree(raw);
	emu_pair_close(&p);
}

/* TCPX receives host memory with recv(), which fails on a flow steered
 * into the device bounce buffer: the emulator refuses the post. */
static void test_host_receive_refused(void **state)
{
	struct emu_pair p;
	char *h = aligned_alloc(4096, 1 << 20);
	void *mh = NULL, *req = NULL;

	assert_non_null(h);
	assert_int_equal(emu_pair_open(&p), 0);
	assert_int_equal(net->regMr(p.rcomm, h, 1 << 20, NCCL_PTR_HOST, &mh), ncclSuccess);
	emu_clear_warn();
	int size = 1 << 20, tag = 1;
	void *data = h;
	assert_int_equal(net->irecv(p.rcomm, 1, &data, &size, &tag, &mh, &req), ncclInvalidUsage);
	assert_null(req);
	assert_true(emu_warned("EFAULT"));
	net->deregMr(p.rcomm, mh);
	emu_pair_close(&p);
	free(h);
}

/* Device sends into a device-bounce receive; the CPU gathers the pages. */
static void test_device_bounce(void **state)
{
	/* 300000: two slices whose boundary cuts a fragment at an odd offset. */
	const int sizes[] = { 0, 1, 4095, 300000, (1 << 20) + 3, 4 << 20 };
	const int nsizes = (int)(sizeof(sizes) / sizeof(sizes[0]));
	const size_t pool_bytes = (size_t)8192 * TP_UNPACK_PAGE_SIZE;
	struct tp_unpack_handle uh;
	struct emu_pair p;
	char *h = malloc(4 << 20), *out = malloc(4 << 20), *pool = malloc(pool_bytes);
	void *dsend, *drecv, *smh, *rmh, *sreq, *rreq;
	ncclNetProperties_v7_t props;
	ncclResult_t res;

	assert_int_equal(net->getProperties(0, &props), ncclSuccess);
	assert_true(props.ptrSupport & NCCL_PTR_CUDA);
	assert_int_equal(emu_pair_open(&p), 0);
	assert_int_equal(p.dh_storage.netDeviceType, NCCL_NET_DEVICE_UNPACK);
	/* The handle is a device pointer: read it the way a kernel would see it. */
	assert_int_equal(cudaMemcpy(&uh, p.dh_storage.handle, sizeof(uh), cudaMemcpyDeviceToHost),
			 cudaSuccess);
	assert_true(uh.head == (uint64_t)-1);
	assert_int_equal(cudaMalloc(&dsend, 4 << 20), cudaSuccess);
	assert_int_equal(cudaMalloc(&drecv, 4 << 20), cudaSuccess);
	assert_true(((uintptr_t)dsend | (uintptr_t)drecv) % 4096 == 0);
	assert_int_equal(net->regMr(p.scomm, dsend, 4 << 20, NCCL_PTR_CUDA, &smh), ncclSuccess);
	assert_int_equal(net->regMr(p.rcomm, drecv, 4 << 20, NCCL_PTR_CUDA, &rmh), ncclSuccess);
	for (int k = 0; k < 24; k++) {
		int size = sizes[k % nsizes];
		struct tp_unpack_handle host_view;

		emu_fill_random(h, (size_t)size, (uint32_t)k + 7);
		assert_int_equal(cudaMemcpy(dsend, h, (size_t)size, cudaMemcpyHostToDevice),
				 cudaSuccess);
		/* landed only now: the plugin copies it on its own stream */
		assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);
		assert_int_equal(emu_irecv(&p, drecv, 4 << 20, k, rmh, &rreq), ncclSuccess);
		assert_int_equal(emu_isend(&p, dsend, size, k, smh, &sreq), ncclSuccess);
		assert_int_equal(emu_wait(&p, sreq, &res), 0);
		assert_int_equal(res, ncclSuccess);
		assert_int_equal(emu_wait(&p, rreq, &res), 0);
		assert_int_equal(res, ncclSuccess);
		assert_int_equal(cudaMemcpy(pool, uh.bounce_buf, pool_bytes, cudaMemcpyDeviceToHost),
				 cudaSuccess);
		/* The meta ring is mapped host memory: its device alias is UVA. */
		host_view.meta = uh.meta;
		host_view.bounce_buf = pool;
		assert_true(emu_unpack(&host_view, k % 16, out, (uint64_t)size) >= 0);
		assert_memory_equal(out, h, size);
		assert_int_equal(net->irecvConsumed(p.rcomm, 1, rreq), ncclSuccess);
	}
	net->deregMr(p.scomm, smh);
	net->deregMr(p.rcomm, rmh);
	cudaFree(dsend);
	cudaFree(drecv);
	free(h);
	free(out);
	free(pool);
	emu_pair_close(&p);
}

static int setup_group(void **state)
{
	return emu_load() ? -1 : 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_regmr_alignment),
		cmocka_unit_test(test_device_bounce),
		cmocka_unit_test(test_host_receive_refused),
	};
	int n = 0;
	cudaError_t err = cudaGetDeviceCount(&n);

	if (err != cudaSuccess || n == 0) {
		printf("SKIP: no usable GPU (cudaGetDeviceCount: %s, count %d)\n",
		       cudaGetErrorString(err), err == cudaSuccess ? n : 0);
		return 77;
	}
	cudaSetDevice(0);
	setenv("TCPX_EMU_BOUNCE", "device", 1);
	return cmocka_run_group_tests_name("emu gpu", tests, setup_group, NULL) ? 1 : 0;
}
