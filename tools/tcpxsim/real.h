/* What the simulator takes from the system underneath it: the libc (and
 * CUDA) calls it interposes, reached past itself, and the clock. */
#ifndef TCPXSIM_REAL_H
#define TCPXSIM_REAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>

#pragma GCC visibility push(hidden)

/* The next definition of each interposed call (dlsym RTLD_NEXT), looked up
 * once, on first use. */
struct sim_real {
	pthread_once_t once;
	ssize_t (*recvmsg)(int, struct msghdr *, int);
	ssize_t (*sendmsg)(int, const struct msghdr *, int);
	ssize_t (*send)(int, const void *, size_t, int);
	ssize_t (*recv)(int, void *, size_t, int);
	int (*setsockopt)(int, int, int, const void *, socklen_t);
	int (*ioctl)(int, unsigned long, ...);
	int (*close)(int);
	char *(*realpath)(const char *, char *);
	int (*mem_handle)(void *, unsigned long long, size_t, int, unsigned long long);
};

extern struct sim_real sim_real;

void sim_real_resolve(void);

#define REAL(fn) (pthread_once(&sim_real.once, sim_real_resolve), sim_real.fn)

#pragma GCC visibility pop

static inline uint64_t sim_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif
