/* Connection set-up by blob exchange.  Each side listens on nchan plugin
 * listen comms and publishes their handles in a blob; with the peer's blob,
 * each side connects its send comm i to the peer's listen comm i and
 * accepts its own listen comm i, both asynchronously, until all 2 x nchan
 * comms exist.  Both sides therefore run the same code: no client/server
 * asymmetry, no message through the plugin before the comms are complete. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/conn.h"
#include "core/engine.h"
#include "core/items/items.h"
#include "core/pass.h"
#include "core/session.h"
#include "core/setup/auth.h"
#include "core/setup/blob.h"
#include "core/setup/handshake.h"
#include "core/setup/listener.h"
#include "util/error.h"
#include "util/log.h"
#include "util/time.h"

int tcpx_p2p_listen(tcpx_p2p_session *s, tcpx_p2p_listener **out)
{
	struct tcpx_p2p_listener *l;
	size_t hdr = sizeof(struct tp_blob_hdr);
	char node[TP_BLOB_NAME];
	void *ctx;
	int i, rc;

	if (!s || !out)
		return tp__error(TCPX_P2P_EINVAL, "listen: NULL argument");
	l = calloc(1, sizeof(*l));
	if (!l)
		return tp__error(TCPX_P2P_ENOMEM, "listen: out of memory");
	l->s = s;
	l->nchan = s->cfg.num_channels + 1; /* + the control channel (ctl.h) */
	l->blob_len = tp__blob_size(l->nchan, s->cfg.auth_token != NULL);
	l->lcomm = calloc((size_t)l->nchan, sizeof(*l->lcomm));
	l->blob = calloc(1, l->blob_len);
	if (!l->lcomm || !l->blob) {
		rc = tp__error(TCPX_P2P_ENOMEM, "listen: out of memory");
		goto free_listener;
	}
	pthread_mutex_lock(&s->lock); /* session_set_node_id */
	memcpy(node, s->node_id, sizeof(node));
	pthread_mutex_unlock(&s->lock);
	tp__blob_header(l->blob, l->nchan, (uint32_t)s->cfg.chunk_bytes,
			(uint32_t)s->cfg.chunks_per_channel, s->net->name,
			(uint32_t)s->cfg.peer_max_notifs, (uint32_t)s->cfg.notif_max_bytes,
			s->epoch, node);
	ctx = tp__gpu_save(s);
	rc = tp__session_use_gpu(s);
	for (i = 0; !rc && i < l->nchan; i++) {
		/* Plugins write their handle through a struct pointer: give them
		 * aligned storage, whatever offset the blob puts it at. */
		union {
			unsigned char b[NCCL_NET_HANDLE_MAXSIZE];
			uint64_t align;
		} h = { 0 };

		rc = s->net->ops->listen(s->net, s->nics[i % s->nnics], h.b, &l->lcomm[i]);
		memcpy(l->blob + hdr + (size_t)i * NCCL_NET_HANDLE_MAXSIZE, h.b, sizeof(h.b));
	}
	tp__dev_ctx_restore(ctx);
	if (!rc && s->cfg.auth_token)
		rc = tp__blob_seal(s->cfg.auth_token, l->blob, l->blob_len - TP_AUTH_MAC);
	if (rc)
		goto close_comms;
	pthread_mutex_lock(&s->lock);
	s->nlisteners++;
	pthread_mutex_unlock(&s->lock);
	*out = l;
	return 0;

close_comms:
	for (i = 0; i < l->nchan; i++)
		if (l->lcomm[i])
			s->net->ops->close_listen(s->net, l->lcomm[i]);
free_listener:
	free(l->blob);
	free(l->lcomm);
	free(l);
	return rc;
}

int tcpx_p2p_listener_blob(const tcpx_p2p_listener *l, const void **blob, size_t *len)
{
	if (!l || !blob || !len)
		return tp__error(TCPX_P2P_EINVAL, "listener_blob: NULL argument");
	*blob = l->blob;
	*len = l->blob_len;
	return 0;
}

/* A peer's handle never reaches connect with in-progress connect state in
 * it (a pointer the plugin would follow; docs/tcpx.md, plugin contract
 * rule 14). */
