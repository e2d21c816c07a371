/* The simulator's page pool, token table and packet cutting
 * (tools/tcpxsim/pool.c), without sockets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pool.h"

static void test_pool_scatters_and_exhausts(void **state)
{
	struct sim_pool p;
	uint32_t page, seen[64] = {0}, in_order = 1;
	assert_int_equal(sim_pool_init(&p, 64, 7), 0);
	for (uint32_t i = 0; i < 64; i++) {
		assert_int_equal(sim_pool_take(&p, &page), 0);
		assert_true(page < 64);
		assert_int_equal(seen[page], 0);
		seen[page] = 1;
		if (page != i)
			in_order = 0;
	}
	assert_false(in_order); /* a receive lands out of order */
	assert_int_equal(sim_pool_take(&p, &page), -1);
	assert_int_equal(sim_pool_put(&p, 5), 1);
	assert_int_equal(sim_pool_take(&p, &page), 0);
	assert_int_equal(page, 5);
	sim_pool_fini(&p);
}

struct freed {
	int n;
	uint32_t page[8];
};

static void count_freed(void *arg, uint32_t page)
{
	struct freed *f = arg;
	f->page[f->n++] = page;
}

static void test_tokens_return_all_or_none(void **state)
{
	struct sim_pool p;
	struct sim_tokens t;
	uint32_t tok[8], page, bad = 0;
	struct freed freed = {0};
	assert_int_equal(sim_pool_init(&p, 8, 1), 0);
	assert_int_equal(sim_tokens_init(&t, 16), 0);
	for (int i = 0; i < 8; i++) {
		assert_int_equal(sim_pool_take(&p, &page), 0);
		assert_int_equal(sim_tokens_add(&t, page, &tok[i]), 0);
		assert_int_equal(tok[i], (uint32_t)i); /* cyclic from 0 */
	}
	assert_int_equal(p.nfree, 0);

	/* A range reaching a token never given fails, and returns nothing. */
	struct devmem_token_range r1[] = {{0, 2}, {7, 2}};
	assert_int_equal(sim_tokens_return(&t, &p, r1, 2, &bad, count_freed, &freed), -22);
	assert_int_equal(bad, 8);
	assert_int_equal(t.held, 8);
	assert_int_equal(freed.n, 0);

	/* A token named twice in one call fails the same way. */
	struct devmem_token_range r2[] = {{1, 3}, {3, 1}};
	assert_int_equal(sim_tokens_return(&t, &p, r2, 2, &bad, count_freed, &freed), -22);
	assert_int_equal(bad, 3);
	assert_int_equal(t.held, 8);

	/* A range past the table, or wrapping, fails. */
	struct devmem_token_range r3[] = {{4, UINT32_MAX}};
	assert_int_equal(sim_tokens_return(&t, &p, r3, 1, &bad, NULL, NULL), -22);
	assert_int_equal(t.held, 8);

	/* Good ranges return their pages: to the caller first (to poison
	 * them), to the pool when it gives them back. */
	struct devmem_token_range r4[] = {{0, 3}, {5, 1}};
	assert_int_equal(sim_tokens_return(&t, &p, r4, 2, &bad, count_freed, &freed), 0);
	assert_int_equal(freed.n, 4);
	assert_int_equal(t.held, 4);
	assert_int_equal(p.nfree, 0);
	for (int i = 0; i < freed.n; i++)
		sim_pool_free(&p, freed.page[i]);
	assert_int_equal(p.nfree, 4);

	/* ... once: a double return is refused. */
	struct devmem_token_range r5[] = {{5, 1}};
	assert_int_equal(sim_tokens_return(&t, &p, r5, 1, &bad, NULL, NULL), -22);
	assert_int_equal(bad, 5);

	/* New tokens continue cyclically, skipping held ones. */
	assert_int_equal(sim_pool_take(&p, &page), 0);
	assert_int_equal(sim_tokens_add(&t, page, &tok[0]), 0);
	assert_int_equal(tok[0], 8);

	sim_tokens_drop_all(&t, &p);
	assert_int_equal(t.held, 0);
	assert_int_equal(p.nfree, 8);
	sim_tokens_fini(&t);
	sim_pool_fini(&p);
}

