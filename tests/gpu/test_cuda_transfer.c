/* CUDA-to-CUDA transfers through the library over the emulator's device
 * bounce buffer (scattered 4 KiB fragments, meta ring), with poison mode on:
 * every byte checked for each unpack variant.  Then the proof that the
 * event gate is tested: with the test-only early-consume switch the same
 * transfers must come out corrupted.  "pinned": the receiver's buffer is
 * page-locked, mapped host memory (registered as host memory), which the
 * library unpacks into by kernel; each receive is two segments.  "pin":
 * the same with pageable memory the library page-locks at registration
 * (TCPX_P2P_MR_PIN), and the lifetime of those locks.
 * Usage: test_cuda_transfer kernel|d2d|host|pinned|pin [max MiB] | early */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <cuda_runtime_api.h>

#include "pair.h"

static int g_unpack = TCPX_P2P_UNPACK_KERNEL;
static size_t g_max = 64u << 20;
static int g_gpu[2];
/* The receiver's buffer: device memory, or host memory the GPU maps. */
enum host_kind { DEVICE_MEM, HOST_ALLOC, HOST_PIN_AT_REG };
static enum host_kind g_pinned;

static const tcpx_p2p_mr_params pin_params = { sizeof(tcpx_p2p_mr_params), TCPX_P2P_MR_PIN };

struct side {
	void *dev; /* device memory, or (pinned) mapped host memory */
	unsigned char *host;
	tcpx_p2p_mr *mr;
	enum host_kind pinned;
};

static void side_open(struct side *sd, tcpx_p2p_session *s, int gpu, size_t cap,
		      enum host_kind pinned)
{
	assert_int_equal(cudaSetDevice(gpu), cudaSuccess);
	sd->pinned = pinned;
	if (pinned == HOST_ALLOC)
		assert_int_equal(cudaHostAlloc(&sd->dev, cap,
					       cudaHostAllocMapped | cudaHostAllocPortable),
				 cudaSuccess);
	else if (pinned == HOST_PIN_AT_REG)
		assert_non_null(sd->dev = aligned_alloc(4096, (cap + 4095) & ~(size_t)4095));
	else
		assert_int_equal(cudaMalloc(&sd->dev, cap), cudaSuccess);
	sd->host = malloc(cap);
	assert_non_null(sd->host);
	assert_int_equal(tcpx_p2p_mr_register_ex(s, sd->dev, cap,
						 pinned ? TCPX_P2P_MEM_HOST : TCPX_P2P_MEM_CUDA,
						 pinned == HOST_PIN_AT_REG ? &pin_params : NULL,
						 &sd->mr), 0);
}

static void side_close(struct side *sd)
{
	assert_int_equal(tcpx_p2p_mr_deregister(sd->mr), 0);
	if (sd->pinned == HOST_ALLOC)
		cudaFreeHost(sd->dev);
	else if (sd->pinned == HOST_PIN_AT_REG)
		free(sd->dev);
	else
		cudaFree(sd->dev);
	free(sd->host);
}

/* The receive: one segment, or (pinned) two, cut in the middle. */
static int post_recv(struct tp_pair *p, struct side *sd, size_t roff, size_t len,
		     tcpx_p2p_xfer **x)
{
	tcpx_p2p_seg g[2] = { { sd->mr, roff, len / 2 }, { sd->mr, roff + len / 2, len - len / 2 } };

	if (!sd->pinned)
		return tcpx_p2p_recv(p->c[1], sd->mr, roff, len, x);
	return tcpx_p2p_recvv(p->c[1], g, 2, NULL, x);
}


static void same_device(int want, const char *after)
{
	int dev = -1;

	assert_int_equal(cudaGetDevice(&dev), cudaSuccess);
	if (dev != want)
		fail_msg("current device %d after %s, was %d", dev, after, want);
}

