/* Two sessions in one process joined by a connection over the emulator on
 * loopback, plus byte patterns to verify what moved. */
#ifndef TP_TEST_PAIR_H
#define TP_TEST_PAIR_H

#include <stddef.h>
#include <stdint.h>

#include "tcpx_p2p.h"

struct tp_pair {
	tcpx_p2p_session *s[2];
	tcpx_p2p_conn *c[2];
};

/* cfg NULL: defaults + environment.  Connects through the rendezvous
 * (use_blobs 0) or by blob exchange (1).  Returns 0 or a TCPX_P2P_E*. */
int tp_pair_open(struct tp_pair *p, const tcpx_p2p_config *cfg, int use_blobs);
/* The same with one config per side (cfg[0] for s[0], cfg[1] for s[1]). */
int tp_pair_open2(struct tp_pair *p, const tcpx_p2p_config cfg[2], int use_blobs);
void tp_pair_close(struct tp_pair *p);

/* One more connection between two existing sessions of this process, by
 * blob exchange (each side connects from its own thread).  0 or TCPX_P2P_E*. */
int tp_link(tcpx_p2p_session *a, tcpx_p2p_session *b, tcpx_p2p_conn **ca, tcpx_p2p_conn **cb);

/* Both peers in one thread: drive all xfers together (waiting on one side
 * alone stalls once the other's window is full) and release each as it
 * completes.  0, or the first error (the rest are left as they are). */
int tp_complete_all(tcpx_p2p_xfer **x, int n);

/* n sends of `piece` bytes from mr (the k-th at k * piece), one after the
 * other, each waited for (which drives c's session only); *done counts
 * those completed, atomically, for another thread to watch.  0, or the
 * first error. */
int tp_send_counted(tcpx_p2p_conn *c, tcpx_p2p_mr *mr, size_t piece, int n, int *done);

/* Deterministic pattern: byte i of stream `seed` (any offset). */
void tp_fill(void *buf, size_t len, uint64_t seed);
/* First mismatching offset, or (size_t)-1 when buf holds the pattern. */
size_t tp_check(const void *buf, size_t len, uint64_t seed);

#define TP_TEST_TIMEOUT_MS 60000

#endif
