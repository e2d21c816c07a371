/* What a peer's control messages can make this side hold, and what a
 * peer can learn by probing, on a connection built without a plugin
 * (bare_conn.h, shared with the control channel's fuzz target): messages
 * go in through tp__ctl_feed, answers pile up in the outgoing stream
 * (nothing sends them), so every bound is reached deterministically.
 * Each test builds a fresh conn. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bare_conn.h"

#define POOL (64u << 10)
#define NREG 1000 /* regions registered, each exported once */

struct fx {
	struct tcpx_p2p_session s;
	struct tcpx_p2p_conn c;
	struct tcpx_p2p_mr mr[NREG], *mrs[NREG];
	struct tp_comm comms[4];
	struct tp_ctl ctl;
	char pool[POOL];
	tcpx_p2p_rdesc d[NREG];
	unsigned char *msg; /* message being built */
	size_t len, cap;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	for (int i = 0; i < NREG; i++) {
		f->mr[i] = (struct tcpx_p2p_mr){ .ptr = f->pool, .len = POOL,
						 .type = TCPX_P2P_MEM_HOST };
		f->mrs[i] = &f->mr[i];
	}
	tp_bare_conn_init(&f->s, &f->c, f->comms, &f->ctl, f->mrs, NREG);
	assert_int_equal(tp__items_create(&f->c), 0);
	/* Export i: region i, all of it, read and write. */
	for (int i = 0; i < NREG; i++)
		assert_int_equal(tcpx_p2p_mr_export(&f->c, &f->mr[i], 0, POOL,
						    TCPX_P2P_ACCESS_WRITE | TCPX_P2P_ACCESS_READ,
						    &f->d[i]), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	struct tcpx_p2p_xfer *x, *next;

	for (int d = 0; d < 2; d++)
		for (x = f->c.dir[d].head; x; x = next) {
			next = x->dlink.next;
			tp__xfer_free(x);
		}
	tp__items_destroy(&f->c);
	free(f->ctl.in);
	free(f->ctl.out);
	free(f->msg);
	free(f);
	return 0;
}

/* ---- building messages ---------------------------------------------------- */

static unsigned char *put(struct fx *f, size_t n)
{
	if (f->len + n > f->cap) {
		f->cap = (f->len + n) * 2;
		f->msg = realloc(f->msg, f->cap);
		assert_non_null(f->msg);
	}
	f->len += n;
	return f->msg + f->len - n;
}

static void hdr(struct fx *f, enum tp_ctl_type type, size_t body)
{
	unsigned char *m = put(f, TP_CTL_MSG_HDR);

	m[0] = (unsigned char)type;
	m[1] = m[2] = m[3] = 0;
	tp_put32(m + 4, (uint32_t)body);
}

/* A remote segment naming export idx with the key of descriptor d. */
static void seg_key(struct fx *f, uint32_t idx, const tcpx_p2p_rdesc *d, uint64_t off,
		    uint64_t len)
{
	unsigned char *p = put(f, TP_WSEG_BYTES);

	tp_put32(p, idx);
	tp_put32(p + 4, 0);
	memcpy(p + 8, d->bytes + 24, TP_KEY_BYTES); /* export.c: TP_RDESC_KEY */
	tp_put64(p + 8 + TP_KEY_BYTES, off);
	tp_put64(p + 16 + TP_KEY_BYTES, len);
}

/* ... with the key of export `keyof`. */
static void seg(struct fx *f, uint32_t idx, int keyof, uint64_t off, uint64_t len)
{
	seg_key(f, idx, &f->d[keyof], off, len);
}

static void one_sided(struct fx *f, enum tp_ctl_type type, uint64_t id, uint64_t total,
		      uint32_t nseg, const char *notif)
{
	size_t nlen = notif ? strlen(notif) : 0;
	unsigned char *m;

	hdr(f, type, 24 + (size_t)nseg * TP_WSEG_BYTES + nlen);
	m = put(f, 24);
	tp_put64(m, id);
	tp_put64(m + 8, total);
	tp_put32(m + 16, nseg);
	tp_put32(m + 20, (uint32_t)nlen);
	/* the caller appends the segments, then the notification */
}

static void notif(struct fx *f, const char *text)
{
	hdr(f, TP_CTL_NOTIF, 4 + strlen(text));
	tp_put32(put(f, 4), (uint32_t)strlen(text));
	memcpy(put(f, strlen(text)), text, strlen(text));
}

static void send_ann(struct fx *f, uint64_t id, uint64_t len)
{
	unsigned char *m;

	hdr(f, TP_CTL_SEND, 16);
	m = put(f, 16);
	tp_put64(m, id);
	tp_put64(m + 8, len);
}

/* Feed what was built and act on it; the first error, or 0. */
static int feed(struct fx *f)
{
	bool moved;
	struct tp_ctl_msg m;
	int rc = tp__ctl_feed(&f->c, f->msg, f->len);

	f->len = 0;
	/* What the channel parsed goes to the item protocol, as a pass hands it. */
	while (!rc && tp__ctl_next(&f->c, &m))
		rc = tp__items_on_msg(&f->c, m.type, m.chan, m.body, m.len);
	for (int i = 0; !rc && i < 2; i++)
		rc = tp__items_progress(&f->c, &moved);
	return rc;
}

/* The acks in the outgoing stream, in order: status and value of each. */
static int acks(struct fx *f, uint32_t *status, uint64_t *value, int max)
{
	size_t o = f->ctl.out_off;
	int n = 0;

	while (o + TP_CTL_MSG_HDR <= f->ctl.out_len && n < max) {
		const unsigned char *m = f->ctl.out + o;
		uint32_t body = tp_get32(m + 4);

		if (m[0] == TP_CTL_ACK) {
			status[n] = tp_get32(m + TP_CTL_MSG_HDR + 8);
			value[n] = tp_get64(m + TP_CTL_MSG_HDR + 16);
			n++;
		}
		o += TP_CTL_MSG_HDR + body;
	}
	return n;
}

/* ---- tests ---------------------------------------------------------------- */

/* Every reason a peer could probe with is one answer: unknown index, wrong
 * key, outside the export, an access it does not give, revoked,
 * deregistered.  (READ_REQs: no discard items to drain.) */
static void test_one_refusal(void **state)
{
	struct fx *f = *state;
	uint32_t st[8];
	uint64_t val[8];
	tcpx_p2p_rdesc ro;

	/* export NREG: region 0, write-only... */
	assert_int_equal(tcpx_p2p_mr_export(&f->c, &f->mr[0], 0, POOL, TCPX_P2P_ACCESS_WRITE,
					    &ro), 0);
	/* ...and export 1 revoked, region 2 deregistered (gone from the index). */
	assert_int_equal(tcpx_p2p_mr_unexport(&f->c, &f->d[1]), 0);
	assert_int_equal(tcpx_p2p_mr_unexport(&f->c, &f->d[1]), 0);
	memmove(&f->mrs[2], &f->mrs[3], (NREG - 3) * sizeof(f->mrs[0]));
	f->s.nmrs--;

	one_sided(f, TP_CTL_READ_REQ, 1, 10, 1, NULL);
	seg(f, NREG + 5, 0, 0, 10);             /* no such export */
	one_sided(f, TP_CTL_READ_REQ, 2, 10, 1, NULL);
	seg(f, 3, 4, 0, 10);                    /* export 3 with export 4's key */
	one_sided(f, TP_CTL_READ_REQ, 3, 10, 1, NULL);
	seg(f, 3, 3, POOL - 5, 10);             /* across the export's end */
	one_sided(f, TP_CTL_READ_REQ, 4, 10, 1, NULL);
	seg_key(f, NREG, &ro, 0, 10);           /* read from a write-only export */
	one_sided(f, TP_CTL_READ_REQ, 5, 10, 1, NULL);
	seg(f, 1, 1, 0, 10);                    /* revoked */
	one_sided(f, TP_CTL_READ_REQ, 6, 10, 1, NULL);
	seg(f, 2, 2, 0, 10);                    /* deregistered region */
	assert_int_equal(feed(f), 0);
	assert_int_equal(acks(f, st, val, 8), 6);
	for (int i = 0; i < 6; i++) {
		assert_int_equal(st[i], 2);  /* items.h: TP_ACK_REFUSED */
		assert_int_equal(val[i], 1); /* items.h: TP_REFUSE_DENIED, for every reason */
	}
}

/* Unknown keys: TP_BAD_KEYS_MAX (8) are refused, the next fails the conn;
 * a revoked export's right key is not a guess. */
static void test_bad_keys_fail_the_conn(void **state)
{
	struct fx *f = *state;

	assert_int_equal(tcpx_p2p_mr_unexport(&f->c, &f->d[7]), 0);
	for (int i = 0; i < 20; i++) {
		one_sided(f, TP_CTL_READ_REQ, 100 + (uint64_t)i, 1, 1, NULL);
		seg(f, 7, 7, 0, 1);
	}
	for (int i = 0; i < 8; i++) {
		one_sided(f, TP_CTL_READ_REQ, (uint64_t)i + 1, 1, 1, NULL);
		seg(f, 9, 10, 0, 1);
	}
	assert_int_equal(feed(f), 0);
	one_sided(f, TP_CTL_READ_REQ, 9, 1, 1, NULL);
	seg(f, 9, 10, 0, 1);
	assert_int_equal(feed(f), TCPX_P2P_EPROTO);
	assert_non_null(strstr(tcpx_p2p_last_error(), "guesses keys"));
}

/* One message naming every one of 1,000 exports many times resolves to one
 * hold per region, and a good one is accepted. */
static void test_many_exports_one_hold_each(void **state)
{
	struct fx *f = *state;
	enum { PER = 4 };

	one_sided(f, TP_CTL_READ_REQ, 1, (uint64_t)NREG * PER * 8, NREG * PER, NULL);
	for (int k = 0; k < PER; k++)
		for (int i = 0; i < NREG; i++)
			seg(f, (uint32_t)i, i, (uint64_t)k * 8, 8);
	assert_int_equal(feed(f), 0);
	for (int i = 0; i < NREG; i++)
		assert_int_equal(f->mr[i].inflight, 1);
	assert_non_null(f->c.dir[TP_SEND].head); /* the in-read, queued */
	assert_int_equal(f->c.dir[TP_SEND].head->nheld, NREG);
	assert_int_equal(f->c.dir[TP_SEND].head->nseg, NREG * PER);
}

/* An item starts on the channel its header names (the conn has 2): a
 * write on channel 1 is numbered from the first chunk number there. */
static void test_item_channel(void **state)
{
	struct fx *f = *state;
	struct tcpx_p2p_xfer *x;

	one_sided(f, TP_CTL_WRITE, 1, 100, 1, NULL);
	f->msg[1] = 1; /* the header's channel */
	seg(f, 0, 0, 0, 100);
	assert_int_equal(feed(f), 0);
	x = f->c.dir[TP_RECV].head;
	assert_non_null(x);
	assert_int_equal(x->chan0, 1);
	assert_int_equal(x->first_seq, 1);
	assert_int_equal(f->c.dir[TP_RECV].next_seq, 2);
	assert_int_equal(f->c.dir[TP_RECV].on[0], 0);
	assert_int_equal(f->c.dir[TP_RECV].on[1], 1);
	assert_int_equal(f->ctl.peer_on[1], 1);
}

/* A header naming a channel past the conn's, a channel on a message that
 * announces no item, or bytes 2-3 set: the conn fails (EPROTO). */
static void test_bad_headers(void **state)
{
	static const unsigned char bad[][3] = { { TP_CTL_SEND, 2, 0 },
						{ TP_CTL_NOTIF, 1, 0 },
						{ TP_CTL_SEND, 0, 1 } };

	for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		struct fx *f;

		assert_int_equal(setup(state), 0);
		f = *state;
		if (bad[k][0] == TP_CTL_NOTIF)
			notif(f, "n");
		else
			send_ann(f, 1, 100);
		f->msg[1] = bad[k][1];
		f->msg[3] = bad[k][2];
		assert_int_equal(feed(f), TCPX_P2P_EPROTO);
		assert_non_null(strstr(tcpx_p2p_last_error(), "malformed header"));
		assert_null(f->c.items->inq);
		teardown(state);
	}
}