/* Move len bytes 0 -> 1 at offsets; returns the number of wrong bytes. */
static size_t move(struct tp_pair *p, struct side *sd, size_t soff, size_t roff, size_t len,
		   uint64_t seed)
{
	tcpx_p2p_xfer *x[2];
	size_t bad = 0, i;
	int dev;

	tp_fill(sd[0].host, len, seed);
	assert_int_equal(cudaMemcpy((char *)sd[0].dev + soff, sd[0].host, len,
				    cudaMemcpyHostToDevice), cudaSuccess);
	if (sd[1].pinned)
		memset(sd[1].dev, 0x5a, roff + len + 64);
	else
		assert_int_equal(cudaMemset(sd[1].dev, 0x5a, roff + len + 64), cudaSuccess);
	assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);
	/* With two GPUs the sessions' GPUs differ: the caller's device stays
	 * what it was across every call. */
	assert_int_equal(cudaGetDevice(&dev), cudaSuccess);
	assert_int_equal(post_recv(p, &sd[1], roff, len, &x[0]), 0);
	same_device(dev, "recv");
	assert_int_equal(tcpx_p2p_send(p->c[0], sd[0].mr, soff, len, &x[1]), 0);
	same_device(dev, "send");
	assert_int_equal(tp_complete_all(x, 2), 0);
	same_device(dev, "test");
	assert_int_equal(cudaMemcpy(sd[1].host, sd[1].dev, roff + len + 64, cudaMemcpyDefault),
			 cudaSuccess);
	if (tp_check(sd[1].host + roff, len, seed) != (size_t)-1) {
		unsigned char *want = malloc(len);

		assert_non_null(want);
		tp_fill(want, len, seed);
		for (i = 0; i < len; i++)
			bad += sd[1].host[roff + i] != want[i];
		free(want);
	}
	/* nothing written outside the receive */
	for (i = 0; i < 64; i++)
		assert_int_equal(sd[1].host[roff + len + i], 0x5a);
	if (roff)
		assert_int_equal(sd[1].host[roff - 1], 0x5a);
	return bad;
}

static void open_pair(struct tp_pair *p, struct side *sd, size_t cap, int nchan)
{
	tcpx_p2p_config cfg[2];
	int i;

	for (i = 0; i < 2; i++) {
		tcpx_p2p_config_init(&cfg[i]);
		cfg[i].gpu = g_gpu[i];
		cfg[i].unpack = g_unpack;
		if (nchan)
			cfg[i].num_channels = nchan;
	}
	assert_int_equal(tp_pair_open2(p, cfg, 0), 0);
	for (i = 0; i < 2; i++)
		side_open(&sd[i], p->s[i], g_gpu[i], cap, i == 1 ? g_pinned : DEVICE_MEM);
}

static void close_pair(struct tp_pair *p, struct side *sd)
{
	side_close(&sd[0]);
	side_close(&sd[1]);
	tp_pair_close(p);
}

static void test_sizes(void **state)
{
	const size_t sizes[] = { 1, 7, 4096, 4097, (512u << 10) + 3, (1u << 20) - 1,
				 (8u << 20) + 1, 64u << 20, 256u << 20 };
	const int chans[] = { 1, 2, 4, 8 };
	struct tp_pair p;
	struct side sd[2];
	size_t i;
	int c;

	for (c = 0; c < 4; c++) {
		open_pair(&p, sd, g_max + 8192, chans[c]);
		for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
			if (sizes[i] > g_max || (c != 1 && sizes[i] > (64u << 20)))
				continue;
			assert_int_equal(move(&p, sd, 0, 0, sizes[i], i + 1), 0);
		}
		/* unaligned offsets on both sides */
		assert_int_equal(move(&p, sd, 13, 4099, (3u << 20) + 5, 77), 0);
		close_pair(&p, sd);
	}
}

/* Consume before the unpack finished (test-only switch): poisoned or
 * recycled pages reach the user's buffer.  If this passes, the poison
 * tests above could not have caught a missing event gate. */
static void test_early_consume_corrupts(void **state)
{
	struct tp_pair p;
	struct side sd[2];
	size_t bad = 0;
	int i;

	setenv("TCPX_P2P_TEST_EARLY_CONSUME", "1", 1);
	open_pair(&p, sd, (64u << 20) + 8192, 4);
	for (i = 0; i < 5 && !bad; i++)
		bad = move(&p, sd, 0, 0, 64u << 20, 900 + (uint64_t)i);
	close_pair(&p, sd);
	unsetenv("TCPX_P2P_TEST_EARLY_CONSUME");
	print_message("early consume: %zu wrong bytes\n", bad);
	assert_true(bad > 0);
}

/* Whether the driver holds [p, p + 1) page-locked. */
static int locked(const void *p)
{
	struct cudaPointerAttributes a;

	if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
		(void)cudaGetLastError();
		return 0;
	}
	return a.type == cudaMemoryTypeHost;
}

