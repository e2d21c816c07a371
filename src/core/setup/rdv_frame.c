/* The rendezvous socket's framing: a 12-byte header (magic,
 * version, type, length) and a payload of at most TP_RDV_FRAME_MAX bytes,
 * sent and received whole by one deadline per frame (util/sock.c moves the
 * bytes).  Everything received is checked before it is believed. */
#include <arpa/inet.h>

#include "core/setup/rdv_frame.h"
#include "util/error.h"
#include "util/sock.h"
#include "util/time.h"

static const char *tp_frame_type_name(unsigned type)
{
	switch (type) {
	case TP_RDV_FRAME_HELLO:
		return "hello";
	case TP_RDV_FRAME_BARRIER:
		return "barrier";
	case TP_RDV_FRAME_BYE:
		return "bye";
	case TP_RDV_FRAME_AUTH:
		return "auth";
	default:
		return "unknown";
	}
}

void tp__rdv_frame_encode(struct tp_rdv_frame_hdr *wire, uint16_t type, uint32_t len)
{
	wire->magic = htonl(TP_RDV_FRAME_MAGIC);
	wire->version = htons(TP_RDV_FRAME_VERSION);
	wire->type = htons(type);
	wire->len = htonl(len);
}

int tp__rdv_frame_decode(const struct tp_rdv_frame_hdr *wire, uint16_t type, uint32_t cap,
			 uint32_t *len)
{
	uint32_t magic = ntohl(wire->magic), n = ntohl(wire->len);
	unsigned version = ntohs(wire->version), got = ntohs(wire->type);

	if (magic != TP_RDV_FRAME_MAGIC)
		return tp__error(TCPX_P2P_EPROTO, "bad magic 0x%08x: not a tcpx_p2p peer", magic);
	if (version != TP_RDV_FRAME_VERSION)
		return tp__error(TCPX_P2P_EPROTO,
				 "peer speaks bootstrap version %u, this library speaks %u",
				 version, TP_RDV_FRAME_VERSION);
	if (type != TP_RDV_FRAME_ANY && got != type)
		return tp__error(TCPX_P2P_EPROTO, "expected a %s frame (type %u), got %s (type %u)",
				 tp_frame_type_name(type), type, tp_frame_type_name(got), got);
	if (n > cap || n > TP_RDV_FRAME_MAX)
		return tp__error(TCPX_P2P_EPROTO, "%s frame of %u bytes exceeds the limit of %u",
				 tp_frame_type_name(got), n,
				 cap < TP_RDV_FRAME_MAX ? cap : TP_RDV_FRAME_MAX);
	if (len)
		*len = n;
	return 0;
}

int tp__rdv_frame_send(int fd, uint16_t type, const void *payload, uint32_t len, int timeout_ms)
{
	tp_deadline deadline = tp__deadline_ms(timeout_ms);
	struct tp_rdv_frame_hdr hdr;
	int rc;

	if (fd < 0 || len > TP_RDV_FRAME_MAX || (!payload && len))
		return tp__error(TCPX_P2P_EINVAL, "frame send: bad fd %d or payload (%u bytes)", fd,
				 len);
	tp__rdv_frame_encode(&hdr, type, len);
	rc = tp__sock_send_by(fd, &hdr, sizeof(hdr), deadline);
	if (rc == 0 && len)
		rc = tp__sock_send_by(fd, payload, len, deadline);
	return rc;
}

static int tp_frame_recv(int fd, uint16_t want, uint16_t *type, void *buf, uint32_t cap,
			 uint32_t *len, int timeout_ms)
{
	tp_deadline deadline = tp__deadline_ms(timeout_ms);
	struct tp_rdv_frame_hdr hdr;
	char peer[TP_SOCK_ADDR_LEN];
	uint32_t n;
	int rc;

	if (fd < 0 || (!buf && cap))
		return tp__error(TCPX_P2P_EINVAL, "frame recv: bad fd %d or NULL buffer", fd);
	rc = tp__sock_recv_by(fd, &hdr, sizeof(hdr), deadline);
	if (rc)
		return rc;
	rc = tp__rdv_frame_decode(&hdr, want, cap, &n);
	if (rc) {
		tp__sock_peer_name(fd, peer, sizeof(peer));
		return tp__error(rc, "from %s: %s", peer, tcpx_p2p_last_error());
	}
	if (n)
		rc = tp__sock_recv_by(fd, buf, n, deadline);
	if (rc == 0 && len)
		*len = n;
	if (rc == 0 && type)
		*type = ntohs(hdr.type);
	return rc;
}

int tp__rdv_frame_recv(int fd, uint16_t type, void *buf, uint32_t cap, uint32_t *len,
		       int timeout_ms)
{
	return tp_frame_recv(fd, type, NULL, buf, cap, len, timeout_ms);
}

int tp__rdv_frame_recv_any(int fd, uint16_t *type, void *buf, uint32_t cap, uint32_t *len,
		       int timeout_ms)
{
	return tp_frame_recv(fd, TP_RDV_FRAME_ANY, type, buf, cap, len, timeout_ms);
}
