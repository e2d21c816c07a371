/* Connections: nchan channels, each a plugin send comm and recv comm. */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"
#include "core/ctl.h"
#include "util/error.h"
#include "util/log.h"
#include "util/sock.h"

/* A frame whose first byte arrived is complete within this. */
#define TP_CTRL_FRAME_MS 5000

static void init_comm(struct tp_comm *cm, void *comm, enum tp_dir dir, int window)
{
	memset(cm, 0, sizeof(*cm));
	cm->comm = comm;
	cm->dir = dir;
	cm->win.limit = (uint32_t)window;
}

/* TCPX's data sockets are steered into its device bounce buffer: the
 * kernel answers a plain recv() on them with EFAULT, so the plugin may be
 * handed device memory only, even for bytes bound for host memory.  Such
 * receives post into this landing buffer (one chunk of device memory; the
 * plugin writes nothing there) and are unpacked from the bounce pages into
 * their host destination. */
static int land_create(struct tcpx_p2p_conn *c)
{
	size_t bytes = (c->s->cfg.chunk_bytes + 4095) & ~(size_t)4095;
	bool dev = false;

	for (int i = 0; i < c->nchan; i++)
		dev |= c->recv[i].bounce_on_device;
	return dev ? tp__land_create(c->s, bytes, &c->land, &c->landmr) : 0;
}

static void land_destroy(struct tcpx_p2p_conn *c)
{
	tp__land_destroy(c->land, c->landmr);
	c->landmr = NULL;
	c->land = NULL;
}

int tp__conn_create(struct tcpx_p2p_session *s, int nchan, void **send_comms,
		    void **recv_comms, const ncclNetDeviceHandle_v7_t *devh,
		    struct tcpx_p2p_conn **out)
{
	struct tcpx_p2p_conn *c;
	int i, rc;

	c = calloc(1, sizeof(*c));
	if (!c)
		return tp__error(TCPX_P2P_ENOMEM, "conn: out of memory");
	c->send = calloc((size_t)nchan, sizeof(*c->send));
	c->recv = calloc((size_t)nchan, sizeof(*c->recv));
	if (!c->send || !c->recv) {
		rc = tp__error(TCPX_P2P_ENOMEM, "conn: out of memory");
		goto free_conn;
	}
	if (pthread_mutex_init(&c->lock, NULL)) {
		rc = tp__error(TCPX_P2P_ENOMEM, "conn: mutex init failed");
		goto free_conn;
	}
	if (pthread_mutex_init(&c->rdv_lock, NULL)) {
		rc = tp__error(TCPX_P2P_ENOMEM, "conn: mutex init failed");
		goto destroy_lock;
	}
	c->s = s;
	c->nchan = nchan - 1; /* the last channel is the control channel */
	c->rdv_fd = -1;
	rc = tp__rma_create(c);
	if (!rc)
		rc = tp__ctl_create(c, send_comms[c->nchan], recv_comms[c->nchan], &devh[c->nchan]);
	if (rc)
		goto free_ctl;
	for (i = 0; i < c->nchan; i++) {
		init_comm(&c->send[i], send_comms[i], TP_SEND, s->cfg.send_window);
		init_comm(&c->recv[i], recv_comms[i], TP_RECV, s->cfg.recv_window);
		c->send[i].next_seq = (uint64_t)i;
		c->recv[i].next_seq = (uint64_t)i;
		c->recv[i].devh = devh[i];
		rc = tp__unpack_prepare(s, &c->recv[i]);
		if (rc)
			goto free_ctl;
	}
	rc = land_create(c);
	if (rc)
		goto free_ctl;
	tp__live_init(c);
	pthread_mutex_lock(&s->lock);
	s->nconns++;
	pthread_mutex_unlock(&s->lock);
	tp__engine_add(s, c);
	*out = c;
	return 0;

free_ctl:
	land_destroy(c);
	tp__ctl_destroy(c);
	tp__rma_destroy(c);
	pthread_mutex_destroy(&c->rdv_lock);
destroy_lock:
	pthread_mutex_destroy(&c->lock);
free_conn:
	free(c->recv);
	free(c->send);
	free(c);
	return rc;
}

/* Every pending xfer completes with err.  They stay listed, and keep their
 * regions busy, until conn_destroy has closed the comms: until then the
 * plugin (or a queued unpack) may still write into their buffers. */
static void fail_one(struct tcpx_p2p_conn *c, struct tcpx_p2p_xfer *x, int err)
{
	if (x->op >= TP_OP_IN_WRITE || x->done)
		return;
	c->completed++;
	x->err = err;
	x->conn_failed = true;
	tp__xfer_mark_done(c, x);
}

