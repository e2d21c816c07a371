/* The timeline of test-hook builds (timeline.h).  Enabled once per process
 * from the environment; marks claim ring entries with one atomic add, so
 * any thread may mark without a lock; entries past the ring's end are
 * dropped (counted in the file's first line). */
#include "util/timeline.h"

#if TP_TEST_HOOKS
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "util/time.h"

#define TP_TL_ENTRIES (1u << 20)

struct tp_tl_entry {
	int64_t ns;
	uint32_t event;
	uint32_t thread; /* a small per-thread number, in order of first mark */
};

static struct tp_tl_entry *tl_ring;
static const char *tl_path;
static uint64_t tl_next;
static uint32_t tl_threads;
static pthread_once_t tl_once = PTHREAD_ONCE_INIT;
static __thread uint32_t tl_thread;

static const char *const tl_names[TP_TL_NEVENTS] = {
	"send_post",      "recv_post",      "ctl_isend",     "ctl_send_done",
	"ctl_recv_done",  "matched",        "ack_read",      "data_isend",
	"data_irecv",     "data_send_done", "data_recv_done", "bound",
	"unpack",         "consumed",       "done_send",     "done_recv",
};

static void tl_write(void)
{
	uint64_t n = __atomic_load_n(&tl_next, __ATOMIC_ACQUIRE);
	FILE *f = fopen(tl_path, "w");

	if (!f)
		return;
	fprintf(f, "# tcpx_p2p timeline: ns event thread (%llu marks, %llu dropped)\n",
		(unsigned long long)n,
		(unsigned long long)(n > TP_TL_ENTRIES ? n - TP_TL_ENTRIES : 0));
	for (uint64_t i = 0; i < n && i < TP_TL_ENTRIES; i++)
		fprintf(f, "%lld %s %u\n", (long long)tl_ring[i].ns, tl_names[tl_ring[i].event],
			tl_ring[i].thread);
	fclose(f);
}

static void tl_init(void)
{
	tl_path = getenv("TCPX_P2P_TEST_TIMELINE");
	if (!tl_path || !*tl_path)
		return;
	tl_ring = calloc(TP_TL_ENTRIES, sizeof(*tl_ring));
	if (tl_ring && atexit(tl_write)) {
		free(tl_ring);
		tl_ring = NULL;
	}
}

void tp__tl_mark(enum tp_tl_event e)
{
	uint64_t k;

	pthread_once(&tl_once, tl_init);
	if (!tl_ring)
		return;
	if (!tl_thread)
		tl_thread = __atomic_add_fetch(&tl_threads, 1, __ATOMIC_RELAXED);
	k = __atomic_fetch_add(&tl_next, 1, __ATOMIC_ACQ_REL);
	if (k >= TP_TL_ENTRIES)
		return;
	tl_ring[k] = (struct tp_tl_entry){ tp__now_ns(), (uint32_t)e, tl_thread };
}
#else
typedef int tp_tl_unused; /* ISO C wants a translation unit to declare something */
#endif
