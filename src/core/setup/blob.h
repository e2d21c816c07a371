/* The connection blob (docs/architecture.md): what tcpx_p2p_listen
 * publishes and tcpx_p2p_connect takes from the peer. */
#ifndef TP_CORE_BLOB_H
#define TP_CORE_BLOB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "abi/nccl_net.h"

#define TP_BLOB_MAGIC 0x54505842u /* "TPXB" */
/* 5: the close handshake (CLOSE on the control channel); 6: notification
 * credits (max_notifs below, CREDIT on the control channel); 7: HEARTBEAT
 * on the control channel (an older peer would refuse it mid-stream) and
 * max_notif_bytes (notifications longer than 1 KiB); 8: chunks_per_channel
 * (the chunk sizes both sides compute depend on it); 9: an item's first
 * channel in the control message header, requests tagged with their index
 * on their comm; 10: CANCEL on the control channel, ACK status CANCELED;
 * 11: epoch, the sender's session's incarnation (a restarted peer has
 * another); 12: node, the sender's session's stable identity (a listener
 * recognises a restarted dialler by it). */
#define TP_BLOB_VERSION 12u
#define TP_BLOB_NAME 32

/* Big-endian on the wire; nchan handles of NCCL_NET_HANDLE_MAXSIZE follow
 * (the data channels, then the control channel). */
struct tp_blob_hdr {
	uint32_t magic;
	uint16_t version;
	uint16_t nchan;
	uint32_t chunk_bytes;
	uint32_t handle_size;
	char plugin[TP_BLOB_NAME];
	uint32_t max_notifs; /* its peer_max_notifs: the notifications we may send it */
	uint32_t max_notif_bytes; /* its notif_max_bytes: the longest one it takes */
	uint32_t chunks_per_channel;
	uint32_t epoch_hi, epoch_lo; /* its session's incarnation: random per session */
	char node[TP_BLOB_NAME];     /* its session's node id ("": none), NUL-padded */
};

/* What a peer's blob must match.  With a token, blobs end in an
 * HMAC-SHA256 of everything before it (TP_AUTH_MAC bytes). */
struct tp_blob_want {
	int nchan;
	uint32_t chunk_bytes;
	uint32_t chunks_per_channel;
	const char *plugin;
	const char *token; /* NULL: none */
};

/* Bytes of a blob of nchan handles, with the MAC when mac is set. */
size_t tp__blob_size(int nchan, bool mac);
/* Append the MAC to a blob of len bytes (the buffer has room for it). */
int tp__blob_seal(const char *token, unsigned char *blob, size_t len);
void tp__blob_header(void *blob, int nchan, uint32_t chunk_bytes, uint32_t chunks_per_channel,
		     const char *plugin,
		     uint32_t max_notifs, uint32_t max_notif_bytes, uint64_t epoch,
		     const char *node);
/* The notifications a checked blob's owner holds for us (its max_notifs),
 * and the longest it takes (its max_notif_bytes). */
uint32_t tp__blob_max_notifs(const void *blob);
uint32_t tp__blob_max_notif_bytes(const void *blob);
/* A checked blob's epoch: its owner's session incarnation. */
uint64_t tp__blob_epoch(const void *blob);
/* A checked blob's node id, NUL-terminated into out ("": none). */
void tp__blob_node(const void *blob, char out[TP_BLOB_NAME]);
/* 0, or EPROTO with a detail that says what differs; never reads past len,
 * and peer strings in the detail are sanitised. */
int tp__blob_check(const struct tp_blob_want *want, const void *blob, size_t len);

#endif
