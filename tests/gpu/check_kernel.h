/* The checking kernel of test_stream_wait (check_kernel.cu). */
#ifndef TP_TESTS_GPU_CHECK_KERNEL_H
#define TP_TESTS_GPU_CHECK_KERNEL_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Queue on stream: *diff += the count of bytes where got[0..n) differs
 * from want[0..n) (device memory, or mapped host memory for diff).
 * 0, or -1 when the launch failed. */
int check_launch(const void *got, const void *want, size_t n, unsigned long long *diff,
		 void *stream);

#ifdef __cplusplus
}
#endif

#endif
