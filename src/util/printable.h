/* Peer-supplied strings made safe to log. */
#ifndef TP_UTIL_PRINTABLE_H
#define TP_UTIL_PRINTABLE_H

#include <stddef.h>

/* Copies at most len bytes of src, stopping at a NUL, into dst (capacity
 * cap > 0) as printable ASCII: every other byte becomes '?', and text that
 * does not fit ends in "...".  Returns dst, always NUL-terminated. */
const char *tp__printable(char *dst, size_t cap, const void *src, size_t len);

#endif