static int handles_check(const struct tcpx_p2p_session *s, unsigned char *handles, int nchan)
{
	static atomic_int warned;
	int i, off;

	for (i = 0; i < nchan; i++) {
		if (!tp__net_handle_scrub(s->net->name,
					  handles + (size_t)i * NCCL_NET_HANDLE_MAXSIZE, &off)) {
			if (!atomic_exchange(&warned, 1))
				TP_WARN("conn", "plugin %s: its handle layout is unknown to this "
					"library, so peer handles reach its connect unchecked; "
					"connect only to peers you trust", s->net->name);
			return 0;
		}
		if (off >= 0)
			return tp__error(TCPX_P2P_EPROTO,
					 "peer handle %d carries in-progress connect state "
					 "(byte %d set, zero in every fresh handle): refused before "
					 "the plugin saw it", i, off);
		if (tp__net_handle_counts(s->net->name,
					  handles + (size_t)i * NCCL_NET_HANDLE_MAXSIZE, &off))
			return tp__error(TCPX_P2P_EPROTO,
					 "peer handle %d has a socket or thread count out of range "
					 "(the int at byte %d): refused before the plugin saw it",
					 i, off);
	}
	return 0;
}

int tp__peer_blob_check(const struct tcpx_p2p_session *s, const void *blob, size_t len)
{
	struct tp_blob_want want;
	unsigned char *handles;
	size_t hlen;
	int rc;

	want.nchan = s->cfg.num_channels + 1;
	want.chunk_bytes = (uint32_t)s->cfg.chunk_bytes;
	want.chunks_per_channel = (uint32_t)s->cfg.chunks_per_channel;
	want.plugin = s->net->name;
	want.token = s->cfg.auth_token;
	rc = tp__blob_check(&want, blob, len);
	if (rc)
		return rc;
	hlen = (size_t)want.nchan * NCCL_NET_HANDLE_MAXSIZE;
	handles = malloc(hlen);
	if (!handles)
		return tp__error(TCPX_P2P_ENOMEM, "connect: out of memory");
	memcpy(handles, (const unsigned char *)blob + sizeof(struct tp_blob_hdr), hlen);
	rc = handles_check(s, handles, want.nchan);
	free(handles);
	return rc;
}

/* Drive every pending connect and accept until all comms exist. */
static int establish(struct tcpx_p2p_listener *l, unsigned char *handles, int timeout_ms,
		     void **send, void **recv, ncclNetDeviceHandle_v7_t *devh)
{
	struct tcpx_p2p_session *s = l->s;
	const struct tp_net_ops *ops = s->net->ops;
	tp_deadline deadline = tp__deadline_ms(timeout_ms);
	struct timespec pause = { 0, 200 * 1000 };
	struct tp_pass_result st;
	int i, pending, rc;

	for (;;) {
		pending = 0;
		for (i = 0; i < l->nchan; i++) {
			if (!send[i]) {
				rc = ops->connect(s->net, s->nics[i % s->nnics],
						  handles + (size_t)i * NCCL_NET_HANDLE_MAXSIZE,
						  &send[i]);
				if (rc)
					return rc;
				pending += !send[i];
			}
			if (!recv[i]) {
				rc = ops->accept(s->net, l->lcomm[i], &recv[i], &devh[i]);
				if (rc)
					return rc;
				pending += !recv[i];
			}
		}
		if (!pending)
			return 0;
		if (tp__deadline_passed(deadline))
			return tp__error(TCPX_P2P_ETIMEDOUT,
					 "connect: %d of %d comms still pending after %d ms",
					 pending, 2 * l->nchan, timeout_ms);
		/* The session's other connections go on meanwhile (their peers
		 * would otherwise hear nothing for the whole set-up). */
		tp__engine_pass(s, NULL, &st);
		nanosleep(&pause, NULL);
	}
}

