/* The control channel's byte streams (ctl.h): messages appended to the
 * outgoing stream, and the incoming one cut into messages, each checked
 * for size and queued for the pass, which hands it to the item protocol
 * (pass.c -> inbound.c); the peer's CLOSE is kept for the close (close/),
 * its HEARTBEAT counted.  Frames are ctl.c's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/conn.h"
#include "core/ctl.h"
#include "core/pipeline/chunk.h"
#include "core/session.h"
#include "util/error.h"
#include "util/time.h"

static int grow(unsigned char **buf, size_t *cap, size_t need)
{
	size_t n = *cap ? *cap : 4096;
	unsigned char *p;

	if (need <= *cap)
		return 0;
	while (n < need)
		n *= 2;
	p = realloc(*buf, n);
	if (!p)
		return tp__error(TCPX_P2P_ENOMEM, "control channel: out of memory");
	*buf = p;
	*cap = n;
	return 0;
}

int tp__ctl_msg(struct tcpx_p2p_conn *c, enum tp_ctl_type type, size_t body_len,
		unsigned char **body)
{
	return tp__ctl_item_msg(c, type, 0, body_len, body);
}

int tp__ctl_item_msg(struct tcpx_p2p_conn *c, enum tp_ctl_type type, unsigned chan,
		     size_t body_len, unsigned char **body)
{
	struct tp_ctl *t = c->ctl;
	unsigned char *m;

	if (t->close_queued)
		return tp__error(TCPX_P2P_ECLOSED, "control message after the connection's close");
	if (body_len > TP_CTL_MSG_MAX)
		return tp__error(TCPX_P2P_EINVAL, "control message of %zu bytes (at most %u)",
				 body_len, TP_CTL_MSG_MAX);
	/* Sent bytes are dropped from the front once they are as many as the
	 * unsent ones: a stream that never drains still stays within twice
	 * what waits in it. */
	if (t->out_off == t->out_len) {
		t->out_off = t->out_len = 0;
	} else if (t->out_off >= t->out_len - t->out_off) {
		memmove(t->out, t->out + t->out_off, t->out_len - t->out_off);
		t->out_len -= t->out_off;
		t->out_off = 0;
	}
	if (grow(&t->out, &t->out_cap, t->out_len + TP_CTL_MSG_HDR + body_len))
		return TCPX_P2P_ENOMEM; /* recorded */
	m = t->out + t->out_len;
	m[0] = (unsigned char)type;
	m[1] = (unsigned char)chan;
	m[2] = m[3] = 0;
	tp_put32(m + 4, (uint32_t)body_len);
	t->out_len += TP_CTL_MSG_HDR + body_len;
	*body = m + TP_CTL_MSG_HDR;
	return 0;
}

/* The peer's CLOSE, in the frame being parsed (number rx.win.retired):
 * it must end the stream, and the peer sends TP_CTL_SLOTS - 1 empty
 * frames after it (tx_post), which is never fewer than the receives this
 * side has posted past it (at most TP_CTL_SLOTS in flight).  Its body
 * gives the peer's count of requests per data comm, kept on the comms
 * (peer_count) for the close to check and answer (close/drain.c). */
static int on_close(struct tcpx_p2p_conn *c, const unsigned char *body, uint32_t len)
{
	struct tp_ctl *t = c->ctl;

	if (len != 4 + 8 * (uint32_t)c->nchan || tp_get32(body) != (uint32_t)c->nchan)
		return tp__error(TCPX_P2P_EPROTO, "control channel: peer's close of %u bytes "
				 "(%d channels)", len, c->nchan);
	if (t->in_len - t->in_parsed != TP_CTL_MSG_HDR + len)
		return tp__error(TCPX_P2P_EPROTO, "control channel: peer sent bytes after its "
				 "close");
	if (t->peer_closed)
		return tp__error(TCPX_P2P_EPROTO, "control channel: peer closed twice");
	for (int i = 0; i < c->nchan; i++) {
		/* Its sends on channel i meet this side's receives, and back. */
		c->recv[i].peer_count = tp_get32(body + 4 + 8 * i);
		c->send[i].peer_count = tp_get32(body + 8 + 8 * i);
	}
	t->peer_closed = true;
	t->rx_end = t->rx.win.retired + TP_CTL_SLOTS;
	return 0;
}

