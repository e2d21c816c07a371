/* libFuzzer target: the blob check (src/core/setup/blob.c) and, for blobs that
 * pass it, the handle scrub (src/net/handle.c) every peer handle meets.
 * The first byte picks the expectation: channels, token, plugin. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/setup/blob.h"
#include "net/net.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const plugins[] = { "TCPXEmu_v7", "GPUDirectTCPX_v7", "Socket",
					       "Other" };
	static unsigned char handle[NCCL_NET_HANDLE_MAXSIZE];
	struct tp_blob_want want;
	int i, off;

	if (size < 1)
		return 0;
	want.nchan = 1 + (data[0] & 3);
	want.chunk_bytes = 524288;
	want.chunks_per_channel = 4;
	want.plugin = plugins[(data[0] >> 2) & 3];
	want.token = (data[0] & 0x10) ? "fuzz-token-0123456789" : NULL;
	data++;
	size--;
	if (tp__blob_check(&want, data, size))
		return 0;
	for (i = 0; i < want.nchan; i++) {
		memcpy(handle, data + sizeof(struct tp_blob_hdr) + (size_t)i * sizeof(handle),
		       sizeof(handle));
		tp__net_handle_scrub(want.plugin, handle, &off);
	}
	return 0;
}
