/* The transfer engine's arithmetic: chunking, channel mapping, tags and
 * window accounting (src/core/pipeline/chunk.h, src/core/pipeline/window.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/pipeline/chunk.h"
#include "core/pipeline/window.h"

static void test_chunk_count(void **state)
{
	assert_int_equal(tp_chunk_count(0, 512), 1);
	assert_int_equal(tp_chunk_count(1, 512), 1);
	assert_int_equal(tp_chunk_count(512, 512), 1);
	assert_int_equal(tp_chunk_count(513, 512), 2);
	assert_int_equal(tp_chunk_count(4u << 20, 512u << 10), 8);
	assert_int_equal(tp_chunk_count((4u << 20) + 1, 512u << 10), 9);
	assert_int_equal(tp_chunk_count(SIZE_MAX, 4u << 20), (SIZE_MAX - 1) / (4u << 20) + 1);
}

/* The chunks of a transfer tile it exactly, in order, none over chunk. */
static void test_chunk_ranges_tile(void **state)
{
	const size_t lens[] = { 0, 1, 4095, 4096, 524287, 524288, 524289, 3 * 524288 + 7 };
	const size_t chunks[] = { 1, 4096, 524288, 4u << 20 };
	size_t li, ci, off, n, next;
	uint64_t i, cnt;

	for (li = 0; li < sizeof(lens) / sizeof(lens[0]); li++) {
		for (ci = 0; ci < sizeof(chunks) / sizeof(chunks[0]); ci++) {
			if (lens[li] / chunks[ci] > 100000)
				continue;
			cnt = tp_chunk_count(lens[li], chunks[ci]);
			next = 0;
			for (i = 0; i < cnt; i++) {
				tp_chunk_range(lens[li], chunks[ci], i, &off, &n);
				assert_int_equal(off, next);
				assert_true(n <= chunks[ci]);
				assert_true(n > 0 || lens[li] == 0);
				next = off + n;
			}
			assert_int_equal(next, lens[li]);
		}
	}
}

/* A transfer's chunk: full size for large transfers, an even 4 KiB-rounded
 * share per channel (at least 64 KiB) for smaller ones, never above
 * chunk_bytes. */
static void test_chunk_size(void **state)
{
	const size_t M = 1u << 20, K = 1u << 10;

	assert_int_equal(tp_chunk_size(256 * M, 2, 2 * M, 1), 2 * M);
	assert_int_equal(tp_chunk_size(4 * M, 2, 2 * M, 1), 2 * M);
	assert_int_equal(tp_chunk_size(M, 2, 2 * M, 1), 512 * K);
	assert_int_equal(tp_chunk_count(M, tp_chunk_size(M, 2, 2 * M, 1)), 2);
	assert_int_equal(tp_chunk_size(M + 1, 2, 2 * M, 1), 516 * K);
	assert_int_equal(tp_chunk_size(3 * M, 4, 2 * M, 1), 768 * K);
	assert_int_equal(tp_chunk_size(100 * K, 2, 2 * M, 1), 64 * K);
	assert_int_equal(tp_chunk_size(1, 8, 2 * M, 1), 64 * K);
	assert_int_equal(tp_chunk_size(0, 2, 2 * M, 1), 64 * K);
	assert_int_equal(tp_chunk_size(M, 1, 2 * M, 1), M);
	/* never above chunk_bytes, however small that is */
	assert_int_equal(tp_chunk_size(M, 2, 4096, 1), 4096);
	assert_int_equal(tp_chunk_size(M, 2, 1, 1), 1);
	assert_int_equal(tp_chunk_size(SIZE_MAX, 16, 4 * M, 1), 4 * M);
	/* depth 0 (a zeroed config) is depth 1 */
	assert_int_equal(tp_chunk_size(4 * M, 8, 2 * M, 0), 512 * K);
}

/* chunks_per_channel: a channel's share cut into up to that many even
 * chunks, none under 128 KiB (a share under 256 KiB stays whole), none above
 * chunk_bytes. */
