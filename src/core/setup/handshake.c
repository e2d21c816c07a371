/* The rendezvous handshake on a connected socket: with a token, a mutual
 * challenge-response first; then the blobs, framed as HELLO; then the
 * plugin connect (tcpx_p2p_connect).  The dialer speaks first at every
 * step; the server reads what the peer must send before it calls the
 * plugin at all, so a peer that says nothing, garbage, or cannot prove the
 * token costs it no plugin resources.  Without a token, peers that predate
 * this order (both sides send their blob first) interoperate: the frames
 * wait in the socket buffers.
 *
 * Authentication (TCPX_P2P_AUTH_TOKEN), AUTH frames of struct tp_auth_msg:
 *   1 dialer -> server  nonce_d, id_d
 *   2 server -> dialer  nonce_s, id_s, HMAC(token, "server", transcript)
 *   3 dialer -> server  HMAC(token, "dialer", transcript)
 * transcript = nonce_d, nonce_s, id_d, id_s; ids are random per session and
 * tell a connection to oneself.  Each HELLO then ends in
 * HMAC(token, role, nonce_d, nonce_s, blob), binding the blob to this
 * handshake; the blob carries its own MAC too (src/core/setup/blob.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/conn.h"
#include "core/session.h"
#include "core/setup/auth.h"
#include "core/setup/handshake.h"
#include "core/setup/listener.h"
#include "core/setup/rdv_frame.h"
#include "util/error.h"
#include "util/log.h"

#define TP_AUTH_VERSION 1

struct tp_auth_msg {
	uint8_t version;
	uint8_t step;
	uint8_t pad[6];
	uint64_t id;
	unsigned char nonce[TP_AUTH_NONCE];
	unsigned char mac[TP_AUTH_MAC];
};

struct tp_auth_state {
	const char *token;
	unsigned char nonce_d[TP_AUTH_NONCE], nonce_s[TP_AUTH_NONCE];
	uint64_t id_d, id_s;
};

/* The timeout of one step: what is left of deadline (-1: none), at least
 * 1 ms, so that a step begun after the deadline still reports its own
 * timeout. */
static int step_ms(tp_deadline deadline)
{
	int left = tp__deadline_left_ms(deadline);

	return left == 0 ? 1 : left;
}

/* Every error of the handshake names the peer. */
static int with_peer(int rc, const char *peer)
{
	if (rc && !strstr(tcpx_p2p_last_error(), peer))
		tp__error(rc, "handshake with %s: %s", peer, tcpx_p2p_last_error());
	return rc;
}

static int transcript_mac(const struct tp_auth_state *a, const char *label,
			  unsigned char mac[TP_AUTH_MAC])
{
	const struct tp_auth_part parts[] = {
		{ a->nonce_d, TP_AUTH_NONCE }, { a->nonce_s, TP_AUTH_NONCE },
		{ &a->id_d, sizeof(a->id_d) }, { &a->id_s, sizeof(a->id_s) },
	};

	return tp__auth_mac(a->token, label, parts, 4, mac);
}

static int hello_mac(const struct tp_auth_state *a, bool server, const void *blob, size_t len,
		     unsigned char mac[TP_AUTH_MAC])
{
	const struct tp_auth_part parts[] = {
		{ a->nonce_d, TP_AUTH_NONCE }, { a->nonce_s, TP_AUTH_NONCE }, { blob, len },
	};

	return tp__auth_mac(a->token, server ? "tcpx_p2p hello v1 server" :
					       "tcpx_p2p hello v1 dialer",
			    parts, 3, mac);
}

static int auth_send(int fd, int step, uint64_t id, const unsigned char *nonce,
		     const unsigned char *mac, tp_deadline deadline)
{
	struct tp_auth_msg m;

	memset(&m, 0, sizeof(m));
	m.version = TP_AUTH_VERSION;
	m.step = (uint8_t)step;
	m.id = id;
	if (nonce)
		memcpy(m.nonce, nonce, TP_AUTH_NONCE);
	if (mac)
		memcpy(m.mac, mac, TP_AUTH_MAC);
	return tp__rdv_frame_send(fd, TP_RDV_FRAME_AUTH, &m, sizeof(m), step_ms(deadline));
}

/* Checks an AUTH payload of len bytes for step. */
int tp__auth_msg_check(const void *buf, uint32_t len, int step)
{
	const struct tp_auth_msg *m = buf;

	if (len != sizeof(*m))
		return tp__error(TCPX_P2P_EPROTO, "auth frame of %u bytes, expected %zu", len,
				 sizeof(*m));
	if (m->version != TP_AUTH_VERSION || m->step != step)
		return tp__error(TCPX_P2P_EPROTO, "auth frame version %u step %u, expected %u "
				 "step %d", m->version, m->step, TP_AUTH_VERSION, step);
	return 0;
}

