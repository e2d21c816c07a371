/* Pure arithmetic of the transfer engine, kept apart so that unit tests can
 * check it without a plugin: how a transfer is cut into chunks and which
 * channel carries each chunk (the per-comm FIFO window is in window.h, a
 * request's tag in comm.h). */
#ifndef TP_CORE_CHUNK_H
#define TP_CORE_CHUNK_H

#include <stddef.h>
#include <stdint.h>

/* A transfer of len bytes is max(1, ceil(len / chunk)) chunks: a zero-byte
 * transfer still sends one (empty) request so that both sides count it. */
static inline uint64_t tp_chunk_count(size_t len, size_t chunk)
{
	return len == 0 ? 1 : len / chunk + (len % chunk != 0);
}

/* The smallest chunk the even split below makes (where chunk_bytes is no
 * smaller): a request costs a test() round trip, so tiny ones do not pay. */
#define TP_CHUNK_SPLIT_MIN (64u << 10)

/* The smallest piece a channel's share is cut into (chunks_per_channel >
 * 1): NCCL's own step over the network, and a receive that still takes
 * longer than the unpack it overlaps. */
#define TP_CHUNK_DEPTH_MIN (128u << 10)

/* n rounded up to 4 KiB, saturating below SIZE_MAX. */
static inline size_t tp_chunk_round(size_t n)
{
	return n > SIZE_MAX - 4095 ? SIZE_MAX & ~(size_t)4095 : (n + 4095) & ~(size_t)4095;
}

/* The chunk size of one transfer.  Each channel's even share of the
 * transfer (rounded up to 4 KiB, at least TP_CHUNK_SPLIT_MIN) is cut into
 * k = min(depth, share / TP_CHUNK_DEPTH_MIN) even pieces (at least 1, each
 * rounded up to 4 KiB), and no chunk is larger than chunk_bytes: a small
 * transfer still spreads over every channel, a mid-sized one gives each
 * channel several chunks of at least TP_CHUNK_DEPTH_MIN (its next receive
 * overlaps the unpack of the last), a large one gets full-size requests.
 * depth 1 (or 0) is one share per channel.  Both peers compute it from the
 * same len, nchan, chunk_bytes and depth (all four must match). */
static inline size_t tp_chunk_size(size_t len, unsigned nchan, size_t chunk_bytes,
				   unsigned depth)
{
	size_t share = tp_chunk_round(len / nchan + (len % nchan != 0));
	size_t k = share / TP_CHUNK_DEPTH_MIN;

	if (k > depth)
		k = depth;
	if (k > 1)
		share = tp_chunk_round(share / k + (share % k != 0));
	if (share < TP_CHUNK_SPLIT_MIN)
		share = TP_CHUNK_SPLIT_MIN;
	return share < chunk_bytes ? share : chunk_bytes;
}

/* Chunks are numbered per connection and direction (seq); chunk seq
 * travels on channel seq % nchan, so consecutive chunks spread over every
 * channel.  Each item starts on a channel its sender chooses and announces
 * (stream.c, tp__stream_start): its first chunk is the smallest seq at or
 * after the stream's next number that falls on that channel, and the
 * numbers skipped carry nothing.  Both peers number an item identically
 * because items match in announcement order with equal lengths. */
static inline unsigned tp_chunk_channel(uint64_t seq, unsigned nchan)
{
	return (unsigned)(seq % nchan);
}

/* The first seq of an item starting on channel chan (< nchan) when the
 * stream's next number is next (at most nchan - 1 numbers skipped). */
static inline uint64_t tp_chunk_first(uint64_t next, unsigned chan, unsigned nchan)
{
	return next + (chan + nchan - tp_chunk_channel(next, nchan)) % nchan;
}

/* Numbers below seq that fall on channel i (< nchan). */
static inline uint64_t tp_chunk_below(uint64_t seq, unsigned nchan, unsigned i)
{
	return seq / nchan + (i < seq % nchan);
}

/* Chunks of an item (n numbers from first) that travel on channel i. */
static inline uint64_t tp_chunk_on(uint64_t first, uint64_t n, unsigned nchan, unsigned i)
{
	return tp_chunk_below(first + n, nchan, i) - tp_chunk_below(first, nchan, i);
}

/* Byte range of chunk i (0-based within its transfer). */
static inline void tp_chunk_range(size_t len, size_t chunk, uint64_t i, size_t *off,
				  size_t *n)
{
	size_t o = (size_t)i * chunk;
	*off = o;
	*n = o >= len ? 0 : (len - o < chunk ? len - o : chunk);
}

/*
 * Fragments one received chunk can need on a plugin that lands packets in
 * 4 KiB bounce pages (TCPX devmem): a fragment ends at every packet (MSS)
 * and every page boundary, plus a page started per socket task.  TCPX
 * exits the process beyond TP_UNPACK_MAX_PAGES (2048), so the library
 * refuses chunk sizes that could get there at the configured MSS.
 */
#define TP_FRAG_TASK_SLACK 16u
static inline uint64_t tp_chunk_max_frags(uint64_t chunk, uint64_t mss)
{
	return (chunk + mss - 1) / mss + (chunk + 4095) / 4096 + TP_FRAG_TASK_SLACK;
}

#endif