static void fail_pending(struct tcpx_p2p_conn *c, int err)
{
	struct tcpx_p2p_xfer *x;
	int d;

	c->err = err;
	for (d = 0; d < 2; d++)
		for (x = c->dir[d].head; x; x = x->dlink.next)
			fail_one(c, x, err);
	/* Receives not matched yet and transfers waiting for an answer; like
	 * the others they keep their regions until conn_destroy. */
	for (x = c->unmatched.head; x; x = x->wlink.next)
		fail_one(c, x, err);
	for (x = c->answers.head; x; x = x->wlink.next)
		fail_one(c, x, err);
	while ((x = c->settling.head)) {
		tp__xlist_remove(&c->settling, x);
		c->completed++;
		tp__xfer_mark_done(c, x);
	}
	tp__rma_fail(c);
}

int tp__conn_fail(struct tcpx_p2p_conn *c, int err)
{
	if (c->err)
		return c->err;
	snprintf(c->why, sizeof(c->why), "%s", tcpx_p2p_last_error());
	TP_WARN("conn", "connection to %s failed: %s (%s)", c->peer[0] ? c->peer : "peer",
		tcpx_p2p_strerror(err), c->why);
	fail_pending(c, err);
	/* A target that only polls notifications hears of it there too. */
	tp__rma_tell_failed(c);
	return err;
}

int tcpx_p2p_progress(tcpx_p2p_conn *c)
{
	struct tp_progress st;
	int rc;

	if (!c)
		return tp__error(TCPX_P2P_EINVAL, "progress: NULL conn");
	tp__engine_pass(c->s, c, &st);
	pthread_mutex_lock(&c->lock);
	rc = c->err;
	if (rc)
		rc = tp__error(rc, "progress: the connection failed: %s",
			       c->why[0] ? c->why : tcpx_p2p_strerror(rc));
	pthread_mutex_unlock(&c->lock);
	return rc;
}

/* A frame cut short leaves the control stream unreadable: close it. */
static int ctrl_broken(struct tcpx_p2p_conn *c, int rc)
{
	tp__sock_close(c->rdv_fd);
	c->rdv_fd = -1;
	c->rdv_dead = true;
	return rc;
}

/* Barrier n carries n: a barrier whose wait timed out can be called again
 * and still pairs with the peer's n-th (its frame went out only once). */
static int barrier(struct tcpx_p2p_conn *c, int timeout_ms)
{
	struct pollfd pfd = { .fd = c->rdv_fd, .events = POLLIN };
	uint32_t seq = htonl(c->barriers), got = 0, len = 0;
	int rc;

	if (!c->barrier_sent) {
		rc = tp__rdv_frame_send(c->rdv_fd, TP_RDV_FRAME_BARRIER, &seq, sizeof(seq),
					timeout_ms);
		if (rc)
			return ctrl_broken(c, rc);
		c->barrier_sent = true;
	}
	/* Wait for the peer's frame without consuming anything, so that a
	 * timeout here loses nothing. */
	rc = poll(&pfd, 1, timeout_ms);
	if (rc == 0)
		return tp__error(TCPX_P2P_ETIMEDOUT, "conn_barrier: peer did not arrive in %d ms",
				 timeout_ms);
	if (rc < 0)
		return tp__error(TCPX_P2P_ENET, "conn_barrier: poll: %s", strerror(errno));
	rc = tp__rdv_frame_recv(c->rdv_fd, TP_RDV_FRAME_BARRIER, &got, sizeof(got), &len,
			    TP_CTRL_FRAME_MS);
	if (!rc && (len != sizeof(got) || ntohl(got) != c->barriers))
		rc = tp__error(TCPX_P2P_EPROTO, "conn_barrier: peer is at barrier %u, we at %u",
			       len == sizeof(got) ? ntohl(got) : 0, c->barriers);
	if (rc)
		return ctrl_broken(c, rc);
	c->barrier_sent = false;
	c->barriers++;
	return 0;
}

int tcpx_p2p_conn_barrier(tcpx_p2p_conn *c, int timeout_ms)
{
	int rc;

	if (!c)
		return tp__error(TCPX_P2P_EINVAL, "conn_barrier: NULL conn");
	timeout_ms = tp__session_timeout(c->s, timeout_ms);
	pthread_mutex_lock(&c->rdv_lock);
	if (c->rdv_dead)
		rc = tp__error(TCPX_P2P_ECLOSED,
			       "conn_barrier: the rendezvous socket failed earlier");
	else if (c->rdv_fd < 0)
		rc = tp__error(TCPX_P2P_ENOTSUP,
			       "conn_barrier: connection was made by blob exchange");
	else
		rc = barrier(c, timeout_ms);
	pthread_mutex_unlock(&c->rdv_lock);
	return rc;
}

