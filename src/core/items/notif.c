/* Notifications: a peer's, held until every item announced before it has
 * landed, then delivered to the session's queue, where notif_poll takes
 * them; and this side's own.
 *
 * Flow control: a side may send at most the peer's peer_max_notifs
 * notifications (its blob says how many) that the peer has not yet taken
 * or dropped; the peer gives the slots back in CREDIT messages once an
 * eighth of them are free, and notify (or a write with a notification)
 * returns EAGAIN meanwhile.  So an honest sender never crosses the
 * receiver's bound, and the bound fails only a peer that ignores credits.
 * The receiver counts a notification from the message that brings it, so
 * those queued with their announcement count too. */
#include <stdlib.h>
#include <string.h>

#include "core/conn.h"
#include "core/cq.h"
#include "core/ctl.h"
#include "core/items/items.h"
#include "core/pipeline/comm.h"
#include "core/session.h"
#include "core/xfer.h"
#include "util/error.h"

int tp__items_note_arrives(struct tcpx_p2p_conn *c, size_t len)
{
	struct tcpx_p2p_session *s = c->s;
	struct tp_items *r = c->items;
	uint32_t held, units = tp_notif_units(len), max = (uint32_t)s->cfg.peer_max_notifs;
	bool room;

	pthread_mutex_lock(&s->notif_lock);
	held = r->held;
	room = held <= max && units <= max - held;
	if (room)
		r->held += units;
	pthread_mutex_unlock(&s->notif_lock);
	if (!room)
		return tp__error(TCPX_P2P_EPROTO, "the peer sent more than %d KiB of notifications "
				 "this side has not taken (peer_max_notifs; %u held, %zu bytes "
				 "more), ignoring the credits it was given", s->cfg.peer_max_notifs,
				 held, len);
	return 0;
}

/* notif_lock held; freed is atomic so that a pass reads it without the
 * lock (credit_out) */
static void gone_locked(struct tp_items *r, size_t len)
{
	uint32_t units = tp_notif_units(len);

	r->held -= units;
	__atomic_add_fetch(&r->freed, units, __ATOMIC_RELAXED);
}

void tp__items_note_gone(struct tcpx_p2p_conn *c, size_t len)
{
	pthread_mutex_lock(&c->s->notif_lock);
	gone_locked(c->items, len);
	pthread_mutex_unlock(&c->s->notif_lock);
}

/* The conn is in the engine's list already: a pass of another thread (the
 * progress or keepalive thread) may be looking at it. */
void tp__items_set_credits(struct tcpx_p2p_conn *c, uint32_t n, uint32_t max_bytes)
{
	pthread_mutex_lock(&c->lock);
	c->items->credits = c->items->credits_max = n;
	c->items->peer_notif_bytes = max_bytes;
	pthread_mutex_unlock(&c->lock);
}

int tp__items_on_credit(struct tcpx_p2p_conn *c, uint32_t n)
{
	struct tp_items *r = c->items;

	if (!n || n > r->credits_max - r->credits)
		return tp__error(TCPX_P2P_EPROTO, "control channel: the peer gave back %u "
				 "notification credits, with %u of its %u outstanding", n,
				 r->credits_max - r->credits, r->credits_max);
	r->credits += n;
	return 0;
}

/* Batched: one message per eighth of the bound.  The sender waits only
 * while every slot is held, freed here or on its way back; fewer than an
 * eighth freed and unsent leaves it most of its credits. */
int tp__items_credit_out(struct tcpx_p2p_conn *c)
{
	struct tcpx_p2p_session *s = c->s;
	struct tp_items *r = c->items;
	uint32_t batch = (uint32_t)s->cfg.peer_max_notifs / 8, n;
	unsigned char *m;
	int rc;

	if (tp__ctl_closing(c) ||
	    __atomic_load_n(&r->freed, __ATOMIC_RELAXED) < (batch ? batch : 1))
		return 0;
	n = __atomic_exchange_n(&r->freed, 0, __ATOMIC_RELAXED);
	rc = tp__ctl_msg(c, TP_CTL_CREDIT, 4, &m);
	if (rc)
		return rc;
	tp_put32(m, n);
	return 0;
}

