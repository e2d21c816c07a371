/* What the files of test_kv share (test_kv.c says what it tests). */
#ifndef TP_TEST_KV_H
#define TP_TEST_KV_H

#include <stddef.h>
#include <stdint.h>

#include "pair.h"

extern int g_cuda;
extern uint64_t g_seed;

#define DEADLINE_S 30.0

struct rng {
	uint64_t s;
};

struct region {
	tcpx_p2p_session *s;
	unsigned char *p;      /* the memory (device memory in CUDA mode) */
	unsigned char *shadow; /* host: what p must hold */
	size_t len;
	tcpx_p2p_mr *mr;       /* NULL once deregistered */
};

#define MAX_REGIONS 16

struct fx {
	struct tp_pair p; /* s[0]/c[0]: initiator and sender; s[1]/c[1]: target */
	tcpx_p2p_session *s2; /* a second initiator (case 6) */
	tcpx_p2p_conn *c2[2]; /* s2's conn, the target's conn to s2 */
	struct region *reg[MAX_REGIONS];
	int nreg;
	struct rng rng;
	size_t chunk_bytes;
	int nchan;
	int depth; /* chunks_per_channel */
	long pause_us; /* drive() sleeps this long after its pass (kv_first.c) */
};

struct result {
	int rc;
	char why[320];
};

enum shape { SH_MIXED, SH_TINY, SH_LARGE, SH_CHUNKY };

struct segl {
	size_t n, cap;
	size_t *len, *off;
	size_t span; /* bytes the layout needs */
};

#define BLK 16389u /* odd: blocks straddle chunks and pages everywhere */

struct kv {
	struct region *pool, *loc;
	size_t eo, elen, blk; /* the export: [eo, eo + elen) of pool, blocks of blk */
	tcpx_p2p_rdesc d;
	tcpx_p2p_rmr *rm;     /* imported on c[0] */
};

/* kv_fixture.c */
double now_s(void);
uint64_t rnd(struct rng *r);
size_t below(struct rng *r, size_t n);
size_t between(struct rng *r, size_t lo, size_t hi); /* [lo, hi] */
void shuffle(struct rng *r, size_t *v, size_t n);
void dev_put(struct region *r, size_t off, size_t n);
const unsigned char *dev_get(const struct region *r, size_t off, size_t n,
			     unsigned char *tmp);
struct region *region_new(struct fx *f, tcpx_p2p_session *s, size_t len, uint64_t seed);
void region_free(struct region *r);
void verify_range(const struct region *r, size_t off, size_t n, const char *what);
void verify(const struct region *r, const char *what);
void expect_copy(struct region *dst, size_t doff, const struct region *src, size_t soff,
		 size_t n);
int open_fx(void **state, int threaded);
int setup(void **state);
int setup_threaded(void **state);
int teardown(void **state);
void drive(struct fx *f);
void complete(struct fx *f, tcpx_p2p_xfer **x, int n, struct result *res);
void complete_ok(struct fx *f, tcpx_p2p_xfer **x, int n);
void complete1_ok(struct fx *f, tcpx_p2p_xfer *x);
struct result complete1(struct fx *f, tcpx_p2p_xfer *x);
void notif_take(struct fx *f, tcpx_p2p_session *s, tcpx_p2p_notif *out);
void notif_none(struct fx *f, tcpx_p2p_session *s);
void notif_expect(const tcpx_p2p_notif *nt, tcpx_p2p_conn *c, const void *msg, size_t len);
int post_write(tcpx_p2p_conn *c, const tcpx_p2p_seg *l, size_t nl, const tcpx_p2p_rseg *r,
	       size_t nr, const void *notif, size_t notif_len, tcpx_p2p_xfer **x);

/* kv_layout.c */
void segl_add(struct segl *l, size_t len);
void segl_free(struct segl *l);
size_t xfer_chunk(const struct fx *f, size_t len);
void cut(struct fx *f, struct segl *l, size_t total, enum shape sh);
void place(struct fx *f, struct segl *l, size_t mingap, size_t maxgap);
tcpx_p2p_seg *segs_of(const struct segl *l, const struct region *r);
void expect_stream(struct region *dst, const struct segl *dl, const struct region *src,
		   const struct segl *sl);

/* kv_pool.c */
void kv_open(struct fx *f, struct kv *k, size_t nb, size_t nl, size_t blk, unsigned access,
	     uint64_t seed);
void kv_close(struct kv *k);
void pick(struct fx *f, size_t *out, size_t n, size_t max, int distinct);
int kv_write_via(struct kv *k, tcpx_p2p_conn *c, const tcpx_p2p_rmr *rm,
		 const size_t *lid, const size_t *rid, size_t n, const void *notif,
		 size_t notif_len, int expect, tcpx_p2p_xfer **x);
int kv_write(struct fx *f, struct kv *k, const size_t *lid, const size_t *rid, size_t n,
	     const void *notif, size_t notif_len, tcpx_p2p_xfer **x);
void good_write(struct fx *f, struct kv *k);
void put_le(unsigned char *p, uint64_t v, int n);
tcpx_p2p_rmr *import_forged(struct fx *f, const tcpx_p2p_rdesc *d, int at, uint64_t v,
			    int n);
uint64_t get_le(const unsigned char *p, int n);

/* the cases (test_kv.c runs them) */
void test_vec_shapes(void **state);
void test_vec_empty(void **state);
void test_mixed(void **state);
void test_total_mismatch(void **state);
void test_mixed_one_sided(void **state);
void test_two_initiators(void **state);
void test_foreign_descriptor(void **state);
void test_threaded_target(void **state);
void test_read(void **state);
void test_many_batches(void **state);
void test_refusals(void **state);
void test_write_notif(void **state);
void test_notif_order(void **state);
void test_target_killed(void **state);
void test_first_chunks_unattended(void **state);
void test_prep_lists(void **state);
void test_prep_strided(void **state);
void test_prep_refusals(void **state);
void test_prep_threads(void **state);

#endif