/* TCPX_P2P_MR_PIN: the library's locks are shared by regions inside them
 * and dropped with the last; the application's are never touched; a range
 * locked in part is refused with nothing registered. */
static void test_pin_locks(void **state)
{
	const size_t n = 8u << 20;
	tcpx_p2p_session *s;
	tcpx_p2p_config cfg;
	tcpx_p2p_mr *a, *b, *c;
	char *buf = aligned_alloc(4096, n), *app;

	assert_non_null(buf);
	assert_int_equal(tcpx_p2p_config_init(&cfg), 0);
	cfg.gpu = g_gpu[1];
	assert_int_equal(tcpx_p2p_session_create(&cfg, &s), 0);
	assert_false(locked(buf));
	assert_int_equal(tcpx_p2p_mr_register_ex(s, buf, n, TCPX_P2P_MEM_HOST, &pin_params, &a), 0);
	assert_true(locked(buf) && locked(buf + n - 1));
	/* inside a's lock: shares it */
	assert_int_equal(tcpx_p2p_mr_register_ex(s, buf + 4096, n / 2, TCPX_P2P_MEM_HOST,
						 &pin_params, &b), 0);
	assert_int_equal(tcpx_p2p_mr_deregister(a), 0);
	assert_true(locked(buf + 4096)); /* b still holds it */
	assert_int_equal(tcpx_p2p_mr_deregister(b), 0);
	assert_false(locked(buf));
	/* partly locked by the application: refused, nothing changed */
	assert_int_equal(cudaHostRegister(buf, n / 2, cudaHostRegisterDefault), cudaSuccess);
	assert_int_equal(tcpx_p2p_mr_register_ex(s, buf, n, TCPX_P2P_MEM_HOST, &pin_params, &c),
			 TCPX_P2P_EINVAL);
	print_message("partly locked: %s\n", tcpx_p2p_last_error());
	assert_true(locked(buf));
	assert_false(locked(buf + n - 1));
	assert_int_equal(cudaHostUnregister(buf), cudaSuccess);
	/* the application's own lock outlives the region */
	assert_int_equal(cudaHostAlloc((void **)&app, n, cudaHostAllocMapped), cudaSuccess);
	assert_int_equal(tcpx_p2p_mr_register_ex(s, app, n, TCPX_P2P_MEM_HOST, &pin_params, &c), 0);
	assert_int_equal(tcpx_p2p_mr_deregister(c), 0);
	assert_true(locked(app));
	assert_int_equal(cudaFreeHost(app), cudaSuccess);
	assert_int_equal(tcpx_p2p_session_destroy(s), 0);
	free(buf);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest sizes[] = { cmocka_unit_test(test_sizes) };
	const struct CMUnitTest pin[] = { cmocka_unit_test(test_sizes),
					  cmocka_unit_test(test_pin_locks) };
	const struct CMUnitTest early[] = { cmocka_unit_test(test_early_consume_corrupts) };
	int n = 0;

	if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
		printf("no CUDA device: skipping\n");
		return 77;
	}
	g_gpu[0] = 0;
	g_gpu[1] = n > 1 ? 1 : 0;
	setenv("TCPX_EMU_POISON", "1", 1);
	setenv("TCPX_EMU_BOUNCE", "device", 1);
	if (argc > 1 && !strcmp(argv[1], "early"))
		return cmocka_run_group_tests(early, NULL, NULL);
	if (argc > 1)
		g_unpack = !strcmp(argv[1], "d2d") ? TCPX_P2P_UNPACK_D2D :
			   !strcmp(argv[1], "host") ? TCPX_P2P_UNPACK_HOST : TCPX_P2P_UNPACK_KERNEL;
	g_pinned = argc < 2 ? DEVICE_MEM : !strcmp(argv[1], "pinned") ? HOST_ALLOC :
		   !strcmp(argv[1], "pin") ? HOST_PIN_AT_REG : DEVICE_MEM;
	if (argc > 2)
		g_max = strtoull(argv[2], NULL, 0) << 20;
	if (g_pinned == HOST_PIN_AT_REG)
		return cmocka_run_group_tests(pin, NULL, NULL);
	return cmocka_run_group_tests(sizes, NULL, NULL);
}