/* Queued announcements behind a send nobody matched: items and segments
 * are bounded, and the message that crosses one fails the conn. */
static void test_items_bound(void **state)
{
	struct fx *f = *state;

	send_ann(f, 1, 100); /* no receive posted: everything behind it queues */
	for (int i = 0; i < 63; i++)
		notif(f, "n");
	f->s.cfg.peer_max_notifs = 1000;
	assert_int_equal(feed(f), 0);
	send_ann(f, 2, 100);
	assert_int_equal(feed(f), TCPX_P2P_EPROTO);
	assert_non_null(strstr(tcpx_p2p_last_error(), "peer_max_items"));
}

static void test_segments_bound(void **state)
{
	struct fx *f = *state;

	send_ann(f, 1, 100);
	for (int w = 0; w < 4; w++) {
		one_sided(f, TP_CTL_WRITE, 10 + (uint64_t)w, 1000, 1000, NULL);
		for (int i = 0; i < 1000; i++)
			seg(f, 0, 0, (uint64_t)i, 1);
	}
	assert_int_equal(feed(f), 0); /* 4,000 of 4,096 */
	one_sided(f, TP_CTL_WRITE, 20, 97, 97, NULL);
	for (int i = 0; i < 97; i++)
		seg(f, 0, 0, (uint64_t)i, 1);
	assert_int_equal(feed(f), TCPX_P2P_EPROTO);
	assert_non_null(strstr(tcpx_p2p_last_error(), "peer_max_segments"));
}

