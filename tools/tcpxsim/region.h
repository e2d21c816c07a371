/* The senders' registrations: the "dma-buf" that
 * cuMemGetHandleForAddressRange makes for a range of registered memory,
 * and the "pages" file DMA_BUF_CREATE_PAGES makes from it, which a devmem
 * send names.  Each is an eventfd the simulator maps to the range. */
#ifndef TCPXSIM_REGION_H
#define TCPXSIM_REGION_H

#include <stddef.h>
#include <stdint.h>

struct region {
	int fd;
	int pages;   /* 1: made by DMA_BUF_CREATE_PAGES, what sendmsg names */
	uint64_t base;
	size_t size;
	struct region *next;
};

#pragma GCC visibility push(hidden)

/* A dma-buf for [base, base + size): its descriptor, or -1 (ENOMEM). */
int sim_region_dmabuf(uint64_t base, size_t size);
/* ioctl(fd, DMA_BUF_CREATE_PAGES) on a dma-buf of ours: the pages file's
 * descriptor, or -1 (ENOMEM); -2 when `fd` is no dma-buf of ours. */
int sim_region_create_pages(int fd);
/* A copy of the registration behind `fd`: 0, or -1 when there is none. */
int sim_region_find(int fd, struct region *out);
/* close(fd): its registration, if any, ends. */
void sim_region_forget(int fd);

#pragma GCC visibility pop

#endif