/* After the comms are closed nothing writes into the buffers of the
 * xfers that failed with the conn: free those released, detach the rest
 * (their release frees them), and let go of their regions. */
static void drop_xfer(struct tcpx_p2p_conn *c, struct tcpx_p2p_xfer *x)
{
	tp__segs_put(c->s, x);
	x->dlink.prev = x->dlink.next = x->wlink.prev = x->wlink.next = NULL;
	if (x->released || x->op >= TP_OP_IN_WRITE)
		tp__xfer_free(x);
	else
		x->c = NULL;
}

static void drop_failed_xfers(struct tcpx_p2p_conn *c)
{
	struct tcpx_p2p_xfer *x, *next;
	int d;

	for (x = c->unmatched.head; x; x = next) {
		next = x->wlink.next;
		tp__xlist_remove(&c->unmatched, x);
		drop_xfer(c, x);
	}
	/* An xfer waiting for an answer may also be in a chunk stream. */
	for (x = c->answers.head; x; x = next) {
		next = x->wlink.next;
		tp__xlist_remove(&c->answers, x);
		if (!x->queued || x->chunks_done)
			drop_xfer(c, x);
	}
	for (d = 0; d < 2; d++) {
		for (x = c->dir[d].head; x; x = next) {
			next = x->dlink.next;
			drop_xfer(c, x);
		}
		c->dir[d].head = c->dir[d].tail = NULL;
	}
}

/* The peer's CLOSE arrived (ctl.c, conn lock held): a conn the caller
 * still holds fails with ECLOSED, and answers with its own CLOSE. */
int tp__conn_peer_closed(struct tcpx_p2p_conn *c)
{
	if (!c->destroyed && !c->err) {
		snprintf(c->why, sizeof(c->why), "the peer closed the connection");
		TP_INFO("conn", "%s closed the connection", c->peer[0] ? c->peer : "the peer");
		fail_pending(c, TCPX_P2P_ECLOSED);
		tp__rma_tell_failed(c);
	}
	return tp__ctl_close(c);
}

/* The caller's xfers outlive the conn: test, wait and release then see a
 * destroyed conn, not freed memory. */
static void detach_live(struct tcpx_p2p_conn *c)
{
	for (struct tcpx_p2p_xfer *x = c->live.head, *next; x; x = next) {
		next = x->llink.next;
		x->llink.prev = x->llink.next = NULL;
		x->c = NULL;
	}
	c->live.head = c->live.tail = NULL;
}

/* Requests the plugin has on the data channels (chunks in its hands). */
uint32_t tp__conn_data_inflight(const struct tcpx_p2p_conn *c)
{
	uint32_t n = 0;

	for (int i = 0; i < c->nchan; i++)
		n += (c->send[i].issued - c->send[i].win.retired) +
		     (c->recv[i].issued - c->recv[i].win.retired);
	return n;
}

/* Of those, the ones whose plugin may still read or write the caller's
 * memory: sends posted from it (not from staging) and receives the plugin
 * writes in place (no bounce buffer, not into staging or the landing
 * buffer). */
uint32_t tp__conn_caller_inflight(const struct tcpx_p2p_conn *c)
{
	uint32_t n = 0;

	for (int i = 0; i < 2 * c->nchan; i++) {
		const struct tp_comm *cm = i < c->nchan ? &c->send[i] : &c->recv[i - c->nchan];

		for (uint32_t k = cm->win.retired; k != cm->issued; k++)
			n += cm->slot[tp_window_slot(k)].caller;
	}
	return n;
}

static void close_comm(struct tcpx_p2p_session *s, void *comm, enum tp_dir dir, bool *refused)
{
	int rc;

	tp__mr_drop_comm(s, comm);
	rc = dir == TP_SEND ? s->net->ops->close_send(s->net, comm)
			    : s->net->ops->close_recv(s->net, comm);
	*refused |= rc != 0;
}