static int auth_recv(int fd, int step, struct tp_auth_msg *m, tp_deadline deadline)
{
	uint32_t len = 0;
	int rc = tp__rdv_frame_recv(fd, TP_RDV_FRAME_AUTH, m, sizeof(*m), &len, step_ms(deadline));

	return rc ? rc : tp__auth_msg_check(m, len, step);
}

static int refuse_self(const struct tp_auth_state *a)
{
	if (a->id_d == a->id_s || !memcmp(a->nonce_d, a->nonce_s, TP_AUTH_NONCE))
		return tp__error(TCPX_P2P_EPROTO, "a connection to oneself (or a reflected "
				 "challenge) is refused");
	return 0;
}

static int auth_dialer(struct tcpx_p2p_session *s, int fd, struct tp_auth_state *a,
		       tp_deadline deadline)
{
	unsigned char mac[TP_AUTH_MAC];
	struct tp_auth_msg m;
	int rc;

	a->id_d = s->auth_id;
	rc = tp__auth_random(a->nonce_d, TP_AUTH_NONCE);
	if (!rc)
		rc = auth_send(fd, 1, a->id_d, a->nonce_d, NULL, deadline);
	if (!rc)
		rc = auth_recv(fd, 2, &m, deadline);
	if (rc)
		return tp__error(rc, "authentication: %s (both sides need the same "
				 "TCPX_P2P_AUTH_TOKEN)", tcpx_p2p_last_error());
	a->id_s = m.id;
	memcpy(a->nonce_s, m.nonce, TP_AUTH_NONCE);
	rc = refuse_self(a);
	if (!rc)
		rc = transcript_mac(a, "tcpx_p2p auth v1 server", mac);
	if (!rc && !tp__auth_equal(mac, m.mac))
		rc = tp__error(TCPX_P2P_EPROTO, "the server failed authentication: it does not "
			       "hold this TCPX_P2P_AUTH_TOKEN");
	if (!rc)
		rc = transcript_mac(a, "tcpx_p2p auth v1 dialer", mac);
	if (!rc)
		rc = auth_send(fd, 3, a->id_d, NULL, mac, deadline);
	return rc;
}

/* Server side, after step 1 (m) arrived. */
static int auth_server(struct tcpx_p2p_session *s, int fd, struct tp_auth_state *a,
		       const struct tp_auth_msg *m, tp_deadline peer_deadline)
{
	unsigned char mac[TP_AUTH_MAC];
	struct tp_auth_msg m3;
	int rc;

	a->id_d = m->id;
	a->id_s = s->auth_id;
	memcpy(a->nonce_d, m->nonce, TP_AUTH_NONCE);
	rc = tp__auth_random(a->nonce_s, TP_AUTH_NONCE);
	if (!rc)
		rc = refuse_self(a);
	if (!rc)
		rc = transcript_mac(a, "tcpx_p2p auth v1 server", mac);
	if (!rc)
		rc = auth_send(fd, 2, a->id_s, a->nonce_s, mac, peer_deadline);
	if (!rc)
		rc = auth_recv(fd, 3, &m3, peer_deadline);
	if (!rc)
		rc = transcript_mac(a, "tcpx_p2p auth v1 dialer", mac);
	if (!rc && !tp__auth_equal(mac, m3.mac))
		rc = tp__error(TCPX_P2P_EPROTO, "peer failed authentication: it does not hold "
			       "this TCPX_P2P_AUTH_TOKEN");
	return rc;
}

/* The server's first frame: AUTH step 1 with a token, HELLO without. */
static int server_first(struct tcpx_p2p_session *s, int fd, struct tp_auth_state *a,
			unsigned char *buf, uint32_t *len, tp_deadline peer_deadline)
{
	uint16_t type = 0;
	int rc = tp__rdv_frame_recv_any(fd, &type, buf, TP_RDV_FRAME_MAX, len,
				    step_ms(peer_deadline));

	if (rc)
		return rc;
	if (a->token && type != TP_RDV_FRAME_AUTH)
		return tp__error(TCPX_P2P_EPROTO, "peer did not authenticate (frame type %u): "
				 "this side requires TCPX_P2P_AUTH_TOKEN", type);
	if (!a->token && type == TP_RDV_FRAME_AUTH)
		return tp__error(TCPX_P2P_EPROTO, "peer wants to authenticate: it has "
				 "TCPX_P2P_AUTH_TOKEN set and this side has none");
	if (!a->token && type != TP_RDV_FRAME_HELLO)
		return tp__error(TCPX_P2P_EPROTO, "expected a hello frame (type %u), got type %u",
				 TP_RDV_FRAME_HELLO, type);
	if (!a->token)
		return 0;
	rc = tp__auth_msg_check(buf, *len, 1);
	if (!rc) {
		struct tp_auth_msg m;

		memcpy(&m, buf, sizeof(m));
		rc = auth_server(s, fd, a, &m, peer_deadline);
	}
	if (!rc)
		rc = tp__rdv_frame_recv(fd, TP_RDV_FRAME_HELLO, buf, TP_RDV_FRAME_MAX, len,
				    step_ms(peer_deadline));
	return rc;
}

