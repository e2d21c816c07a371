/* A timeline of the one-way critical path, for test-hook builds only
 * (TCPX_P2P_TEST_TIMELINE=FILE; docs/benchmarks.md, "Timeline"): each
 * marked event of every connection of the process, with CLOCK_MONOTONIC
 * ns, into a fixed ring written to FILE at exit.  A release build has no
 * switch to read: every mark compiles to nothing. */
#ifndef TP_UTIL_TIMELINE_H
#define TP_UTIL_TIMELINE_H

#include <stdint.h>

enum tp_tl_event {
	TP_TL_SEND_POST,      /* a send (or write) posted */
	TP_TL_RECV_POST,      /* a receive posted */
	TP_TL_CTL_ISEND,      /* a control frame taken by the plugin */
	TP_TL_CTL_SEND_DONE,  /* its test() said done */
	TP_TL_CTL_RECV_DONE,  /* a control frame's receive done */
	TP_TL_MATCHED,        /* a SEND announcement matched and numbered */
	TP_TL_ACK_READ,       /* the peer's answer read */
	TP_TL_DATA_ISEND,     /* a data send taken by the plugin */
	TP_TL_DATA_IRECV,     /* a data receive taken by the plugin */
	TP_TL_DATA_SEND_DONE, /* a data send's test() said done */
	TP_TL_DATA_RECV_DONE, /* a data receive's test() said done */
	TP_TL_BOUND,          /* a chunk bound to a receive posted ahead */
	TP_TL_UNPACK,         /* a chunk's unpack started */
	TP_TL_CONSUMED,       /* a chunk handed back (irecvConsumed) */
	TP_TL_DONE_SEND,      /* a send or write completed (DONE) */
	TP_TL_DONE_RECV,      /* a receive completed (DONE) */
	TP_TL_NEVENTS
};

#if TP_TEST_HOOKS
void tp__tl_mark(enum tp_tl_event e);
#else
static inline void tp__tl_mark(enum tp_tl_event e)
{
	(void)e;
}
#endif

#endif