/* Notifications: waiting for data or delivered and not polled, together. */
static void test_notifs_bound(void **state)
{
	struct fx *f = *state;
	for (int i = 0; i < 16; i++)
		notif(f, "layer");
	assert_int_equal(feed(f), 0); /* all 16 delivered, none taken */
	assert_int_equal(f->s.notifs != NULL, 1);
	notif(f, "one more");
	assert_int_equal(feed(f), TCPX_P2P_EPROTO);
	assert_non_null(strstr(tcpx_p2p_last_error(), "peer_max_notifs"));
}

/* Answers a peer does not read: the outgoing stream stops at
 * peer_max_ctl_bytes and the conn fails; the application's own posts stop
 * at half of it with EAGAIN. */
static void test_ctl_bytes_bound(void **state)
{
	struct fx *f = *state;
	int rc = 0, i;

	/* Refused reads (outside the export, not guesses): one 32-byte ack each. */
	for (i = 0; i < 200000 && !rc; i++) {
		one_sided(f, TP_CTL_READ_REQ, (uint64_t)i + 1, 1, 1, NULL);
		seg(f, 0, 0, POOL, 1);
		if (i % 50 == 49) /* under peer_max_items queued at once */
			rc = feed(f);
	}
	assert_int_equal(rc, TCPX_P2P_EPROTO);
	assert_non_null(strstr(tcpx_p2p_last_error(), "peer_max_ctl_bytes"));
	assert_true(tp__ctl_out_bytes(&f->c) <= (1u << 20) + 50 * 32);
}