static int hello_send(int fd, const struct tp_auth_state *a, bool server,
		      const struct tcpx_p2p_listener *l, tp_deadline deadline)
{
	unsigned char *buf;
	int rc;

	if (!a->token)
		return tp__rdv_frame_send(fd, TP_RDV_FRAME_HELLO, l->blob, (uint32_t)l->blob_len,
				      step_ms(deadline));
	buf = malloc(l->blob_len + TP_AUTH_MAC);
	if (!buf)
		return tp__error(TCPX_P2P_ENOMEM, "handshake: out of memory");
	memcpy(buf, l->blob, l->blob_len);
	rc = hello_mac(a, server, l->blob, l->blob_len, buf + l->blob_len);
	if (!rc)
		rc = tp__rdv_frame_send(fd, TP_RDV_FRAME_HELLO, buf,
				    (uint32_t)(l->blob_len + TP_AUTH_MAC), step_ms(deadline));
	free(buf);
	return rc;
}

/* Verify and strip the HELLO's MAC (made by the other role). */
static int hello_open(const struct tp_auth_state *a, bool server, const unsigned char *buf,
		      uint32_t *len)
{
	unsigned char mac[TP_AUTH_MAC];
	int rc;

	if (!a->token)
		return 0;
	if (*len < TP_AUTH_MAC)
		return tp__error(TCPX_P2P_EPROTO, "hello of %u bytes has no MAC", *len);
	*len -= TP_AUTH_MAC;
	rc = hello_mac(a, !server, buf, *len, mac);
	if (!rc && !tp__auth_equal(mac, buf + *len))
		rc = tp__error(TCPX_P2P_EPROTO, "peer's hello fails its MAC: altered in transit "
			       "or not from the authenticated peer");
	return rc;
}

int tp__handshake(struct tcpx_p2p_session *s, int fd, const char *peer, bool server,
		  tp_deadline peer_deadline, tp_deadline deadline, struct tcpx_p2p_conn **out)
{
	struct tcpx_p2p_listener *l = NULL;
	struct tp_auth_state a;
	unsigned char *peer_blob;
	uint32_t peer_len = 0;
	int rc;

	memset(&a, 0, sizeof(a));
	a.token = s->cfg.auth_token;
	peer_blob = malloc(TP_RDV_FRAME_MAX);
	if (!peer_blob)
		return tp__error(TCPX_P2P_ENOMEM, "handshake with %s: out of memory", peer);
	if (server) {
		rc = server_first(s, fd, &a, peer_blob, &peer_len, peer_deadline);
		if (!rc)
			rc = hello_open(&a, server, peer_blob, &peer_len);
		/* Before the plugin's listen: garbage never reaches the plugin. */
		if (!rc)
			rc = tp__peer_blob_check(s, peer_blob, peer_len);
		if (!rc)
			rc = tcpx_p2p_listen(s, &l);
		if (!rc)
			rc = hello_send(fd, &a, server, l, deadline);
	} else {
		rc = a.token ? auth_dialer(s, fd, &a, deadline) : 0;
		if (!rc)
			rc = tcpx_p2p_listen(s, &l);
		if (!rc)
			rc = hello_send(fd, &a, server, l, deadline);
		if (!rc) {
			rc = tp__rdv_frame_recv(fd, TP_RDV_FRAME_HELLO, peer_blob, TP_RDV_FRAME_MAX,
					    &peer_len, step_ms(deadline));
			/* The server checks our blob and closes on a mismatch
			 * without a word; only its log names the setting. */
			if (rc == TCPX_P2P_ECLOSED)
				tp__error(rc, "%s: the server closed before sending its blob: it "
					  "refused this peer (TCPX_P2P_NUM_CHANNELS, "
					  "TCPX_P2P_CHUNK_BYTES, TCPX_P2P_CHUNKS_PER_CHANNEL or "
					  "the plugin differ%s) or failed; "
					  "its log says which", tcpx_p2p_last_error(),
					  a.token ? "" : ", or it requires TCPX_P2P_AUTH_TOKEN");
		}
		if (!rc)
			rc = hello_open(&a, server, peer_blob, &peer_len);
	}
	if (!rc)
		rc = tcpx_p2p_connect(l, peer_blob, peer_len, step_ms(deadline), out);
	if (rc) {
		with_peer(rc, peer);
		TP_WARN("conn", "%s", tcpx_p2p_last_error());
		if (l)
			tcpx_p2p_listener_destroy(l);
		goto free_blob;
	}
	/* Passes of other threads (the progress or keepalive thread) may be
	 * looking at the conn already. */
	pthread_mutex_lock(&(*out)->lock);
	(*out)->rdv_fd = fd;
	snprintf((*out)->peer, sizeof((*out)->peer), "%s", peer);
	pthread_mutex_unlock(&(*out)->lock);
	TP_INFO("conn", "connected to %s: %d channels%s", peer, (*out)->nchan,
		a.token ? ", peer authenticated" : "");
free_blob:
	free(peer_blob);
	return rc;
}