int tcpx_p2p_connect(tcpx_p2p_listener *l, const void *peer_blob, size_t peer_len,
		     int timeout_ms, tcpx_p2p_conn **out)
{
	struct tcpx_p2p_session *s;
	ncclNetDeviceHandle_v7_t *devh = NULL;
	unsigned char *handles = NULL;
	void **send = NULL, **recv = NULL, *ctx = NULL;
	uint32_t peer_notifs, peer_notif_bytes;
	uint64_t peer_epoch;
	char peer_node[TP_BLOB_NAME];
	size_t hlen;
	int i, rc;

	if (!l || !out)
		return tp__error(TCPX_P2P_EINVAL, "connect: NULL argument");
	s = l->s;
	if (l->spent)
		return tp__error(TCPX_P2P_EINVAL, "connect: this listener's comms were used by "
				 "a failed connect; both sides need new listeners");
	timeout_ms = tp__session_timeout(s, timeout_ms);
	rc = tp__peer_blob_check(s, peer_blob, peer_len);
	if (rc)
		return rc;
	if (peer_len == l->blob_len && !memcmp(peer_blob, l->blob, peer_len))
		return tp__error(TCPX_P2P_EPROTO, "peer blob is this listener's own: "
				 "a connection to oneself is refused");
	/* Connect from private copies: plugins keep connect state in the
	 * handle and each handle serves one connection (docs/tcpx.md, plugin
	 * contract rule 4). */
	hlen = (size_t)l->nchan * NCCL_NET_HANDLE_MAXSIZE;
	handles = malloc(hlen);
	send = calloc((size_t)l->nchan, sizeof(*send));
	recv = calloc((size_t)l->nchan, sizeof(*recv));
	devh = calloc((size_t)l->nchan, sizeof(*devh));
	if (!handles || !send || !recv || !devh) {
		rc = tp__error(TCPX_P2P_ENOMEM, "connect: out of memory");
		goto free_arrays;
	}
	memcpy(handles, (const unsigned char *)peer_blob + sizeof(struct tp_blob_hdr), hlen);
	/* Read now: the peer's blob need not outlive the wait below (in one
	 * process it is the other listener's, freed when that side connects). */
	peer_notifs = tp__blob_max_notifs(peer_blob);
	peer_notif_bytes = tp__blob_max_notif_bytes(peer_blob);
	peer_epoch = tp__blob_epoch(peer_blob);
	tp__blob_node(peer_blob, peer_node);
	ctx = tp__gpu_save(s);
	rc = tp__session_use_gpu(s);
	/* Each listen comm serves one connection, even a half-made one. */
	l->spent = true;
	if (!rc)
		rc = establish(l, handles, timeout_ms, send, recv, devh);
	if (!rc)
		rc = tp__conn_create(s, l->nchan, send, recv, devh, out);
	if (rc)
		goto close_comms;
	/* Before it is on the engine's list: another connect's restart check
	 * reads them there. */
	(*out)->peer_epoch = peer_epoch;
	memcpy((*out)->peer_node, peer_node, sizeof(peer_node));
	tp__engine_add(s, *out); /* its passes may start: the conn is whole */
	tp__items_set_credits(*out, peer_notifs, peer_notif_bytes);
	/* A peer with a node id that comes back with another epoch. */
	if (peer_node[0])
		tp__restart_check(s, *out, false);
	/* Each listen comm served its one connection. */
	pthread_mutex_lock(&s->lock);
	s->nlisteners--;
	pthread_mutex_unlock(&s->lock);
	for (i = 0; i < l->nchan; i++)
		s->net->ops->close_listen(s->net, l->lcomm[i]);
	free(l->lcomm);
	free(l->blob);
	free(l);
	goto free_arrays;

close_comms:
	for (i = 0; i < l->nchan; i++) {
		if (send[i])
			s->net->ops->close_send(s->net, send[i]);
		if (recv[i])
			s->net->ops->close_recv(s->net, recv[i]);
	}
free_arrays:
	tp__dev_ctx_restore(ctx);
	free(devh);
	free(recv);
	free(send);
	free(handles);
	return rc;
}

int tcpx_p2p_listener_destroy(tcpx_p2p_listener *l)
{
	void *ctx;
	int i;

	if (!l)
		return tp__error(TCPX_P2P_EINVAL, "listener_destroy: NULL listener");
	ctx = tp__gpu_save(l->s);
	tp__session_use_gpu(l->s);
	for (i = 0; i < l->nchan; i++)
		l->s->net->ops->close_listen(l->s->net, l->lcomm[i]);
	tp__dev_ctx_restore(ctx);
	pthread_mutex_lock(&l->s->lock);
	l->s->nlisteners--;
	pthread_mutex_unlock(&l->s->lock);
	free(l->lcomm);
	free(l->blob);
	free(l);
	return 0;
}
