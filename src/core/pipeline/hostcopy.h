/* Host gathers and scatters on a few threads per session (hostcopy.c). */
#ifndef TP_CORE_HOSTCOPY_H
#define TP_CORE_HOSTCOPY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "device/tp_device.h"

struct tcpx_p2p_session;
struct tp_hcopy;

/* Part of a list of host copies, run by one of the session's copy threads
 * (hostcopy.c). */
struct tp_hjob {
	const struct tp_copy *list;
	uint32_t n;
	bool done;          /* set by the worker (release), polled by passes */
	struct tp_hjob *next;
};

/* A chunk's host copies, cut into up to one part per copy thread. */
#define TP_HCOPY_MAX_THREADS 4
struct tp_hcopies {
	struct tp_hjob part[TP_HCOPY_MAX_THREADS];
	int n;
};

/* Chunks up to this size are copied in the pass itself: handing them to a
 * thread costs more than the copy. */
#define TP_HCOPY_INLINE (256u << 10)
/* Whether a chunk of this size goes to the copy threads (else: copied in
 * the pass), from its size and the CPUs there are. */
bool tp__hcopy_worth(size_t chunk_len);
/* Queue list[0..n), cut by bytes into one part per copy thread. */
int tp__hcopy_submit(struct tcpx_p2p_session *s, struct tp_hcopies *h,
		     const struct tp_copy *list, uint32_t n);
bool tp__hcopy_done(const struct tp_hcopies *h);
/* Wait until a chunk's copies finished (conn teardown). */
void tp__hcopy_wait(const struct tp_hcopies *h);
void tp__hcopy_destroy(struct tp_hcopy *h);

#endif
