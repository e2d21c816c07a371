/* A net plugin for test_guards' accept-wait group: the bundled emulator's
 * v7 table with accept wrapped to count the accepts in flight (called at
 * least once, comm not returned yet).  How many are in flight when the
 * first one completes tells how the caller drove them: every channel's
 * accept started before any finished means their flow-steering waits
 * overlap; one after another shows only one.  A count, not a clock, so a
 * loaded machine cannot change the answer. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "abi/nccl_net.h"
#include "accept_probe.h"

#define PROBE_MAX 256

/* Filled from the emulator's table when this module loads; the library
 * reads the table only after dlopen returns. */
__attribute__((visibility("default"))) ncclNet_v7_t ncclNetPlugin_v7;

static const ncclNet_v7_t *emu;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static void *in_flight[PROBE_MAX];
static int n_in_flight;
static struct accept_probe_stats stats = { .in_flight_at_first_done = -1 };

static int find(void *lcomm)
{
	for (int i = 0; i < n_in_flight; i++)
		if (in_flight[i] == lcomm)
			return i;
	return -1;
}

static void note(void *lcomm, ncclResult_t r, int done)
{
	int i = find(lcomm);

	if (r == ncclSuccess && !done && i < 0 && n_in_flight < PROBE_MAX) {
		in_flight[n_in_flight++] = lcomm;
	} else if (r != ncclSuccess || done) {
		if (done && stats.in_flight_at_first_done < 0)
			stats.in_flight_at_first_done = n_in_flight + (i < 0);
		if (i >= 0)
			in_flight[i] = in_flight[--n_in_flight];
		stats.completed += done;
	}
	if (n_in_flight > stats.max_in_flight)
		stats.max_in_flight = n_in_flight;
}

static ncclResult_t probe_accept(void *lcomm, void **rcomm, ncclNetDeviceHandle_v7_t **dh)
{
	ncclResult_t r = emu->accept(lcomm, rcomm, dh);

	pthread_mutex_lock(&lock);
	note(lcomm, r, r == ncclSuccess && *rcomm);
	pthread_mutex_unlock(&lock);
	return r;
}

__attribute__((visibility("default"))) struct accept_probe_stats accept_probe_read(void)
{
	struct accept_probe_stats s;

	pthread_mutex_lock(&lock);
	s = stats;
	pthread_mutex_unlock(&lock);
	return s;
}

/* Without the emulator the table stays empty: the test reads emu_loaded
 * before it lets the library near it. */
__attribute__((constructor)) static void probe_load(void)
{
	void *dl = dlopen(ACCEPT_PROBE_EMU_PATH, RTLD_NOW | RTLD_LOCAL);

	emu = dl ? dlsym(dl, "ncclNetPlugin_v7") : NULL;
	if (!emu) {
		fprintf(stderr, "accept_probe: no emulator at %s: %s\n", ACCEPT_PROBE_EMU_PATH,
			dlerror());
		return;
	}
	ncclNetPlugin_v7 = *emu;
	ncclNetPlugin_v7.accept = probe_accept;
	stats.emu_loaded = 1;
}