static void test_tokens_full_and_wrap(void **state)
{
	struct sim_pool p;
	struct sim_tokens t;
	uint32_t page, tok, bad;
	assert_int_equal(sim_pool_init(&p, 4, 1), 0);
	assert_int_equal(sim_tokens_init(&t, 4), 0);
	for (int round = 0; round < 10; round++) {
		assert_int_equal(sim_pool_take(&p, &page), 0);
		assert_int_equal(sim_tokens_add(&t, page, &tok), 0);
		assert_int_equal(tok, (uint32_t)(round % 4));
		struct devmem_token_range r = {tok, 1};
		assert_int_equal(sim_tokens_return(&t, &p, &r, 1, &bad, NULL, NULL), 0);
	}
	for (int i = 0; i < 4; i++) {
		assert_int_equal(sim_pool_take(&p, &page), 0);
		assert_int_equal(sim_tokens_add(&t, page, &tok), 0);
	}
	assert_int_equal(sim_tokens_add(&t, 0, &tok), -1);
	sim_tokens_drop_all(&t, &p);
	sim_tokens_fini(&t);
	sim_pool_fini(&p);
}

/* Packets of mss bytes, each from a fresh page, cut at page ends; a read
 * that stops inside a page leaves the page open for the next one. */
static void test_cut(void **state)
{
	static const uint32_t mss[] = {1, 64, 1448, 4096, 8192, 9000};
	static const size_t reads[] = {1, 100, 4095, 4096, 5000, 65536};
	for (size_t m = 0; m < sizeof(mss) / sizeof(mss[0]); m++) {
		for (size_t r = 0; r < sizeof(reads) / sizeof(reads[0]); r++) {
			struct sim_cut c = {0};
			const size_t len = 100000;
			size_t off = 0, fresh_pages = 0, in_page = 0;
			while (off < len) {
				size_t run = len - off < reads[r] ? len - off : reads[r];
				size_t end = off + run;
				assert_int_equal(sim_cut_fit(&c, mss[m], run, 1u << 20, 1u << 20), run);
				while (off < end) {
					int fresh;
					uint32_t n = sim_cut_peek(&c, mss[m], end - off, &fresh);
					assert_true(n > 0 && n <= DEVMEM_PAGE);
					/* never across a packet's end */
					assert_true(off / mss[m] == (off + n - 1) / mss[m]);
					/* a fresh page exactly where a packet or a page starts */
					in_page = fresh ? 0 : in_page;
					if (fresh)
						assert_true(off % mss[m] % DEVMEM_PAGE == 0);
					assert_true(in_page + n <= DEVMEM_PAGE);
					sim_cut_take(&c, mss[m], n, fresh, (uint32_t)fresh_pages);
					fresh_pages += (size_t)fresh;
					in_page += n;
					off += n;
				}
			}
			/* pages used do not depend on how the stream was read */
			size_t per_packet = (mss[m] + DEVMEM_PAGE - 1) / DEVMEM_PAGE;
			size_t full = len / mss[m], rest = len % mss[m];
			assert_int_equal(fresh_pages, full * per_packet +
							 (rest + DEVMEM_PAGE - 1) / DEVMEM_PAGE);
		}
	}
	struct sim_cut c = {0};
	assert_int_equal(sim_cut_fit(&c, 8192, 100000, 2048, 1u << 20), 100000);
	assert_int_equal(sim_cut_fit(&c, 64, 1u << 20, 2048, 1u << 20), 2048 * 64);
	assert_int_equal(sim_cut_fit(&c, 9000, 1u << 20, 3, 1u << 20), 9000);
	assert_int_equal(sim_cut_fit(&c, 9000, 1u << 20, 4, 1u << 20), 9000 + 4096);
	assert_int_equal(sim_cut_fit(&c, 9000, 1u << 20, 0, 1u << 20), 0);
	assert_int_equal(sim_cut_fit(&c, 8192, 1u << 20, 2048, 3), 3 * 4096);
	/* the fresh pages a fit opens */
	assert_int_equal(sim_cut_fresh(&c, 8192, 3 * 4096), 3);
	assert_int_equal(sim_cut_fresh(&c, 9000, 9000 + 1), 4);
	assert_int_equal(sim_cut_fresh(&c, 64, 2048 * 64), 2048);
	/* an open page continues without a fresh one */
	sim_cut_take(&c, 8192, 100, 1, 7);
	assert_int_equal(sim_cut_fit(&c, 8192, 1u << 20, 2048, 0), 4096 - 100);
	assert_int_equal(sim_cut_fresh(&c, 8192, 4096 - 100), 0);
	assert_int_equal(sim_cut_fresh(&c, 8192, 4096), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pool_scatters_and_exhausts),
		cmocka_unit_test(test_tokens_return_all_or_none),
		cmocka_unit_test(test_tokens_full_and_wrap),
		cmocka_unit_test(test_cut),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