/* Messages without work a peer may send: a burst of TP_IDLE_BURST (ctl.h),
 * then one per millisecond.  An honest peer sends at most one heartbeat
 * per heartbeat_ms of its own (at least 1 ms) and empty frames only after
 * its CLOSE (not counted), so the bound is a thousand times the default
 * heartbeat rate; a peer past it is failed (EPROTO).  A backlog that built
 * up while this side did not drive arrives in a burst, but the bucket
 * refilled meanwhile: it is refilled by the clock, not by passes (a token
 * bucket; the clock is read per message, which honest peers send rarely).
 * The bucket is the conn's (c->alive, live.h). */
#define TP_IDLE_NS TP_NS_PER_MS

int tp__ctl_idle(struct tcpx_p2p_conn *c, const char *what)
{
	struct tp_live *l = &c->alive;
	int64_t now = tp__now_ns(), n = (now - l->idle_ns) / TP_IDLE_NS;

	if (n >= (int64_t)(TP_IDLE_BURST - l->idle_tokens)) {
		l->idle_tokens = TP_IDLE_BURST;
		l->idle_ns = now;
	} else if (n > 0) {
		l->idle_tokens += (uint32_t)n;
		l->idle_ns += n * TP_IDLE_NS;
	}
	if (!l->idle_tokens)
		return tp__error(TCPX_P2P_EPROTO, "control channel: the peer sent %s faster "
				 "than this side takes messages that carry no work (%u at once, "
				 "then one per ms: heartbeats and empty frames)", what,
				 TP_IDLE_BURST);
	l->idle_tokens--;
	return 0;
}

/* The peer's HEARTBEAT: recorded here (counted, rate-bounded), never
 * handed on; its arrival is what keeps the conn alive (live.c). */
static int on_heartbeat(struct tcpx_p2p_conn *c, uint32_t len)
{
	int rc;

	if (len)
		return tp__error(TCPX_P2P_EPROTO, "control channel: a heartbeat of %u bytes "
				 "(it has none)", len);
	rc = tp__ctl_idle(c, "heartbeats");
	if (!rc)
		c->stats.hb_recv++;
	return rc;
}

static bool is_item(unsigned type)
{
	return type == TP_CTL_SEND || type == TP_CTL_WRITE || type == TP_CTL_READ_RESP;
}

/* The header's fixed bytes: an item's first channel below the channel
 * count, 0 everywhere else. */
static int header_ok(const struct tcpx_p2p_conn *c, const unsigned char *m)
{
	if (!m[2] && !m[3] && (is_item(m[0]) ? m[1] < c->nchan : !m[1]))
		return 0;
	return tp__error(TCPX_P2P_EPROTO, "control channel: malformed header (type %u, channel "
			 "%u of %d, bytes 2-3 %02x%02x)", m[0], m[1], c->nchan, m[2], m[3]);
}

/* Chunks of an item the peer announces, counted whether or not the
 * message is then parsed (after this side's CLOSE it is dropped): the
 * peer may have posted its sends all the same. */
static void count_item(struct tcpx_p2p_conn *c, const unsigned char *m, uint32_t body)
{
	struct tp_ctl *t = c->ctl;
	unsigned n = (unsigned)c->nchan;
	uint64_t len, first, count;

	if (!is_item(m[0]) || body < 16)
		return;
	len = tp_get64(m + TP_CTL_MSG_HDR + 8);
	if (len > TP_CTL_LEN_MAX) /* refused as malformed, or dropped */
		return;
	first = tp_chunk_first(t->peer_seq, m[1], n);
	count = tp_chunk_count((size_t)len, tp_chunk_size((size_t)len, n, c->s->cfg.chunk_bytes,
							 (unsigned)c->s->cfg.chunks_per_channel));
	t->peer_seq = first + count;
	for (unsigned i = 0; i < n; i++)
		t->peer_on[i] += (uint32_t)tp_chunk_on(first, count, n, i);
}

