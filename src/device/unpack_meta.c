/* The plugin's unpack meta ring, read in one place.  Its records are
 * untrusted: TCPX replaces a receive's size with the sender's, so a peer
 * sending more than was posted gets records past the chunk.  Plain C,
 * built with and without CUDA. */
#include "tp_device.h"
#include "util/error.h"

int tp__meta_check(const tp_unpack_rec *rec, uint64_t cnt, uint32_t chunk_len,
		   uint64_t bounce_len, const char *what, struct tp_meta_view *v)
{
	uint64_t bytes = 0;

	if (cnt > TP_UNPACK_MAX_PAGES)
		return tp__error(TCPX_P2P_EPLUGIN, "%s: %llu records in one receive", what,
				 (unsigned long long)cnt);
	for (uint64_t i = 0; i < cnt; i++) {
		tp_unpack_rec r = rec[i]; /* each record read once */

		if (r.len > TP_UNPACK_PAGE_SIZE || r.dst_off > chunk_len ||
		    r.len > chunk_len - r.dst_off || r.src_off > bounce_len ||
		    r.len > bounce_len - r.src_off)
			return tp__error(TCPX_P2P_EPLUGIN, "%s: record %llu (dst %llu, len %u) "
					 "outside the %u-byte chunk", what, (unsigned long long)i,
					 (unsigned long long)r.dst_off, r.len, chunk_len);
		bytes += r.len;
	}
	v->rec = rec;
	v->cnt = (uint32_t)cnt;
	v->bytes = bytes;
	return 0;
}

int tp__meta_read(const struct tp_unpack_meta *m, unsigned slot, uint32_t chunk_len,
		  uint64_t bounce_len, const char *what, struct tp_meta_view *v)
{
	/* The plugin publishes the count before test() reports the receive
	 * done; it is read once, here, whatever uses the records after. */
	uint64_t cnt = *(const volatile uint64_t *)&m->cnt[slot];

	return tp__meta_check(m->mem[slot], cnt, chunk_len, bounce_len, what, v);
}
