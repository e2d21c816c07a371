/* The connection blob (docs/architecture.md): what tcpx_p2p_listen
 * publishes and tcpx_p2p_connect takes from the peer. */
#ifndef TP_CORE_BLOB_H
#define TP_CORE_BLOB_H

#include <stddef.h>
#include <stdint.h>

#include "abi/nccl_net.h"

#define TP_BLOB_MAGIC 0x54505842u /* "TPXB" */
#define TP_BLOB_VERSION 1u
#define TP_BLOB_NAME 32

/* Big-endian on the wire; nchan handles of NCCL_NET_HANDLE_MAXSIZE follow. */
struct tp_blob_hdr {
	uint32_t magic;
	uint16_t version;
	uint16_t nchan;
	uint32_t chunk_bytes;
	uint32_t handle_size;
	char plugin[TP_BLOB_NAME];
};

/* What a peer's blob must match. */
struct tp_blob_want {
	int nchan;
	uint32_t chunk_bytes;
	const char *plugin;
};

size_t tp__blob_size(int nchan);
void tp__blob_header(void *blob, int nchan, uint32_t chunk_bytes, const char *plugin);
/* 0, or EPROTO with a detail that says what differs; never reads past len,
 * and peer strings in the detail are sanitised. */
int tp__blob_check(const struct tp_blob_want *want, const void *blob, size_t len);

#endif