/* Parse every complete message of the incoming stream, up to a failure.
 * The peer's CLOSE and HEARTBEAT are taken here; the others wait for
 * tp__ctl_next, or are dropped once this side's CLOSE is queued. */
static int parse(struct tcpx_p2p_conn *c)
{
	struct tp_ctl *t = c->ctl;
	uint32_t body;
	int rc;

	while (t->in_len - t->in_parsed >= TP_CTL_MSG_HDR) {
		const unsigned char *m = t->in + t->in_parsed;

		body = tp_get32(m + 4);
		if (body > TP_CTL_MSG_MAX)
			return tp__error(TCPX_P2P_EPROTO, "control channel: peer sent a %u-byte "
					 "message (at most %u)", body, TP_CTL_MSG_MAX);
		if (t->in_len - t->in_parsed < TP_CTL_MSG_HDR + (size_t)body)
			break;
		rc = header_ok(c, m);
		if (rc)
			return rc;
		count_item(c, m, body);
		if (m[0] == TP_CTL_CLOSE)
			rc = on_close(c, m + TP_CTL_MSG_HDR, body);
		else if (m[0] == TP_CTL_HEARTBEAT && !t->close_queued)
			rc = on_heartbeat(c, body);
		if (rc)
			return rc;
		t->in_parsed += TP_CTL_MSG_HDR + body;
	}
	if (t->close_queued) /* closing: what the peer still says is moot */
		t->in_off = t->in_parsed;
	return 0;
}

int tp__ctl_feed(struct tcpx_p2p_conn *c, const void *bytes, size_t n)
{
	struct tp_ctl *t = c->ctl;
	int rc;

	if (!n) /* an empty frame (a peer may send one) */
		return 0;
	/* The bytes taken leave the front first: the buffer holds what waits. */
	if (t->in_off == t->in_len) {
		t->in_off = t->in_parsed = t->in_len = 0;
	} else if (t->in_off > t->in_cap / 2) {
		memmove(t->in, t->in + t->in_off, t->in_len - t->in_off);
		t->in_len -= t->in_off;
		t->in_parsed -= t->in_off;
		t->in_off = 0;
	}
	rc = grow(&t->in, &t->in_cap, t->in_len + n);
	if (rc)
		return rc;
	memcpy(t->in + t->in_len, bytes, n);
	t->in_len += n;
	return parse(c);
}

bool tp__ctl_next(struct tcpx_p2p_conn *c, struct tp_ctl_msg *m)
{
	struct tp_ctl *t = c->ctl;

	while (t->in_off < t->in_parsed) {
		const unsigned char *h = t->in + t->in_off;

		m->type = h[0];
		m->chan = h[1];
		m->len = tp_get32(h + 4);
		m->body = h + TP_CTL_MSG_HDR;
		t->in_off += TP_CTL_MSG_HDR + m->len;
		/* taken by parse, or moot */
		if (m->type != TP_CTL_CLOSE && m->type != TP_CTL_HEARTBEAT && !t->close_queued)
			return true;
	}
	return false;
}

bool tp__ctl_taken(const struct tcpx_p2p_conn *c)
{
	return c->ctl->in_off == c->ctl->in_parsed;
}

size_t tp__ctl_out_bytes(const struct tcpx_p2p_conn *c)
{
	return c->ctl->out_len - c->ctl->out_off;
}

bool tp__ctl_queued(const struct tcpx_p2p_conn *c)
{
	return c->ctl->out_off != c->ctl->out_len;
}

int tp__ctl_last_msg(struct tcpx_p2p_conn *c, enum tp_ctl_type type, size_t body_len,
		     unsigned char **body)
{
	int rc = tp__ctl_msg(c, type, body_len, body);

	if (!rc)
		c->ctl->close_queued = true;
	return rc;
}

bool tp__ctl_closing(const struct tcpx_p2p_conn *c)
{
	return c->ctl->close_queued;
}

bool tp__ctl_peer_closed(const struct tcpx_p2p_conn *c)
{
	return c->ctl->peer_closed;
}
