/* Benchmark buffers in host, pinned host or CUDA memory, with pattern fill
 * and check. */
#ifndef TP_BENCH_MEM_H
#define TP_BENCH_MEM_H

#include <stddef.h>
#include <stdint.h>

enum bench_mem { BENCH_HOST, BENCH_CUDA, BENCH_PINNED };

struct bench_buf {
	void *ptr;
	size_t len;
	int cuda;      /* 1: device memory on gpu */
	int pinned;    /* 1: page-locked host memory, mapped (cudaHostAlloc) */
	int gpu;
	void *staging; /* host copy for fill/check of device memory */
};

/* 0 or -1 with a message in err. */
int bench_buf_alloc(struct bench_buf *b, size_t len, enum bench_mem mem, int gpu, char *err,
		    size_t n);
void bench_buf_free(struct bench_buf *b);
/* Pattern `seed` into [off, off+len) (off a multiple of 8). */
int bench_buf_fill(struct bench_buf *b, size_t off, size_t len, uint64_t seed);
int bench_buf_poison(struct bench_buf *b, size_t off, size_t len);
/* Offset (from off) of the first wrong byte, (size_t)-1 if all match,
 * (size_t)-2 on error. */
size_t bench_buf_check(struct bench_buf *b, size_t off, size_t len, uint64_t seed);
/* Number of CUDA devices (0 without CUDA or a driver). */
int bench_gpu_count(void);
/* PCI bus id of a GPU ("0000:04:00.0"); 0 or -1. */
int bench_gpu_bus_id(int gpu, char *buf, int len);

#endif