static void test_chunk_depth(void **state)
{
	const size_t M = 1u << 20, K = 1u << 10;

	(void)state;
	/* 8 channels, TCPX's 512 KiB requests, depth 4 */
	assert_int_equal(tp_chunk_size(512 * K, 8, 512 * K, 4), 64 * K);
	assert_int_equal(tp_chunk_size(M, 8, 512 * K, 4), 128 * K);
	assert_int_equal(tp_chunk_size(M + 64 * K, 8, 512 * K, 4), 136 * K); /* not 128 + 8 */
	assert_int_equal(tp_chunk_size(3 * M, 8, 512 * K, 4), 128 * K);      /* 3 a channel */
	assert_int_equal(tp_chunk_size(2400 * K, 8, 512 * K, 4), 152 * K);   /* 300 K: 2 */
	assert_int_equal(tp_chunk_size(2 * M, 8, 512 * K, 4), 128 * K);
	assert_int_equal(tp_chunk_count(2 * M, tp_chunk_size(2 * M, 8, 512 * K, 4)), 16);
	assert_int_equal(tp_chunk_size(4 * M, 8, 512 * K, 4), 128 * K);
	assert_int_equal(tp_chunk_size(8 * M, 8, 512 * K, 4), 256 * K);
	assert_int_equal(tp_chunk_size(16 * M, 8, 512 * K, 4), 512 * K);
	assert_int_equal(tp_chunk_size(256 * M, 8, 512 * K, 4), 512 * K);
	/* the emulator's defaults: 4 channels, 2 MiB */
	assert_int_equal(tp_chunk_size(16 * M, 4, 2 * M, 4), M);
	assert_int_equal(tp_chunk_size(64 * M, 4, 2 * M, 4), 2 * M);
	/* depth 2; an odd share rounds each cut up to 4 KiB */
	assert_int_equal(tp_chunk_size(4 * M, 8, 2 * M, 2), 256 * K);
	assert_int_equal(tp_chunk_size(3 * M + 1, 2, 4 * M, 2), 772 * K);
	/* never above chunk_bytes */
	assert_int_equal(tp_chunk_size(4 * M, 8, 64 * K, 4), 64 * K);
	assert_int_equal(tp_chunk_size(SIZE_MAX, 16, 4 * M, 16), 4 * M);
	assert_int_equal(tp_chunk_size(SIZE_MAX, 1, 4 * M, 1), 4 * M); /* no wrap */
	assert_int_equal(tp_chunk_size(SIZE_MAX, 1, 4 * M, 4), 4 * M);
	/* every cut of every length covers it with at most depth chunks a channel */
	for (size_t len = 0; len <= 64 * M; len += 4093 * 7) {
		for (unsigned depth = 1; depth <= 16; depth *= 2) {
			size_t ch = tp_chunk_size(len, 8, 2 * M, depth);
			size_t share = (len / 8 + 4095) & ~(size_t)4095;

			assert_true(ch >= 64 * K && ch <= 2 * M);
			assert_true(ch % 4096 == 0);
			if (share < 64 * K)
				share = 64 * K;
			if (share >= 256 * K && depth > 1 && share / depth <= 2 * M)
				assert_true(ch >= 128 * K); /* cut, never below the floor */
			if (share <= 2 * M * (size_t)depth) /* about depth a channel, at most */
				assert_true(tp_chunk_count(len, ch) <= 8 * (uint64_t)depth);
		}
	}
}


/* Both peers derive the same channel for every chunk from the sequence
 * alone; consecutive chunks use every channel in turn and each channel
 * sees its chunks in increasing order.  (A request's tag is its index on
 * its comm: tp_comm_tag, comm.h.) */
static void test_channel_and_tag(void **state)
{
	unsigned nchan, c, count[16];
	uint64_t seq, last[16];

	for (nchan = 1; nchan <= 16; nchan++) {
		for (c = 0; c < nchan; c++) {
			count[c] = 0;
			last[c] = 0;
		}
		for (seq = 0; seq < 10 * nchan; seq++) {
			c = tp_chunk_channel(seq, nchan);
			assert_true(c < nchan);
			assert_true(count[c] == 0 || seq > last[c]);
			last[c] = seq;
			count[c]++;
		}
		for (c = 0; c < nchan; c++)
			assert_int_equal(count[c], 10);
	}
}

/* An item starting on channel chan gets the first number at or after the
 * stream's next one on that channel, skipping fewer than nchan; the
 * numbers below seq on each channel add up to seq and match a count. */
static void test_first_and_below(void **state)
{
	unsigned nchan, chan, i;
	uint64_t next, first, sum, n;

	(void)state;
	for (nchan = 1; nchan <= 16; nchan++) {
		for (next = 0; next < 3 * nchan; next++) {
			for (chan = 0; chan < nchan; chan++) {
				first = tp_chunk_first(next, chan, nchan);
				assert_true(first >= next && first - next < nchan);
				assert_int_equal(tp_chunk_channel(first, nchan), chan);
			}
			sum = 0;
			for (i = 0; i < nchan; i++) {
				n = 0;
				for (uint64_t s = 0; s < next; s++)
					n += tp_chunk_channel(s, nchan) == i;
				assert_int_equal(tp_chunk_below(next, nchan, i), n);
				sum += n;
			}
			assert_int_equal(sum, next);
		}
	}
	/* Far from 0 (a long-lived connection): no wrap. */
	first = tp_chunk_first(UINT64_MAX - 20, 3, 16);
	assert_int_equal(tp_chunk_channel(first, 16), 3);
	assert_true(first >= UINT64_MAX - 20);
}

/* posted - retired never exceeds the limit, across counter wrap-around. */
static void test_window(void **state)
{
	struct tp_window w = { .limit = 16 };
	uint32_t start = UINT32_MAX - 40, k;
	int i;

	w.posted = w.tested = w.unpacked = w.retired = start;
	for (i = 0; i < 16; i++) {
		assert_true(tp_window_can_post(&w));
		w.posted++;
	}
	assert_false(tp_window_can_post(&w));
	assert_int_equal(tp_window_inflight(&w), 16);
	/* tested and unpacked requests still hold their slots */
	w.tested += 16;
	w.unpacked += 16;
	assert_false(tp_window_can_post(&w));
	w.retired++;
	assert_true(tp_window_can_post(&w));
	for (i = 0; i < 200; i++) {
		w.posted++;
		w.tested = w.unpacked = w.retired = w.posted - 15;
		assert_int_equal(tp_window_inflight(&w), 15);
		assert_true(tp_window_can_post(&w));
	}
	w.limit = 1;
	w.retired = w.posted;
	assert_true(tp_window_can_post(&w));
	w.posted++;
	assert_false(tp_window_can_post(&w));
	for (k = 0; k < 64; k++)
		assert_int_equal(tp_window_slot(start + k), (start + k) % 16);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_chunk_count),
		cmocka_unit_test(test_chunk_ranges_tile),
		cmocka_unit_test(test_chunk_size),
		cmocka_unit_test(test_chunk_depth),
		cmocka_unit_test(test_channel_and_tag),
		cmocka_unit_test(test_first_and_below),
		cmocka_unit_test(test_window),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
