/* Notifications' public calls (api.h: no lock held on entry): notify
 * queues one on its conn and makes a pass; notif_poll and notif_take drive
 * the engine and take from the session's queue (items/notif.c). */
#include "core/api/api.h"
#include "core/conn.h"
#include "core/engine.h"
#include "core/items/items.h"
#include "core/pass.h"
#include "core/session.h"
#include "util/error.h"
#include "util/symver.h"

/* A standalone notification: a NOTIF message, one credit spent. */
int tcpx_p2p_notify(tcpx_p2p_conn *c, const void *msg, size_t len)
{
	int rc;

	if (!c || !msg || !len || len > TCPX_P2P_NOTIF_LIMIT)
		return tp__error(TCPX_P2P_EINVAL, "notify: NULL argument or %zu bytes (1..%d)", len,
				 TCPX_P2P_NOTIF_LIMIT);
	rc = tp__redial_use(&c, "notify");
	if (rc)
		return rc;
	pthread_mutex_lock(&c->lock);
	if (c->err)
		rc = tp__error(c->err, "notify: the connection failed earlier: %s", c->why);
	else if (!(rc = tp__items_notify(c, msg, len))) {
		tp__post_pass_unlock(c);
		return 0;
	}
	pthread_mutex_unlock(&c->lock);
	return rc;
}

int tcpx_p2p_notif_take(tcpx_p2p_session *s, tcpx_p2p_notif_buf *nb, int *got)
{
	struct tp_pass_result st;
	size_t need;

	if (!s || !nb || !got || nb->struct_size < sizeof(*nb) || (nb->cap && !nb->buf))
		return tp__error(TCPX_P2P_EINVAL, "notif_take: NULL argument, struct_size %zu "
				 "(want %zu) or a NULL buf", nb ? nb->struct_size : 0, sizeof(*nb));
	if (!tp__engine_threaded(s))
		tp__engine_pass(s, NULL, &st);
	need = tp__items_notif_take(s, nb, got);
	if (need) {
		nb->len = need;
		return tp__error(TCPX_P2P_EINVAL, "notif_take: the oldest notification has %zu "
				 "bytes, the buffer %zu (len says how many; nothing was taken)",
				 need, nb->cap);
	}
	if (*got)
		tp__engine_kick(s);
	return 0;
}

static int notif_poll(tcpx_p2p_session *s, tcpx_p2p_notif *out, int max, int *n)
{
	struct tp_pass_result st;
	int waiting;

	if (!s || !n || max < 0 || (max && !out))
		return tp__error(TCPX_P2P_EINVAL, "notif_poll: NULL argument or max %d", max);
	if (!tp__engine_threaded(s))
		tp__engine_pass(s, NULL, &st);
	waiting = tp__items_poll_queue(s, out, max, n);
	/* The freed slots go back in the next pass: a progress thread that
	 * sleeps for want of transfers has credits to send. */
	if (*n)
		tp__engine_kick(s);
	return waiting;
}

/* notif_poll has one version per meaning of its return value: from 0.10
 * it says how many connections have a notification waiting for
 * notif_take; a binary built against 0.3 to 0.8 tests it for 0 and gets 0
 * (a caller that cannot know notif_take gets no long notification by
 * default: config.c). */
TCPX_P2P_API int tp__notif_poll_v010(tcpx_p2p_session *s, tcpx_p2p_notif *out, int max, int *n)
{
	return notif_poll(s, out, max, n);
}
TP_SYMVER(tp__notif_poll_v010, "tcpx_p2p_notif_poll@@TCPX_P2P_0.10");

TCPX_P2P_API int tp__notif_poll_v03(tcpx_p2p_session *s, tcpx_p2p_notif *out, int max, int *n)
{
	int rc = notif_poll(s, out, max, n);

	return rc < 0 ? rc : 0;
}
TP_SYMVER(tp__notif_poll_v03, "tcpx_p2p_notif_poll@TCPX_P2P_0.3");
