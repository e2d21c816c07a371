/* Test builds: hold a stream for a while before the library's own work on
 * it, so that work on one stream that is used from another without an
 * ordering between them shows as wrong bytes instead of passing by luck
 * of timing.  A host function that sleeps is queued on the stream: what
 * comes after it on that stream waits (and whatever shares its hardware
 * queue), for a bounded time.
 *
 *   TCPX_P2P_TEST_STREAM_DELAY_US=N  before every operation the device
 *       seam queues (unpack launches and copies, copy lists, event records,
 *       clears of new device memory), a sleep of a random 0..N us
 *   TCPX_P2P_TEST_CLEAR_DELAY_US=N   before every clear of new device
 *       memory, a sleep of exactly N us (the regression test of a clear
 *       that ran after the buffer was in use)
 *
 * Read once per process.  A release build has neither (dev_priv.h makes
 * the calls empty). */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "dev_priv.h"
#include "util/log.h"

#if TP_TEST_HOOKS

static unsigned op_max_us, clear_us;
static uint64_t rng_state;
static pthread_once_t delay_once = PTHREAD_ONCE_INIT;

static unsigned env_us(const char *name)
{
	const char *s = getenv(name);
	char *end;
	unsigned long v;

	if (!s || !*s)
		return 0;
	v = strtoul(s, &end, 0);
	if (*end || v > 10u * 1000 * 1000) {
		TP_WARN("dev", "ignoring %s=%s (want 0..10000000 us)", name, s);
		return 0;
	}
	return (unsigned)v;
}

static void delay_init(void)
{
	op_max_us = env_us("TCPX_P2P_TEST_STREAM_DELAY_US");
	clear_us = env_us("TCPX_P2P_TEST_CLEAR_DELAY_US");
	rng_state = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
	if (op_max_us || clear_us)
		TP_WARN("dev", "stream delays injected (test use only): random 0..%u us before "
			"each device operation, %u us before each clear", op_max_us, clear_us);
}

static void CUDART_CB sleep_fn(void *arg)
{
	unsigned us = (unsigned)(uintptr_t)arg;
	struct timespec t = { .tv_sec = us / 1000000, .tv_nsec = (long)(us % 1000000) * 1000 };

	nanosleep(&t, NULL);
}

static unsigned random_below(unsigned n)
{
	uint64_t z = __atomic_add_fetch(&rng_state, 0x9e3779b97f4a7c15ull, __ATOMIC_RELAXED);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return (unsigned)((z ^ (z >> 31)) % ((uint64_t)n + 1));
}

static void delay(cudaStream_t st, unsigned us)
{
	if (!us)
		return;
	/* A test aid: a stream that refuses host functions runs undelayed. */
	if (cudaLaunchHostFunc(st, sleep_fn, (void *)(uintptr_t)us) != cudaSuccess) {
		(void)cudaGetLastError();
		TP_WARN_RL("dev", "cannot queue an injected delay");
	}
}

void tp__dev_delay_op(cudaStream_t st)
{
	pthread_once(&delay_once, delay_init);
	if (op_max_us)
		delay(st, random_below(op_max_us));
}

void tp__dev_delay_clear(cudaStream_t st)
{
	pthread_once(&delay_once, delay_init);
	delay(st, clear_us + (op_max_us ? random_below(op_max_us) : 0));
}

#endif