int tp__items_add_note(struct tcpx_p2p_conn *c, uint64_t mark, bool of_write,
		       const unsigned char *msg, size_t len)
{
	struct tp_items *r = c->items;
	struct tp_note *n;

	n = malloc(sizeof(*n) + len);
	if (!n)
		return tp__error(TCPX_P2P_ENOMEM, "notification: out of memory");
	n->mark = mark;
	n->of_write = of_write;
	n->len = len;
	n->next = NULL;
	memcpy(n->msg, msg, len);
	if (r->notes_tail)
		r->notes_tail->next = n;
	else
		r->notes = n;
	r->notes_tail = n;
	return 0;
}

/* The notification that came with a failed in-write is never delivered.
 * It is found by the write's end in the chunk stream, which no other item
 * shares (the id is the peer's to choose). */
void tp__items_drop_note(struct tcpx_p2p_conn *c, uint64_t mark)
{
	struct tp_items *r = c->items;
	struct tp_note *prev = NULL, *n;

	for (n = r->notes; n && !(n->of_write && n->mark == mark); n = n->next)
		prev = n;
	if (!n)
		return;
	if (prev)
		prev->next = n->next;
	else
		r->notes = n->next;
	if (r->notes_tail == n)
		r->notes_tail = prev;
	tp__items_note_gone(c, n->len);
	free(n);
}

void tp__items_drop_notifs(struct tcpx_p2p_conn *c)
{
	struct tcpx_p2p_session *s = c->s;
	struct tp_notif_node **pp, *n;

	pthread_mutex_lock(&s->notif_lock);
	for (pp = &s->notifs; (n = *pp);) {
		if (n->c == c) {
			*pp = n->next;
			free(n);
		} else {
			pp = &n->next;
		}
	}
	s->notifs_tail = NULL;
	for (n = s->notifs; n; n = n->next)
		s->notifs_tail = n;
	pthread_mutex_unlock(&s->notif_lock);
}


/* Append a notification of c (len 0: c failed) to the session's queue. */
static int deliver(struct tcpx_p2p_conn *c, const unsigned char *msg, size_t len)
{
	struct tcpx_p2p_session *s = c->s;
	struct tp_notif_node *d = malloc(sizeof(*d) + len);

	if (!d)
		return tp__error(TCPX_P2P_ENOMEM, "notification: out of memory");
	d->c = c;
	d->len = len;
	d->next = NULL;
	if (len)
		memcpy(d->msg, msg, len);
	pthread_mutex_lock(&s->notif_lock);
	if (s->notifs_tail)
		s->notifs_tail->next = d;
	else
		s->notifs = d;
	s->notifs_tail = d;
	pthread_mutex_unlock(&s->notif_lock);
	tp__cq_wake(s);
	return 0;
}

int tp__items_deliver(struct tcpx_p2p_conn *c, const unsigned char *msg, size_t len)
{
	int rc = deliver(c, msg, len);

	if (!rc)
		c->stats.notifs_in++;
	return rc;
}

void tp__items_tell_failed(struct tcpx_p2p_conn *c)
{
	if (!c->items || c->items->failed_told)
		return;
	/* Without memory the failure still shows in every call on c. */
	c->items->failed_told = !deliver(c, NULL, 0);
}

int tp__items_notes_release(struct tcpx_p2p_conn *c, bool *moved)
{
	struct tp_items *r = c->items;
	struct tcpx_p2p_xfer *h;
	struct tp_note *n;
	int rc;

	/* Every receive item below the mark has landed when the oldest still
	 * in flight starts at or after it.  Deliver only once the answers this
	 * side owes (a write's) were handed to the plugin: the application may
	 * stop driving when the notification arrives. */
	h = c->dir[TP_RECV].head;
	while ((n = r->notes) && (!h || h->first_seq >= n->mark) && !tp__ctl_owes(c)) {
		rc = deliver(c, n->msg, n->len);
		if (rc)
			return rc;
		c->stats.notifs_in++;
		r->notes = n->next;
		if (!r->notes)
			r->notes_tail = NULL;
		free(n);
		*moved = true;
	}
	return 0;
}

bool tp__items_notes_close(struct tcpx_p2p_conn *c)
{
	struct tp_items *r = c->items;
	struct tcpx_p2p_xfer *h = c->dir[TP_RECV].head;
	struct tp_note *n;

	while ((n = r->notes) && (!h || h->first_seq >= n->mark)) {
		if (tp__items_deliver(c, n->msg, n->len))
			return false; /* out of memory: the rest are dropped */
		r->notes = n->next;
		if (!r->notes)
			r->notes_tail = NULL;
		free(n);
	}
	return !r->notes && !h;
}