static void test_own_posts_eagain(void **state)
{
	struct fx *f = *state;
	struct tcpx_p2p_xfer *x = tp__xfer_new(TP_OP_SEND, TP_SEND);
	unsigned char *m;

	assert_non_null(x);
	x->c = &f->c;
	/* half the bound, plus */
	assert_int_equal(tp__ctl_msg(&f->c, TP_CTL_NOTIF, (1u << 19) + 8, &m), 0);
	assert_int_equal(tp__items_announce(&f->c, x, NULL, 0, NULL, 0, false), TCPX_P2P_EAGAIN);
	assert_non_null(strstr(tcpx_p2p_last_error(), "drive progress"));
	tp__xfer_free(x);
}

/* The application's own write: its announcement must leave the answers
 * their half.  One over half of the bound is EINVAL; one that would take
 * what waits past half is EAGAIN; neither fails the conn, and an answer
 * owed afterwards still goes out. */
static void test_own_message_sizes(void **state)
{
	struct fx *f = *state;
	enum { BIG = 14000, HALF = 6000 }; /* 40-byte segments: 560 KB and 240 KB */
	unsigned char *w = calloc(BIG, TP_WSEG_BYTES); /* encoded segments */
	struct tcpx_p2p_xfer *x = tp__xfer_new(TP_OP_WRITE, TP_SEND);
	uint32_t st[1];
	uint64_t val[1];

	assert_non_null(w);
	assert_non_null(x);
	x->c = &f->c;
	f->s.cfg.peer_max_segments = BIG; /* the control bytes bound, not this one */
	assert_int_equal(tp__items_announce(&f->c, x, NULL, 0, w, BIG, false), TCPX_P2P_EINVAL);
	assert_non_null(strstr(tcpx_p2p_last_error(), "half"));
	assert_int_equal(tp__items_announce(&f->c, x, NULL, 0, w, HALF, false), 0);
	assert_int_equal(tp__items_announce(&f->c, x, NULL, 0, w, HALF, false), 0);
	assert_int_equal(tp__items_announce(&f->c, x, NULL, 0, w, HALF, false), TCPX_P2P_EAGAIN);
	assert_int_equal(f->c.err, 0);
	/* a refused read (outside the export) is still answered */
	f->ctl.out_off = f->ctl.out_len; /* as if the two writes went out */
	one_sided(f, TP_CTL_READ_REQ, 1, 1, 1, NULL);
	seg(f, 0, 0, POOL, 1);
	assert_int_equal(feed(f), 0);
	assert_int_equal(acks(f, st, val, 1), 1);
	tp__xfer_free(x);
	free(w);
}

