/* The close handshake (close.h): each side's last control message is its
 * CLOSE, with its count of data requests per comm; a side answers the
 * peer's with its own, and both then post what completes every request
 * of the other (drain.c). */
#include <stdio.h>

#include "core/close/close.h"
#include "core/conn.h"
#include "core/ctl.h"
#include "core/pass.h"
#include "util/error.h"

int tp__close_queue(struct tcpx_p2p_conn *c)
{
	unsigned char *b;
	int rc;

	if (tp__ctl_closing(c))
		return 0;
	rc = tp__ctl_last_msg(c, TP_CTL_CLOSE, 4 + 8 * (size_t)c->nchan, &b);
	if (rc)
		return rc;
	/* No chunk is posted after this: the counts below are final. */
	tp__close_freeze(c);
	tp_put32(b, (uint32_t)c->nchan);
	for (int i = 0; i < c->nchan; i++) {
		tp_put32(b + 4 + 8 * i, c->send[i].issued);
		tp_put32(b + 8 + 8 * i, c->recv[i].issued);
	}
	return 0;
}

void tp__close_tell(struct tcpx_p2p_conn *c)
{
	bool moved = false;

	if (!c->err || tp__ctl_closing(c) || !tp__ctl_can_send(c))
		return;
	if (tp__close_queue(c))
		return; /* out of memory: the peer learns by its own checks */
	c->closing.told = true;
	(void)tp__ctl_push(c, &moved);
}

/* The peer's CLOSE arrived: its counts are checked and taken (drain.c); a
 * conn the caller still holds fails with ECLOSED; ours answers it. */
static int answer(struct tcpx_p2p_conn *c)
{
	int rc;

	c->closing.answered = true;
	rc = tp__close_counts(c);
	if (rc)
		return rc;
	if (!c->destroyed && !c->err)
		tp__conn_peer_gone(c);
	return tp__close_queue(c);
}

int tp__close_step(struct tcpx_p2p_conn *c, bool *moved, bool *pending)
{
	struct tp_ctl *t = c->ctl;

	if (!t->close_rc) {
		t->close_rc = tp__ctl_progress(c, moved, pending);
		if (!t->close_rc && tp__ctl_peer_closed(c) && !c->closing.answered)
			t->close_rc = answer(c);
		if (t->close_rc)
			snprintf(t->close_why, sizeof(t->close_why), "%s", tcpx_p2p_last_error());
	}
	return t->close_rc;
}

int tp__close_in_pass(struct tcpx_p2p_conn *c, struct tp_pass_result *st)
{
	int rc;

	if (!c->err) {
		if (!tp__ctl_peer_closed(c) || c->closing.answered)
			return 0;
		rc = answer(c);
		if (rc)
			return tp__conn_fail(c, rc);
		if (!c->err)
			return 0;
	}
	/* A failed conn: a closing one goes on with its handshake and drains
	 * its data channels; no other stage runs for the transfers it failed. */
	if (!tp__ctl_closing(c))
		return c->err;
	if (c->closing.told) {
		/* Only our CLOSE, until the plugin has it; nothing is received. */
		if (!tp__ctl_close_sent(c))
			(void)tp__ctl_push(c, &st->moved);
		return c->err;
	}
	(void)tp__close_step(c, &st->moved, &st->pending);
	(void)tp__close_drain(c, &st->moved);
	return c->err;
}
