/* Connections: nchan channels, each a plugin send comm and recv comm. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"
#include "util/error.h"
#include "util/log.h"
#include "util/sock.h"

static void init_comm(struct tp_comm *cm, void *comm, enum tp_dir dir, int window)
{
	memset(cm, 0, sizeof(*cm));
	cm->comm = comm;
	cm->dir = dir;
	cm->win.limit = (uint32_t)window;
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
	c->s = s;
	c->nchan = nchan;
	c->ctrl_fd = -1;
	for (i = 0; i < nchan; i++) {
		init_comm(&c->send[i], send_comms[i], TP_SEND, s->cfg.send_window);
		init_comm(&c->recv[i], recv_comms[i], TP_RECV, s->cfg.recv_window);
		c->send[i].next_seq = (uint64_t)i;
		c->recv[i].next_seq = (uint64_t)i;
		c->recv[i].devh = devh[i];
		rc = tp__unpack_prepare(s, &c->recv[i]);
		if (rc)
			goto destroy_lock;
	}
	pthread_mutex_lock(&s->lock);
	s->nconns++;
	pthread_mutex_unlock(&s->lock);
	*out = c;
	return 0;

destroy_lock:
	pthread_mutex_destroy(&c->lock);
free_conn:
	free(c->recv);
	free(c->send);
	free(c);
	return rc;
}

int tp__conn_fail(struct tcpx_p2p_conn *c, int err)
{
	struct tcpx_p2p_xfer *x;
	int d;

	if (c->err)
		return c->err;
	c->err = err;
	TP_WARN("conn", "connection to %s failed: %s (%s)", c->peer[0] ? c->peer : "peer",
		tcpx_p2p_strerror(err), tcpx_p2p_last_error());
	/* Slots may still point at these xfers, but a failed conn never
	 * progresses again, so the caller may release them at once. */
	for (d = 0; d < 2; d++) {
		while ((x = c->dir[d].head)) {
			c->dir[d].head = x->next;
			x->prev = x->next = NULL;
			x->err = err;
			x->done = true;
			tp__mr_put(x->mr);
		}
		c->dir[d].tail = NULL;
	}
	return err;
}

int tcpx_p2p_progress(tcpx_p2p_conn *c)
{
	bool moved;
	int rc;

	if (!c)
		return tp__error(TCPX_P2P_EINVAL, "progress: NULL conn");
	pthread_mutex_lock(&c->lock);
	rc = tp__progress(c, &moved);
	pthread_mutex_unlock(&c->lock);
	return rc;
}

int tcpx_p2p_conn_barrier(tcpx_p2p_conn *c, int timeout_ms)
{
	uint32_t len;
	int rc;

	if (!c)
		return tp__error(TCPX_P2P_EINVAL, "conn_barrier: NULL conn");
	if (c->ctrl_fd < 0)
		return tp__error(TCPX_P2P_ENOTSUP,
				 "conn_barrier: connection was made by blob exchange");
	timeout_ms = tp__session_timeout(c->s, timeout_ms);
	rc = tp__frame_send(c->ctrl_fd, TP_FRAME_BARRIER, NULL, 0, timeout_ms);
	if (!rc)
		rc = tp__frame_recv(c->ctrl_fd, TP_FRAME_BARRIER, NULL, 0, &len, timeout_ms);
	return rc;
}

int tcpx_p2p_conn_destroy(tcpx_p2p_conn *c)
{
	struct tcpx_p2p_session *s;
	int i, busy;

	if (!c)
		return tp__error(TCPX_P2P_EINVAL, "conn_destroy: NULL conn");
	s = c->s;
	pthread_mutex_lock(&c->lock);
	busy = c->nxfers;
	pthread_mutex_unlock(&c->lock);
	if (busy)
		return tp__error(TCPX_P2P_EBUSY, "conn_destroy: %d xfer(s) not released", busy);
	tp__session_use_gpu(s);
	for (i = 0; i < c->nchan; i++) {
		tp__mr_drop_comm(s, c->send[i].comm);
		tp__mr_drop_comm(s, c->recv[i].comm);
		s->net->ops->close_send(s->net, c->send[i].comm);
		s->net->ops->close_recv(s->net, c->recv[i].comm);
	}
	if (c->ctrl_fd >= 0)
		tp__sock_close(c->ctrl_fd);
	pthread_mutex_lock(&s->lock);
	s->nconns--;
	pthread_mutex_unlock(&s->lock);
	pthread_mutex_destroy(&c->lock);
	free(c->recv);
	free(c->send);
	free(c);
	return 0;
}