/* This side's announcements, byte for byte as the peer parses them: SEND
 * and READ_RESP {id, len} on the item's first channel; WRITE {id, len,
 * nseg, notif_len, segs, notif}; READ_REQ {id, len, nseg, 0, segs} on
 * channel 0.  A response keeps the peer's id; the others take the next. */
static void test_announcements_encoded(void **state)
{
	static const enum tp_op ops[] = { TP_OP_SEND, TP_OP_WRITE, TP_OP_READ, TP_OP_IN_READ };
	static const enum tp_ctl_type types[] = { TP_CTL_SEND, TP_CTL_WRITE, TP_CTL_READ_REQ,
						  TP_CTL_READ_RESP };
	static const char note[] = "layer 7 of 80";
	struct fx *f = *state;
	unsigned char wire[2 * TP_WSEG_BYTES];
	uint64_t id = f->c.next_id;

	tp__items_set_credits(&f->c, 16, 4096); /* as the peer's blob would */
	for (size_t i = 0; i < sizeof(wire); i++)
		wire[i] = (unsigned char)(i * 7 + 1);
	for (int i = 0; i < 4; i++) {
		bool segs = ops[i] == TP_OP_WRITE || ops[i] == TP_OP_READ;
		bool with_note = ops[i] == TP_OP_WRITE;
		struct tcpx_p2p_xfer *x = tp__xfer_new(ops[i], ops[i] == TP_OP_READ ? TP_RECV : TP_SEND);
		size_t at = f->ctl.out_len, body = segs ? 24 + sizeof(wire) : 16;
		const unsigned char *m;

		assert_non_null(x);
		x->c = &f->c;
		x->len = 1000 + (size_t)i;
		if (ops[i] == TP_OP_IN_READ)
			x->id = 1ull << 40; /* the peer's read */
		if (with_note)
			body += sizeof(note);
		assert_int_equal(tp__items_announce(&f->c, x, with_note ? note : NULL,
						    with_note ? sizeof(note) : 0,
						    segs ? wire : NULL, segs ? 2 : 0, false), 0);
		assert_int_equal(f->ctl.out_len - at, TP_CTL_MSG_HDR + body);
		m = f->ctl.out + at;
		assert_int_equal(m[0], types[i]);
		assert_int_equal(m[1], ops[i] == TP_OP_READ ? 0 : x->chan0);
		assert_int_equal(m[2] | m[3], 0);
		assert_int_equal(tp_get32(m + 4), body);
		m += TP_CTL_MSG_HDR;
		assert_int_equal(tp_get64(m), ops[i] == TP_OP_IN_READ ? 1ull << 40 : ++id);
		assert_int_equal(tp_get64(m), x->id);
		assert_int_equal(tp_get64(m + 8), 1000 + i);
		if (segs) {
			assert_int_equal(tp_get32(m + 16), 2);
			assert_int_equal(tp_get32(m + 20), with_note ? sizeof(note) : 0);
			assert_memory_equal(m + 24, wire, sizeof(wire));
			if (with_note)
				assert_memory_equal(m + 24 + sizeof(wire), note, sizeof(note));
		}
		tp__xfer_free(x);
	}
}

