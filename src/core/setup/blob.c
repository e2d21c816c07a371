/* Building and checking connection blobs.  The check is the first thing a
 * peer's bytes meet on the blob path, so it is pure (fuzzed by
 * tests/fuzz/fuzz_blob.c). */
#include <arpa/inet.h>
#include <string.h>

#include "core/setup/auth.h"
#include "core/setup/blob.h"
#include "tcpx_p2p.h"
#include "util/error.h"
#include "util/printable.h"

#define TP_BLOB_LABEL "tcpx_p2p blob v1"

size_t tp__blob_size(int nchan, bool mac)
{
	return sizeof(struct tp_blob_hdr) + (size_t)nchan * NCCL_NET_HANDLE_MAXSIZE +
	       (mac ? TP_AUTH_MAC : 0);
}

int tp__blob_seal(const char *token, unsigned char *blob, size_t len)
{
	struct tp_auth_part part = { blob, len };

	return tp__auth_mac(token, TP_BLOB_LABEL, &part, 1, blob + len);
}

void tp__blob_header(void *blob, int nchan, uint32_t chunk_bytes, uint32_t chunks_per_channel,
		     const char *plugin, uint32_t max_notifs, uint32_t max_notif_bytes,
		     uint64_t epoch, const char *node)
{
	struct tp_blob_hdr hdr;

	memset(&hdr, 0, sizeof(hdr));
	hdr.magic = htonl(TP_BLOB_MAGIC);
	hdr.version = htons(TP_BLOB_VERSION);
	hdr.nchan = htons((uint16_t)nchan);
	hdr.chunk_bytes = htonl(chunk_bytes);
	hdr.chunks_per_channel = htonl(chunks_per_channel);
	hdr.handle_size = htonl(NCCL_NET_HANDLE_MAXSIZE);
	strncpy(hdr.plugin, plugin, sizeof(hdr.plugin) - 1);
	hdr.max_notifs = htonl(max_notifs);
	hdr.max_notif_bytes = htonl(max_notif_bytes);
	hdr.epoch_hi = htonl((uint32_t)(epoch >> 32));
	hdr.epoch_lo = htonl((uint32_t)epoch);
	strncpy(hdr.node, node, sizeof(hdr.node) - 1);
	memcpy(blob, &hdr, sizeof(hdr));
}

uint32_t tp__blob_max_notifs(const void *blob)
{
	struct tp_blob_hdr hdr;

	memcpy(&hdr, blob, sizeof(hdr));
	return ntohl(hdr.max_notifs);
}

uint32_t tp__blob_max_notif_bytes(const void *blob)
{
	struct tp_blob_hdr hdr;

	memcpy(&hdr, blob, sizeof(hdr));
	return ntohl(hdr.max_notif_bytes);
}

uint64_t tp__blob_epoch(const void *blob)
{
	struct tp_blob_hdr hdr;

	memcpy(&hdr, blob, sizeof(hdr));
	return (uint64_t)ntohl(hdr.epoch_hi) << 32 | ntohl(hdr.epoch_lo);
}

void tp__blob_node(const void *blob, char out[TP_BLOB_NAME])
{
	struct tp_blob_hdr hdr;

	memcpy(&hdr, blob, sizeof(hdr));
	memcpy(out, hdr.node, TP_BLOB_NAME);
	out[TP_BLOB_NAME - 1] = '\0'; /* checked: nothing past it */
}

int tp__blob_check(const struct tp_blob_want *want, const void *blob, size_t len)
{
	struct tp_blob_hdr hdr;
	char name[TP_BLOB_NAME + 4];
	unsigned nchan;

	if (!blob || len < sizeof(hdr))
		return tp__error(TCPX_P2P_EPROTO, "peer blob of %zu bytes is too short", len);
	memcpy(&hdr, blob, sizeof(hdr));
	if (ntohl(hdr.magic) != TP_BLOB_MAGIC)
		return tp__error(TCPX_P2P_EPROTO, "peer blob has bad magic 0x%08x",
				 ntohl(hdr.magic));
	if (ntohs(hdr.version) != TP_BLOB_VERSION)
		return tp__error(TCPX_P2P_EPROTO, "peer blob version %u, ours %u",
				 ntohs(hdr.version), TP_BLOB_VERSION);
	if (ntohl(hdr.handle_size) != NCCL_NET_HANDLE_MAXSIZE)
		return tp__error(TCPX_P2P_EPROTO, "peer handle size %u, ours %u",
				 ntohl(hdr.handle_size), NCCL_NET_HANDLE_MAXSIZE);
	nchan = ntohs(hdr.nchan);
	if (nchan != (unsigned)want->nchan)
		return tp__error(TCPX_P2P_EPROTO, "peer uses %u channels, we use %d "
				 "(set TCPX_P2P_NUM_CHANNELS alike on both sides)",
				 nchan - 1, want->nchan - 1); /* less the control channel */
	if (ntohl(hdr.chunk_bytes) != want->chunk_bytes)
		return tp__error(TCPX_P2P_EPROTO, "peer chunk is %u bytes, ours %u "
				 "(set TCPX_P2P_CHUNK_BYTES alike on both sides)",
				 ntohl(hdr.chunk_bytes), want->chunk_bytes);
	if (ntohl(hdr.chunks_per_channel) != want->chunks_per_channel)
		return tp__error(TCPX_P2P_EPROTO, "peer cuts a channel's share into up to %u chunks, "
				 "we into %u (set TCPX_P2P_CHUNKS_PER_CHANNEL alike on both sides)",
				 ntohl(hdr.chunks_per_channel), want->chunks_per_channel);
	if (!hdr.max_notifs)
		return tp__error(TCPX_P2P_EPROTO, "peer blob holds no notifications (max_notifs 0)");
	if (hdr.node[sizeof(hdr.node) - 1])
		return tp__error(TCPX_P2P_EPROTO, "peer blob's node id is not NUL-terminated");
	if (strncmp(hdr.plugin, want->plugin, sizeof(hdr.plugin) - 1) != 0)
		return tp__error(TCPX_P2P_EPROTO, "peer uses plugin \"%s\", we use \"%s\"",
				 tp__printable(name, sizeof(name), hdr.plugin, sizeof(hdr.plugin)),
				 want->plugin);
	if (!want->token && len == tp__blob_size((int)nchan, true))
		return tp__error(TCPX_P2P_EPROTO, "peer blob carries a MAC: the peer has an auth "
				 "token (TCPX_P2P_AUTH_TOKEN) and this side has none");
	if (want->token && len == tp__blob_size((int)nchan, false))
		return tp__error(TCPX_P2P_EPROTO, "peer blob carries no MAC: this side requires "
				 "an auth token (TCPX_P2P_AUTH_TOKEN) and the peer has none");
	if (len != tp__blob_size((int)nchan, want->token != NULL))
		return tp__error(TCPX_P2P_EPROTO, "peer blob is %zu bytes, expected %zu", len,
				 tp__blob_size((int)nchan, want->token != NULL));
	if (want->token) {
		unsigned char mac[TP_AUTH_MAC];
		struct tp_auth_part part = { blob, len - TP_AUTH_MAC };
		int rc = tp__auth_mac(want->token, TP_BLOB_LABEL, &part, 1, mac);

		if (rc)
			return rc;
		if (!tp__auth_equal(mac, (const unsigned char *)blob + len - TP_AUTH_MAC))
			return tp__error(TCPX_P2P_EPROTO, "peer blob fails its MAC: altered, or "
					 "made with another TCPX_P2P_AUTH_TOKEN");
	}
	return 0;
}
