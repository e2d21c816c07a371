/* Bytes from the network reach logs and error details only through here:
 * no control characters (terminal escapes, forged log lines), no
 * unterminated reads, a bounded length. */
#include <string.h>

#include "util/printable.h"

const char *tp__printable(char *dst, size_t cap, const void *src, size_t len)
{
	const unsigned char *s = src;
	size_t i, n = 0;

	if (!cap)
		return dst;
	for (i = 0; s && i < len && s[i]; i++) {
		if (n + 1 >= cap) {
			if (cap > 4)
				memcpy(dst + cap - 4, "...", 3);
			n = cap > 4 ? cap - 1 : n;
			break;
		}
		dst[n++] = s[i] >= 0x20 && s[i] < 0x7f ? (char)s[i] : '?';
	}
	dst[n] = '\0';
	return dst;
}
