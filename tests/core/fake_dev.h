/* fake_dev.c: the device seam on the CPU, and where work ran. */
#ifndef TP_TESTS_FAKE_DEV_H
#define TP_TESTS_FAKE_DEV_H

struct fake_counts {
	unsigned long on_stream; /* operations the session's (or any) stream ran */
	unsigned long by_hold;   /* jobs performed by hold "kernels" */
	unsigned long by_drain;  /* jobs performed by drains */
	unsigned long holds, drains;
};

extern struct fake_counts fake_counts;
/* Nonzero: hold kernels claim nothing (a held stream still waiting for its
 * turn); drains go on. */
extern int fake_holds_paused;

/* Nonzero: copy lists queued on a stream wait before they run (a stream
 * behind a held one on its hardware queue). */
extern int fake_lists_gated;

/* Read a counter, set the pause or the gate, from the test's thread. */
#define FAKE_COUNT(f) __atomic_load_n(&fake_counts.f, __ATOMIC_ACQUIRE)
static inline void fake_pause(int on)
{
	__atomic_store_n(&fake_holds_paused, on, __ATOMIC_RELEASE);
}
static inline void fake_gate(int on)
{
	__atomic_store_n(&fake_lists_gated, on, __ATOMIC_RELEASE);
}

/* A caller's CUDA event (what tcpx_p2p_xfer_params.event points to):
 * pending until the test completes or fails it. */
enum { FAKE_EV_PENDING, FAKE_EV_DONE, FAKE_EV_FAILED };
struct fake_uevent {
	int state;               /* FAKE_EV_* (atomic) */
	unsigned long queries;   /* tp__dev_user_event_query calls on it (atomic) */
};
static inline void fake_event_set(struct fake_uevent *e, int state)
{
	__atomic_store_n(&e->state, state, __ATOMIC_RELEASE);
}

#endif
