/*
 * kv_write: the KV-cache hand-off of disaggregated inference with the
 * one-sided API, in one process over 127.0.0.1 and host memory.
 *
 *   decode  (main thread)  owns a KV pool of LAYERS x {K, V} arrays of
 *                          POOL_BLOCKS blocks.  It allocates blocks for a
 *                          request, exports the pool to the prefill side
 *                          with their ids, polls for the notification and
 *                          checks the blocks.  It posts nothing for the data.
 *   prefill (a thread)     holds the request's KV in its blocks 0..N-1 of
 *                          every array and writes all of them into the
 *                          decode pool with ONE tcpx_p2p_write: a local and
 *                          a remote segment per block, plus a notification.
 *
 * Each side has a session of its own, as two processes would.  Prints
 * "kv_write: ok" and exits 0 when every block is where it belongs.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tcpx_p2p.h>

#define LAYERS 4
#define ARRAYS (2 * LAYERS)   /* K and V of every layer */
#define BLOCK (16u << 10)     /* bytes per block */
#define POOL_BLOCKS 64        /* blocks per array */
#define REQ_BLOCKS 8          /* the request's blocks in each array */
#define POOL_BYTES ((size_t)ARRAYS * POOL_BLOCKS * BLOCK)
#define NSEGS (ARRAYS * REQ_BLOCKS)
#define TIMEOUT_MS 30000

static const char note_text[] = "request 1 ready";

/* What decode tells prefill, two-sided: where the request's KV goes. */
struct kv_offer {
	tcpx_p2p_rdesc pool;        /* decode's pool, exported for writing */
	uint32_t block[REQ_BLOCKS]; /* the blocks allocated for the request */
};

static int fail(const char *who, const char *what, int rc)
{
	fprintf(stderr, "kv_write: %s: %s: %s (%s)\n", who, what, tcpx_p2p_strerror(rc),
		tcpx_p2p_last_error());
	return rc ? rc : -1;
}

static size_t block_off(int array, uint32_t block)
{
	return ((size_t)array * POOL_BLOCKS + block) * BLOCK;
}

/* Byte i of the request's j-th block of array a. */
static unsigned char kv_byte(int a, int j, size_t i)
{
	return (unsigned char)(a * 131 + j * 31 + i * 7 + (i >> 8));
}

static int host_session(tcpx_p2p_session **s)
{
	tcpx_p2p_config cfg;
	int rc = tcpx_p2p_config_init(&cfg);

	cfg.gpu = -1;
	return rc ? rc : tcpx_p2p_session_create(&cfg, s);
}

/* Wait for x and free it. */
static int finish(tcpx_p2p_xfer *x)
{
	int rc = tcpx_p2p_wait(x, TIMEOUT_MS);

	if (rc != TCPX_P2P_ETIMEDOUT)
		tcpx_p2p_xfer_release(x);
	return rc;
}

/* The prefill side: dial, learn where to write, write, done. */
static int prefill(uint16_t port)
{
	tcpx_p2p_xfer_params params = { .struct_size = sizeof(params),
					.notif = note_text, .notif_len = sizeof(note_text) };
	static tcpx_p2p_seg local[NSEGS];
	static tcpx_p2p_rseg remote[NSEGS];
	tcpx_p2p_session *s;
	tcpx_p2p_conn *c;
	tcpx_p2p_mr *kv_mr, *offer_mr;
	tcpx_p2p_rmr *pool;
	tcpx_p2p_xfer *x;
	struct kv_offer *offer = aligned_alloc(4096, 4096);
	unsigned char *kv = aligned_alloc(4096, POOL_BYTES);
	int rc, a, j, k;
	size_t i;

	if (!offer || !kv)
		return fail("prefill", "buffers", TCPX_P2P_ENOMEM);
	for (a = 0; a < ARRAYS; a++) /* "computed" into blocks 0..REQ_BLOCKS-1 */
		for (j = 0; j < REQ_BLOCKS; j++)
			for (i = 0; i < BLOCK; i++)
				kv[block_off(a, (uint32_t)j) + i] = kv_byte(a, j, i);
	if ((rc = host_session(&s)) ||
	    (rc = tcpx_p2p_mr_register(s, kv, POOL_BYTES, TCPX_P2P_MEM_HOST, &kv_mr)) ||
	    (rc = tcpx_p2p_mr_register(s, offer, 4096, TCPX_P2P_MEM_HOST, &offer_mr)) ||
	    (rc = tcpx_p2p_dial(s, "127.0.0.1", port, TIMEOUT_MS, &c)))
		return fail("prefill", "set-up", rc);
	if ((rc = tcpx_p2p_recv(c, offer_mr, 0, sizeof(*offer), &x)) || (rc = finish(x)) ||
	    (rc = tcpx_p2p_rmr_import(c, &offer->pool, &pool)))
		return fail("prefill", "the offer", rc);
	for (a = 0, k = 0; a < ARRAYS; a++)
		for (j = 0; j < REQ_BLOCKS; j++, k++) {
			local[k] = (tcpx_p2p_seg){ kv_mr, block_off(a, (uint32_t)j), BLOCK };
			remote[k] = (tcpx_p2p_rseg){ pool, block_off(a, offer->block[j]), BLOCK };
		}
	/* Complete = every byte is in decode's pool and the note delivered. */
	if ((rc = tcpx_p2p_write(c, local, NSEGS, remote, NSEGS, &params, &x)) || (rc = finish(x)))
		return fail("prefill", "write", rc);
	if ((rc = tcpx_p2p_conn_barrier(c, TIMEOUT_MS)))
		return fail("prefill", "barrier", rc);
	tcpx_p2p_rmr_release(pool);
	tcpx_p2p_conn_destroy(c);
	tcpx_p2p_mr_deregister(offer_mr);
	tcpx_p2p_mr_deregister(kv_mr);
	free(kv);
	free(offer);
	return tcpx_p2p_session_destroy(s);
}

