/* The per-comm FIFO window of the transfer engine: pure arithmetic, so
 * that unit tests can check it (wrap included) without a plugin. */
#ifndef TP_CORE_WINDOW_H
#define TP_CORE_WINDOW_H

#include <stdbool.h>
#include <stdint.h>

/* The FIFO window of one comm.  Requests move through stages in order:
 *   posted -> tested (done) -> unpacked (launched) -> retired (consumed)
 * Each counter is the number of requests that have passed that stage,
 * modulo 2^32: retired <= unpacked <= tested <= posted and posted - retired
 * <= limit hold in modular arithmetic, so compare stages with != (a long-
 * lived comm wraps the counters) and distances by unsigned subtraction.
 * Slot of request k: k % TP_WINDOW_SLOTS. */
#define TP_WINDOW_SLOTS 16u

struct tp_window {
	uint32_t posted, tested, unpacked, retired;
	uint32_t limit; /* 1..16 */
};

static inline uint32_t tp_window_inflight(const struct tp_window *w)
{
	return w->posted - w->retired;
}

static inline bool tp_window_can_post(const struct tp_window *w)
{
	return tp_window_inflight(w) < w->limit;
}

static inline unsigned tp_window_slot(uint32_t k)
{
	return k % TP_WINDOW_SLOTS;
}

#endif