void tp__conn_finish(struct tcpx_p2p_conn *c, const char *reason)
{
	struct tcpx_p2p_session *s = c->s;
	uint32_t posted = tp__conn_data_inflight(c) + tp__ctl_inflight(c);
	bool refused = false;
	int i;

	/* Control-frame copies out of the bounce buffer read it until they end. */
	tp__devq_drain(s);
	for (i = 0; i < c->nchan; i++) {
		close_comm(s, c->send[i].comm, TP_SEND, &refused);
		close_comm(s, c->recv[i].comm, TP_RECV, &refused);
	}
	close_comm(s, tp__ctl_comm(c, TP_SEND), TP_SEND, &refused);
	close_comm(s, tp__ctl_comm(c, TP_RECV), TP_RECV, &refused);
	if (posted || refused) {
		__atomic_add_fetch(&s->unclean_closes, 1, __ATOMIC_RELAXED);
		TP_WARN("conn", "connection to %s closed with %u plugin requests posted%s: %s",
			c->peer[0] ? c->peer : "peer", posted,
			refused ? " (the plugin reported an error)" : "", reason);
	}
	drop_failed_xfers(c);
	detach_live(c);
	for (i = 0; i < c->nchan; i++) {
		tp__stage_free(&c->send[i]);
		tp__stage_free(&c->recv[i]);
	}
	land_destroy(c);
	if (c->drain_mr)
		tcpx_p2p_mr_deregister(c->drain_mr);
	free(c->drain_buf);
	tp__dev_free(c->zero_dev);
	tp__ctl_destroy(c);
	tp__rma_destroy(c);
	if (c->rdv_fd >= 0)
		tp__sock_close(c->rdv_fd);
	pthread_mutex_destroy(&c->rdv_lock);
	pthread_mutex_destroy(&c->lock);
	free(c->recv);
	free(c->send);
	free(c);
}

/* Destroying a conn closes it with the peer (docs/architecture.md
 * "Closing a connection"): both sides say CLOSE on the control channel and
 * post exactly the receives the other side's frames fill, so that no
 * request is left posted when the comms are closed (NCCL never closes a
 * comm with requests in flight; some plugins then break the other comms
 * of the process).  The caller gets control back at once: the handshake
 * ends in later passes of the session, or at session_destroy, within the
 * session's timeout.  Where it cannot run (the conn failed, or chunks
 * are in the plugin's hands) the comms are closed now, and a warning says
 * how many requests were still posted. */
int tcpx_p2p_conn_destroy(tcpx_p2p_conn *c)
{
	struct tcpx_p2p_session *s;
	const char *unclean = NULL;
	char reason[300];
	uint64_t before;
	void *ctx;
	int i;

	if (!c)
		return tp__error(TCPX_P2P_EINVAL, "conn_destroy: NULL conn");
	s = c->s;
	ctx = tp__gpu_save(s);
	/* No pass of the session reaches this conn after this. */
	tp__engine_remove(s, c);
	pthread_mutex_lock(&c->lock);
	if (c->err && !tp__ctl_closing(c)) {
		snprintf(reason, sizeof(reason), "the connection had failed: %s", c->why);
		unclean = reason;
	}
	before = c->completed;
	if (c->dir[TP_SEND].head || c->dir[TP_RECV].head || c->unmatched.head || c->answers.head ||
	    c->settling.head) {
		if (!c->err)
			TP_INFO("conn", "closing the connection to %s with transfers pending",
				c->peer[0] ? c->peer : "peer");
		fail_pending(c, c->err ? c->err : TCPX_P2P_ECLOSED);
	}
	before = c->completed - before;
	pthread_mutex_unlock(&c->lock);
	tp__engine_notify(s, before);
	/* Unpacks queued for this conn read its bounce buffers: let them end
	 * before the comms (and the buffers) go. */
	tp__devq_drain(s);
	for (i = 0; i < c->nchan; i++) {
		for (unsigned k = 0; k < TP_WINDOW_SLOTS; k++) {
			tp__hcopy_wait(&c->send[i].slot[k].hjob);
			tp__hcopy_wait(&c->recv[i].slot[k].hjob);
		}
	}
	tp__session_use_gpu(s);
	c->destroyed = true;
	/* Notifications naming c go before the caller can no longer take them. */
	tp__rma_destroy(c);
	if (!unclean && tp__ctl_close(c))
		unclean = "out of memory for the close handshake";
	/* Chunks in the plugin's hands that may still read or write the
	 * caller's buffers complete (the peer, told of the close, finishes
	 * what it has under way too) before conn_destroy returns, or the
	 * comms close as they are.  Everything else of the close (chunks into
	 * bounce pages or the library's own staging, throw-away requests, the
	 * control frames) ends on the closing list: the peer never holds the
	 * caller for those. */
	if (!unclean && tp__conn_caller_inflight(c) && !tp__close_drain(c))
		unclean = c->drain_failed ? "transfers were under way and their chunks failed"
					  : "transfers were under way in the caller's memory and "
					    "their chunks did not complete within close_timeout_ms";
	if (unclean) {
		/* With chunks still posted the plugin may write into the buffers
		 * of the failed xfers: the comms close before the caller gets
		 * them back. */
		tp__conn_finish(c, unclean);
	} else {
		drop_failed_xfers(c);
		detach_live(c);
		tp__close_linger(c);
	}
	/* After the conn is on the closing list: a session_destroy that then
	 * finds no conn of the caller's finds this one's close. */
	pthread_mutex_lock(&s->lock);
	s->nconns--;
	pthread_mutex_unlock(&s->lock);
	tp__dev_ctx_restore(ctx);
	return 0;
}