struct prefill_arg {
	uint16_t port; /* decode's rendezvous port */
	int rc;
};

static void *prefill_thread(void *p)
{
	struct prefill_arg *arg = p;

	arg->rc = prefill(arg->port);
	return NULL;
}

/* The decode side: offer blocks, wait for the note, check the pool. */
static int decode(void)
{
	static tcpx_p2p_notif note;
	tcpx_p2p_session *s;
	tcpx_p2p_server *srv;
	tcpx_p2p_conn *c;
	tcpx_p2p_mr *pool_mr, *offer_mr;
	tcpx_p2p_xfer *x;
	struct kv_offer *offer = aligned_alloc(4096, 4096);
	unsigned char *pool = calloc(1, POOL_BYTES), *b;
	time_t give_up = time(NULL) + TIMEOUT_MS / 1000;
	struct prefill_arg arg = { 0, -1 };
	int rc, a, j, n = 0, owner[POOL_BLOCKS];
	size_t i, bad = 0;
	pthread_t th;

	if (!offer || !pool)
		return fail("decode", "buffers", TCPX_P2P_ENOMEM);
	if ((rc = host_session(&s)) ||
	    (rc = tcpx_p2p_server_create(s, "127.0.0.1", 0, &srv)) ||
	    (rc = tcpx_p2p_server_port(srv, &arg.port)))
		return fail("decode", "set-up", rc);
	if (pthread_create(&th, NULL, prefill_thread, &arg))
		return fail("decode", "pthread_create", 0);
	if ((rc = tcpx_p2p_server_accept(srv, TIMEOUT_MS, &c)) ||
	    (rc = tcpx_p2p_mr_register(s, pool, POOL_BYTES, TCPX_P2P_MEM_HOST, &pool_mr)) ||
	    (rc = tcpx_p2p_mr_register(s, offer, 4096, TCPX_P2P_MEM_HOST, &offer_mr)))
		return fail("decode", "set-up", rc);
	tcpx_p2p_server_destroy(srv);

	/* Allocate the request's blocks (any free ones: here every 7th) and
	 * offer them with the pool, exported to this conn's peer only. */
	memset(owner, -1, sizeof(owner));
	for (j = 0; j < REQ_BLOCKS; j++) {
		offer->block[j] = (uint32_t)(3 + 7 * j) % POOL_BLOCKS;
		owner[offer->block[j]] = j;
	}
	if ((rc = tcpx_p2p_mr_export(c, pool_mr, 0, POOL_BYTES, TCPX_P2P_ACCESS_WRITE,
				     &offer->pool)) ||
	    (rc = tcpx_p2p_send(c, offer_mr, 0, sizeof(*offer), &x)) || (rc = finish(x)))
		return fail("decode", "the offer", rc);

	/* Nothing is posted for the data: each poll drives the session, which
	 * lands the write and then delivers its notification (> 0: longer ones
	 * wait for tcpx_p2p_notif_take; prefill sends none). */
	while ((rc = tcpx_p2p_notif_poll(s, &note, 1, &n)) >= 0 && n == 0 && time(NULL) < give_up)
		;
	if (rc < 0 || n == 0)
		return fail("decode", "notification", rc < 0 ? rc : TCPX_P2P_ETIMEDOUT);
	printf("decode: notification \"%.*s\"\n", (int)note.len - 1, (const char *)note.msg);
	for (a = 0; a < ARRAYS; a++) /* blocks not offered stay zero */
		for (j = 0; j < POOL_BLOCKS; j++)
			for (b = pool + block_off(a, (uint32_t)j), i = 0; i < BLOCK; i++)
				bad += b[i] != (owner[j] < 0 ? 0 : kv_byte(a, owner[j], i));

	/* The answer that completes prefill's write was handed to the plugin
	 * before the notification was delivered; meet prefill before closing
	 * so that the connection outlives it. */
	rc = tcpx_p2p_conn_barrier(c, TIMEOUT_MS);
	pthread_join(th, NULL);
	if (rc || arg.rc)
		return fail("decode", "barrier", rc ? rc : arg.rc);
	tcpx_p2p_conn_destroy(c);
	tcpx_p2p_mr_deregister(offer_mr);
	tcpx_p2p_mr_deregister(pool_mr);
	free(pool);
	free(offer);
	if (bad) {
		fprintf(stderr, "kv_write: %zu bytes of the pool are wrong\n", bad);
		return -1;
	}
	return tcpx_p2p_session_destroy(s);
}

int main(void)
{
	if (decode())
		return 1;
	printf("kv_write: ok (%d blocks of %u bytes, one write)\n", NSEGS, BLOCK);
	return 0;
}
