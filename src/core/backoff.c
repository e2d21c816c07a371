/* The back-off between passes that found nothing to do (engine.h): every
 * wait of the library and the progress thread use it. */
#include <sched.h>
#include <time.h>

#include "core/engine.h"
#include "core/pass.h"
#include "util/time.h"

/* Back-off when every transfer waits on the network: passes spin this
 * many times, then yield this many, then sleep for 1/TP_SLEEP_SHARE of the
 * time nothing has moved so far, within [TP_SLEEP_MIN_NS, TP_SLEEP_MAX_NS].
 * The cost: a completion is seen at most that much late, so the added
 * latency stays near 1/16 of the stall it follows (and at most 1 ms), while
 * a stalled peer costs about one pass per millisecond. */
#define TP_SPIN_PASSES 64u
#define TP_YIELD_PASSES 256u
#define TP_SLEEP_SHARE 16
#define TP_SLEEP_MIN_NS 4000
#define TP_SLEEP_MAX_NS 1000000

/* The back-off's sleep now: 1/TP_SLEEP_SHARE of the idle time so far. */
int64_t tp__backoff_sleep_ns(const struct tp_backoff *b)
{
	int64_t ns = (tp__now_ns() - b->idle_since) / TP_SLEEP_SHARE;

	return ns < TP_SLEEP_MIN_NS ? TP_SLEEP_MIN_NS : ns > TP_SLEEP_MAX_NS ? TP_SLEEP_MAX_NS : ns;
}

void tp__backoff(struct tp_backoff *b, const struct tp_pass_result *st)
{
	struct timespec ts;
	int64_t ns;

	if (st->moved || st->pending) {
		b->idle = 0;
		return;
	}
	if (b->idle++ == 0)
		b->idle_since = tp__now_ns();
	if (b->idle <= TP_SPIN_PASSES)
		return;
	if (b->idle <= TP_SPIN_PASSES + TP_YIELD_PASSES) {
		sched_yield();
		return;
	}
	ns = tp__backoff_sleep_ns(b);
	ts = (struct timespec){ (time_t)(ns / 1000000000), (long)(ns % 1000000000) };
	nanosleep(&ts, NULL);
}