/* A control message past the size bound is EINVAL; after this side's
 * CLOSE, an announcement or an answer is ECLOSED (not ENOMEM), each with
 * its reason, and nothing more is queued. */
static void test_messages_refused(void **state)
{
	struct fx *f = *state;
	struct tcpx_p2p_xfer *x = tp__xfer_new(TP_OP_SEND, TP_SEND);
	unsigned char *m;
	size_t queued;

	assert_non_null(x);
	x->c = &f->c;
	assert_int_equal(tp__ctl_msg(&f->c, TP_CTL_NOTIF, TP_CTL_MSG_MAX + 1, &m), TCPX_P2P_EINVAL);
	assert_non_null(strstr(tcpx_p2p_last_error(), "at most"));
	assert_int_equal(tp__ctl_last_msg(&f->c, TP_CTL_CLOSE, 4, &m), 0);
	queued = f->ctl.out_len;
	assert_int_equal(tp__items_announce(&f->c, x, NULL, 0, NULL, 0, false), TCPX_P2P_ECLOSED);
	assert_non_null(strstr(tcpx_p2p_last_error(), "after the connection's close"));
	assert_int_equal(tp__items_send_ack(&f->c, 1, TP_ACK_OK, 0), TCPX_P2P_ECLOSED);
	assert_int_equal(tp__items_notif_msg(&f->c, "late", 4), TCPX_P2P_ECLOSED);
	assert_int_equal(f->ctl.out_len, queued);
	tp__xfer_free(x);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_one_refusal, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_keys_fail_the_conn, setup, teardown),
		cmocka_unit_test_setup_teardown(test_many_exports_one_hold_each, setup, teardown),
		cmocka_unit_test_setup_teardown(test_items_bound, setup, teardown),
		cmocka_unit_test_setup_teardown(test_item_channel, setup, teardown),
		cmocka_unit_test(test_bad_headers),
		cmocka_unit_test_setup_teardown(test_segments_bound, setup, teardown),
		cmocka_unit_test_setup_teardown(test_notifs_bound, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ctl_bytes_bound, setup, teardown),
		cmocka_unit_test_setup_teardown(test_own_posts_eagain, setup, teardown),
		cmocka_unit_test_setup_teardown(test_own_message_sizes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_announcements_encoded, setup, teardown),
		cmocka_unit_test_setup_teardown(test_messages_refused, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
