/* libFuzzer target: the reader of the plugin's unpack meta ring
 * (src/device/unpack_meta.c), fed hostile slots.  Input: u32 chunk length,
 * u32 slot, u64 bounce length, u64 count, then records of 16 bytes
 * ({u32 src_off, u32 len, u64 dst_off}, little-endian) into that slot.
 * Whatever it accepts must be inside the chunk and the bounce buffer; a
 * breach aborts, which the fuzzer reports as a crash. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "device/tp_device.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct tp_unpack_meta meta;
	struct tp_meta_view v;
	uint32_t chunk_len, slot;
	uint64_t bounce_len, cnt, bytes = 0;
	size_t nrec;

	if (size < 24)
		return 0;
	memcpy(&chunk_len, data, 4);
	memcpy(&slot, data + 4, 4);
	memcpy(&bounce_len, data + 8, 8);
	memcpy(&cnt, data + 16, 8);
	slot %= TP_UNPACK_QUEUE_DEPTH;
	nrec = (size - 24) / sizeof(tp_unpack_rec);
	if (nrec > TP_UNPACK_MAX_PAGES)
		nrec = TP_UNPACK_MAX_PAGES;
	memset(meta.mem[slot], 0, sizeof(meta.mem[slot]));
	memcpy(meta.mem[slot], data + 24, nrec * sizeof(tp_unpack_rec));
	meta.cnt[slot] = cnt;
	if (tp__meta_read(&meta, slot, chunk_len, bounce_len, "fuzz", &v))
		return 0;
	if (v.cnt != cnt || v.cnt > TP_UNPACK_MAX_PAGES || v.rec != meta.mem[slot])
		abort();
	for (uint32_t i = 0; i < v.cnt; i++) {
		tp_unpack_rec r = v.rec[i];

		if (r.len > TP_UNPACK_PAGE_SIZE || r.dst_off + r.len > chunk_len ||
		    (uint64_t)r.src_off + r.len > bounce_len)
			abort();
		bytes += r.len;
	}
	if (bytes != v.bytes)
		abort();
	return 0;
}