int tp__items_notif_room(struct tcpx_p2p_conn *c, const char *what, size_t len)
{
	struct tp_items *r = c->items;
	uint32_t units = tp_notif_units(len);

	if (len > r->peer_notif_bytes)
		return tp__error(TCPX_P2P_EINVAL, "%s: a notification of %zu bytes; the peer takes "
				 "at most %u (its notif_max_bytes)", what, len, r->peer_notif_bytes);
#if TP_TEST_HOOKS
	if (c->s->test_ignore_credits)
		return 0;
#endif
	if (units > r->credits_max)
		return tp__error(TCPX_P2P_EINVAL, "%s: a notification of %zu bytes counts %u KiB, "
				 "more than the peer ever holds (its peer_max_notifs %u)", what,
				 len, units, r->credits_max);
	if (units <= r->credits)
		return 0;
	return tp__error(TCPX_P2P_EAGAIN, "%s: the peer holds notifications of this connection "
			 "it has not taken (%u of its peer_max_notifs %u KiB in use, this one "
			 "needs %u): post again once it has polled them", what,
			 r->credits_max - r->credits, r->credits_max, units);
}

/* Spend what a notification of len bytes counts (a test build that
 * ignores credits may have fewer). */
void tp__items_notif_spend(struct tcpx_p2p_conn *c, size_t len)
{
	uint32_t units = tp_notif_units(len);

	c->items->credits -= units < c->items->credits ? units : c->items->credits;
	c->stats.notifs_out++;
}

void tp__items_notif_refund(struct tcpx_p2p_conn *c, size_t len)
{
	struct tp_items *r = c->items;
	uint32_t units = tp_notif_units(len);

	r->credits = units < r->credits_max - r->credits ? r->credits + units : r->credits_max;
	c->stats.notifs_out--;
}

/* The head d of the session's queue is taken (notif_lock held). */
static void take_locked(tcpx_p2p_session *s, struct tp_notif_node *d)
{
	s->notifs = d->next;
	if (!s->notifs)
		s->notifs_tail = NULL;
	if (d->len)
		gone_locked(d->c->items, d->len);
	free(d);
}

size_t tp__items_notif_take(tcpx_p2p_session *s, tcpx_p2p_notif_buf *nb, int *got)
{
	struct tp_notif_node *d;
	size_t need = 0;

	*got = 0;
	pthread_mutex_lock(&s->notif_lock);
	d = s->notifs;
	if (d && d->len > nb->cap) {
		need = d->len;
	} else if (d) {
		nb->conn = tp__conn_handle(d->c);
		nb->len = d->len;
		if (d->len)
			memcpy(nb->buf, d->msg, d->len);
		take_locked(s, d);
		*got = 1;
	}
	pthread_mutex_unlock(&s->notif_lock);
	return need;
}

/* Up to max delivered notifications into out, oldest first per
 * connection.  One longer than the struct holds waits for notif_take, and
 * everything of its connection behind it (their order is the peer's);
 * the other connections' go on past it.  *n: how many were taken; returns
 * how many connections wait so, among those looked at. */
int tp__items_poll_queue(tcpx_p2p_session *s, tcpx_p2p_notif *out, int max, int *n)
{
	struct tp_notif_node **pp, *d, *prev = NULL;
	uint64_t stamp;
	int k = 0, waiting = 0;

	pthread_mutex_lock(&s->notif_lock);
	stamp = ++s->notif_polls;
	for (pp = &s->notifs; k < max && (d = *pp);) {
		struct tp_items *r = d->c->items;

		if (r->poll_skip == stamp || d->len > TCPX_P2P_NOTIF_MAX) {
			waiting += r->poll_skip != stamp;
			r->poll_skip = stamp;
			prev = d;
			pp = &d->next;
			continue;
		}
		out[k].conn = tp__conn_handle(d->c);
		out[k].len = d->len;
		memcpy(out[k].msg, d->msg, d->len);
		k++;
		*pp = d->next;
		if (s->notifs_tail == d)
			s->notifs_tail = prev;
		if (d->len)
			gone_locked(r, d->len);
		free(d);
	}
	pthread_mutex_unlock(&s->notif_lock);
	*n = k;
	return waiting;
}
