/* libFuzzer target: the control channel's incoming stream
 * (src/core/ctl_stream.c cutting it into messages, src/core/items/inbound.c
 * decoding them and the in-queue, src/core/items/inqueue.c, that acts on
 * them; a CLOSE's counts, src/core/close/drain.c) on a connection built
 * without a plugin.  The connection has
 * three exports (exports() below: two live ones over two regions, one
 * revoked), two receives waiting for a sender (100 and 4096 bytes) and a
 * write waiting for its answer (id 1), and small peer_max_* bounds, so that
 * matched, mismatched, refused, accepted and over-the-bound items are all
 * reachable: 16 bytes 'A', 'C' or 'D' in an input stand for the random key
 * of export 0, 1 or 2.  The first input byte says where the stream is cut
 * in two (messages spanning deliveries). */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../core/bare_conn.h"
#include "core/close/close.h"


int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct tcpx_p2p_session s;
static struct tcpx_p2p_conn c;
static struct tcpx_p2p_mr mr, mr2, *mrs[2];
static struct tp_comm comms[4];
static struct tp_ctl ctl;
static char pool[64 << 10], pool2[16 << 10];
/* The exports' keys as they travel, and the 16-byte input markers that
 * stand for them. */
static unsigned char key[3][TP_KEY_BYTES];
static const char marker[3] = { 'A', 'C', 'D' };

static void setup(void)
{
	mr = (struct tcpx_p2p_mr){ .ptr = pool, .len = sizeof(pool), .type = TCPX_P2P_MEM_HOST };
	mr2 = (struct tcpx_p2p_mr){ .ptr = pool2, .len = sizeof(pool2),
				    .type = TCPX_P2P_MEM_HOST };
	mrs[0] = &mr;
	mrs[1] = &mr2;
	tp_bare_conn_init(&s, &c, comms, &ctl, mrs, 2);
}

/* A fresh one-sided state per input: export 0 is all of mr (read and
 * write), export 1 the second half of mr2 (write only), export 2 all of mr
 * again, revoked. */
static void exports(void)
{
	tcpx_p2p_rdesc d[3];

	if (tp__items_create(&c) ||
	    tcpx_p2p_mr_export(&c, &mr, 0, sizeof(pool),
			       TCPX_P2P_ACCESS_WRITE | TCPX_P2P_ACCESS_READ, &d[0]) ||
	    tcpx_p2p_mr_export(&c, &mr2, sizeof(pool2) / 2, sizeof(pool2) / 2,
			       TCPX_P2P_ACCESS_WRITE, &d[1]) ||
	    tcpx_p2p_mr_export(&c, &mr, 0, sizeof(pool), TCPX_P2P_ACCESS_WRITE, &d[2]) ||
	    tcpx_p2p_mr_unexport(&c, &d[2]))
		abort();
	for (int i = 0; i < 3; i++)
		memcpy(key[i], d[i].bytes + 24, TP_KEY_BYTES); /* export.c: TP_RDESC_KEY */
}

static struct tcpx_p2p_xfer *user_xfer(enum tp_op op, enum tp_dir dir, size_t len)
{
	struct tcpx_p2p_xfer *x = tp__xfer_new(op, dir);
	tcpx_p2p_seg g = { &mr, 0, len };

	if (!x || tp__segs_build(&c, x, &g, 1, "fuzz"))
		abort();
	x->c = &c;
	return x;
}

static void drop_list(struct tcpx_p2p_xfer *keep[3])
{
	for (int d = 0; d < 2; d++) {
		struct tcpx_p2p_xfer *x, *next;

		for (x = c.dir[d].head; x; x = next) {
			next = x->dlink.next;
			if (x != keep[0] && x != keep[1] && x != keep[2])
				tp__xfer_free(x);
		}
		c.dir[d].head = c.dir[d].tail = NULL;
		c.dir[d].next_seq = 0;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool ready;
	struct tcpx_p2p_xfer *mine[3];
	unsigned char *in;
	size_t cut;
	bool moved;
	int rc;

	if (!ready) {
		setup();
		ready = true;
	}
	if (size < 1)
		return 0;
	cut = data[0] % size;
	in = malloc(size);
	if (!in)
		return 0;
	memcpy(in, data + 1, size - 1);
	exports();
	for (size_t i = 0; i + TP_KEY_BYTES <= size - 1; i++) {
		for (int k = 0; k < 3; k++) {
			size_t j = 0;

			while (j < TP_KEY_BYTES && in[i + j] == (unsigned char)marker[k])
				j++;
			if (j == TP_KEY_BYTES)
				memcpy(in + i, key[k], TP_KEY_BYTES);
		}
	}
	mine[0] = user_xfer(TP_OP_RECV, TP_RECV, 100);
	mine[1] = user_xfer(TP_OP_RECV, TP_RECV, 4096);
	mine[2] = user_xfer(TP_OP_WRITE, TP_SEND, 100);
	mine[2]->id = 1;
	mine[0]->state = mine[1]->state = TP_XS_UNMATCHED;
	mine[2]->state = TP_XS_STREAMING_UNANSWERED; /* as posted, its chunks not queued here */
	tp__xlist_push(&c.unmatched, mine[0]);
	tp__xlist_push(&c.unmatched, mine[1]);
	tp__xlist_push(&c.answers, mine[2]);
	size--;

	rc = tp__ctl_feed(&c, in, cut);
	if (!rc)
		rc = tp__ctl_feed(&c, in + cut, size - cut);
	/* What the channel parsed goes to the item protocol, as a pass hands it. */
	for (struct tp_ctl_msg m; !rc && tp__ctl_next(&c, &m);)
		rc = tp__items_on_msg(&c, m.type, m.chan, m.body, m.len);
	/* The peer's CLOSE counts are checked where a pass answers it. */
	if (!rc && ctl.peer_closed)
		rc = tp__close_counts(&c);
	free(in);
	for (int i = 0; !rc && i < 2; i++)
		rc = tp__items_progress(&c, &moved);

	/* Tear down what this input built; the connection is reused. */
	drop_list(mine);
	while (c.unmatched.head)
		tp__xlist_remove(&c.unmatched, c.unmatched.head);
	while (c.answers.head)
		tp__xlist_remove(&c.answers, c.answers.head);
	while (c.settling.head)
		tp__xlist_remove(&c.settling, c.settling.head);
	for (int i = 0; i < 3; i++)
		tp__xfer_free(mine[i]);
	tp__items_destroy(&c);
	mr.inflight = mr2.inflight = 0;
	memset(comms, 0, sizeof(comms));
	ctl.in_off = ctl.in_parsed = ctl.in_len = 0;
	ctl.out_off = ctl.out_len = 0;
	ctl.close_queued = ctl.close_framed = ctl.peer_closed = false; /* a CLOSE */
	ctl.tx_end = ctl.rx_end = 0;
	ctl.close_rc = 0;
	memset(&c.closing, 0, sizeof(c.closing));
	c.completed = 0;
	c.inbound = 0;
	c.err = 0;
	return 0;
}
