/* Vectored transfers, one-sided WRITE/READ into exported memory and
 * notifications (the 0.3 API) between two sessions of this process over the
 * emulator.  Every case checks bytes: each region keeps a host shadow of
 * what it must hold, and the whole region (guard bytes around and between
 * the destinations included) is compared with it.
 *
 * Usage: test_kv host|cuda.  "cuda" makes both sessions with gpu 0 and
 * cudaMalloc'd regions (a build with TP_KV_CUDA; it exits 77 without a
 * GPU); "host" uses plain malloc.  TP_KV_SEED=n repeats a run's random
 * shapes (the seed is printed); TP_KV_ONLY=pattern runs the matching cases
 * only.  The emulator modes come from the
 * environment of each CTest registration.
 *
 * Overlapping writes in flight together: the chunks of one connection
 * travel over several channels and land in whatever order the channels
 * deliver them, so when two writes in flight cover the same remote bytes
 * the earlier one's may land last.  test_many_batches checks overwrites
 * after the overwritten writes completed; TP_KV_OVERLAP=1 posts them
 * while those are in flight ("land in posting order", include/tcpx_p2p.h,
 * read as bytes: fails today).
 *
 * One binary, a file per feature: kv_vec.c (vectored), kv_onesided.c
 * (WRITE and READ), kv_refusals.c, kv_notif.c, kv_kill.c (the target gone
 * mid-write), kv_first.c (the first chunks of fresh connections, unattended),
 * kv_prep.c (prepared and strided lists: tcpx_p2p_xlist_*); the fixture, segment layouts and the exported pool they share
 * are kv_fixture.c, kv_layout.c and kv_pool.c (kv.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#ifdef TP_KV_CUDA
#include <cuda_runtime_api.h>
#endif

#include "kv.h"

int g_cuda;
uint64_t g_seed;

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_vec_shapes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_vec_empty, setup, teardown),
		cmocka_unit_test_setup_teardown(test_mixed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_mixed_one_sided, setup, teardown),
		cmocka_unit_test_setup_teardown(test_total_mismatch, setup, teardown),
		cmocka_unit_test_setup_teardown(test_write_notif, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refusals, setup, teardown),
		cmocka_unit_test_setup_teardown(test_two_initiators, setup, teardown),
		cmocka_unit_test_setup_teardown(test_foreign_descriptor, setup, teardown),
		cmocka_unit_test_setup_teardown(test_threaded_target, setup_threaded, teardown),
		cmocka_unit_test_setup_teardown(test_read, setup, teardown),
		cmocka_unit_test_setup_teardown(test_notif_order, setup, teardown),
		cmocka_unit_test_setup_teardown(test_target_killed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_many_batches, setup, teardown),
		cmocka_unit_test_setup_teardown(test_first_chunks_unattended, setup, teardown),
		cmocka_unit_test_setup_teardown(test_prep_lists, setup, teardown),
		cmocka_unit_test_setup_teardown(test_prep_strided, setup, teardown),
		cmocka_unit_test_setup_teardown(test_prep_refusals, setup, teardown),
		cmocka_unit_test_setup_teardown(test_prep_threads, setup_threaded, teardown),
	};
	const char *mode = argc > 1 ? argv[1] : "host";
	const char *seed = getenv("TP_KV_SEED");
	const char *only = getenv("TP_KV_ONLY");

	if (!strcmp(mode, "cuda")) {
#ifdef TP_KV_CUDA
		int n = 0;

		if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) {
			printf("test_kv: no CUDA device: skipping\n");
			return 77;
		}
		g_cuda = 1;
#else
		printf("test_kv: built without CUDA (the gpu registration is test_kv_cuda): "
		       "skipping\n");
		return 77;
#endif
	} else if (strcmp(mode, "host")) {
		fprintf(stderr, "usage: test_kv host|cuda\n");
		return 2;
	}
	g_seed = seed ? strtoull(seed, NULL, 0)
		      : (uint64_t)time(NULL) * 1000003u ^ (uint64_t)getpid();
	printf("test_kv: %s memory, seed %llu (TP_KV_SEED=%llu repeats it)\n", mode,
	       (unsigned long long)g_seed, (unsigned long long)g_seed);
	fflush(stdout);
	if (only && *only)
		cmocka_set_test_filter(only);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
