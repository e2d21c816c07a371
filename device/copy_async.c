/* The copy list as cudaMemcpyAsync calls: the variant for pageable host
 * memory, which no kernel can reach.  The host reads the list. */
#include "dev_priv.h"
#include "util/error.h"

int tp__dev_copy_async(tp_dev_stream *s, const struct tp_copy *list, uint32_t n)
{
	const char *src = NULL;
	char *dst = NULL;
	size_t len = 0; /* the run of entries not yet issued */
	int err = 0;

	for (uint32_t i = 0; i < n && !err; i++) {
		struct tp_copy c = list[i];

		if (!c.len)
			continue;
		/* A range callers split for the kernel's balance is one call
		 * here: a call costs microseconds, whatever its size. */
		if (len && c.src == src + len && c.dst == dst + len) {
			len += c.len;
			continue;
		}
		if (len)
			err = TP_CUDA(cudaMemcpyAsync, dst, src, len, cudaMemcpyDefault, s->st);
		src = c.src;
		dst = c.dst;
		len = c.len;
	}
	if (!err && len)
		err = TP_CUDA(cudaMemcpyAsync, dst, src, len, cudaMemcpyDefault, s->st);
	return err;
}
