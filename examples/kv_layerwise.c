/*
 * kv_layerwise: the layer-wise KV push of disaggregated inference, with
 * transfers posted on CUDA events, in one process over 127.0.0.1 (the
 * decode and prefill sessions in two threads, as two processes would be).
 *
 *   decode  (main thread)  owns a KV pool in device memory, exports it to
 *                          prefill, polls for the notification and checks
 *                          every layer.  It posts nothing for the data.
 *   prefill (a thread)     "computes" each layer on one CUDA stream and
 *                          records an event after it; right after queueing
 *                          a layer it posts that layer's WRITE with the
 *                          event in its params, and goes on at once.  The
 *                          library starts each layer's bytes once its event
 *                          completed, in posting order; the last WRITE
 *                          carries the notification.  No host sync per
 *                          layer, no thread of the application's own.
 *
 * Needs a GPU: without one it says so and exits 77 (skipped).  Prints
 * "kv_layerwise: ok" and exits 0 when every byte of every layer is in place.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>
#include <tcpx_p2p.h>

#define LAYERS 16
#define LAYER (1u << 20) /* one layer's K and V blocks, bytes */
#define POOL_BYTES ((size_t)LAYERS * LAYER)
#define TIMEOUT_MS 30000

static const char note_text[] = "request 1: all layers";

static int fail(const char *who, const char *what, int rc)
{
	fprintf(stderr, "kv_layerwise: %s: %s: %s (%s)\n", who, what, tcpx_p2p_strerror(rc),
		tcpx_p2p_last_error());
	return rc ? rc : -1;
}

/* The byte layer i "computes" (a memset stands for its kernels). */
static unsigned char layer_byte(int i)
{
	return (unsigned char)(0x40 + i);
}

static int gpu_session(tcpx_p2p_session **s)
{
	tcpx_p2p_config cfg;
	int rc = tcpx_p2p_config_init(&cfg);

	cfg.gpu = 0;
	/* A thread of the library's drives the connection, so that each
	 * layer's bytes start as soon as its event completes, whatever the
	 * application does meanwhile. */
	cfg.progress_thread = 1;
	return rc ? rc : tcpx_p2p_session_create(&cfg, s);
}

/* The prefill side: learn where the pool is, push layer after layer. */
static int prefill(uint16_t port)
{
	tcpx_p2p_xfer *x[LAYERS];
	cudaEvent_t ev[LAYERS];
	cudaStream_t st;
	tcpx_p2p_session *s;
	tcpx_p2p_conn *c;
	tcpx_p2p_mr *kv_mr, *offer_mr;
	tcpx_p2p_rmr *pool;
	tcpx_p2p_xfer *ox;
	tcpx_p2p_rdesc *offer = aligned_alloc(4096, 4096);
	void *kv;
	int rc, i;

	if (!offer || cudaSetDevice(0) || cudaMalloc(&kv, POOL_BYTES) ||
	    cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking))
		return fail("prefill", "buffers", TCPX_P2P_ENOMEM);
	for (i = 0; i < LAYERS; i++)
		if (cudaEventCreateWithFlags(&ev[i], cudaEventDisableTiming))
			return fail("prefill", "events", TCPX_P2P_ECUDA);
	if ((rc = gpu_session(&s)) ||
	    (rc = tcpx_p2p_mr_register(s, kv, POOL_BYTES, TCPX_P2P_MEM_CUDA, &kv_mr)) ||
	    (rc = tcpx_p2p_mr_register(s, offer, 4096, TCPX_P2P_MEM_HOST, &offer_mr)) ||
	    (rc = tcpx_p2p_dial(s, "127.0.0.1", port, TIMEOUT_MS, &c)))
		return fail("prefill", "set-up", rc);
	if ((rc = tcpx_p2p_recv(c, offer_mr, 0, sizeof(*offer), &ox)) ||
	    (rc = tcpx_p2p_wait(ox, TIMEOUT_MS)) || (rc = tcpx_p2p_xfer_release(ox)) ||
	    (rc = tcpx_p2p_rmr_import(c, offer, &pool)))
		return fail("prefill", "the offer", rc);

	for (i = 0; i < LAYERS; i++) {
		tcpx_p2p_seg local = { kv_mr, (size_t)i * LAYER, LAYER };
		tcpx_p2p_rseg remote = { pool, (size_t)i * LAYER, LAYER };
		tcpx_p2p_xfer_params params = { .struct_size = sizeof(params), .event = ev[i] };

		/* Layer i's kernels, then its event... */
		if (cudaMemsetAsync((char *)kv + (size_t)i * LAYER, layer_byte(i), LAYER, st) ||
		    cudaEventRecord(ev[i], st))
			return fail("prefill", "layer", TCPX_P2P_ECUDA);
		/* ...and its WRITE, queued behind the event: the call returns at
		 * once.  The last one tells decode that everything is there. */
		if (i == LAYERS - 1) {
			params.notif = note_text;
			params.notif_len = sizeof(note_text);
		}
		if ((rc = tcpx_p2p_write(c, &local, 1, &remote, 1, &params, &x[i])))
			return fail("prefill", "write", rc);
	}
	for (i = 0; i < LAYERS; i++) {
		if ((rc = tcpx_p2p_wait(x[i], TIMEOUT_MS)))
			return fail("prefill", "layer write", rc);
		tcpx_p2p_xfer_release(x[i]);
	}
	if ((rc = tcpx_p2p_conn_barrier(c, TIMEOUT_MS)))
		return fail("prefill", "barrier", rc);
	tcpx_p2p_rmr_release(pool);
	tcpx_p2p_conn_destroy(c);
	tcpx_p2p_mr_deregister(offer_mr);
	tcpx_p2p_mr_deregister(kv_mr);
	for (i = 0; i < LAYERS; i++)
		cudaEventDestroy(ev[i]);
	cudaStreamDestroy(st);
	cudaFree(kv);
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

/* The decode side: offer the pool, wait for the note, check every layer. */
static int decode(void)
{
	static tcpx_p2p_notif note;
	tcpx_p2p_session *s;
	tcpx_p2p_server *srv;
	tcpx_p2p_conn *c;
	tcpx_p2p_mr *pool_mr, *offer_mr;
	tcpx_p2p_xfer *x;
	tcpx_p2p_rdesc *offer = aligned_alloc(4096, 4096);
	unsigned char *host = malloc(POOL_BYTES);
	time_t give_up = time(NULL) + TIMEOUT_MS / 1000;
	struct prefill_arg arg = { 0, -1 };
	size_t k, bad = 0;
	int rc, i, n = 0;
	void *pool;
	pthread_t th;

	if (!offer || !host || cudaSetDevice(0) || cudaMalloc(&pool, POOL_BYTES) ||
	    cudaMemset(pool, 0, POOL_BYTES))
		return fail("decode", "buffers", TCPX_P2P_ENOMEM);
	if ((rc = gpu_session(&s)) ||
	    (rc = tcpx_p2p_server_create(s, "127.0.0.1", 0, &srv)) ||
	    (rc = tcpx_p2p_server_port(srv, &arg.port)))
		return fail("decode", "set-up", rc);
	if (pthread_create(&th, NULL, prefill_thread, &arg))
		return fail("decode", "pthread_create", 0);
	if ((rc = tcpx_p2p_server_accept(srv, TIMEOUT_MS, &c)) ||
	    (rc = tcpx_p2p_mr_register(s, pool, POOL_BYTES, TCPX_P2P_MEM_CUDA, &pool_mr)) ||
	    (rc = tcpx_p2p_mr_register(s, offer, 4096, TCPX_P2P_MEM_HOST, &offer_mr)))
		return fail("decode", "set-up", rc);
	tcpx_p2p_server_destroy(srv);
	if ((rc = tcpx_p2p_mr_export(c, pool_mr, 0, POOL_BYTES, TCPX_P2P_ACCESS_WRITE, offer)) ||
	    (rc = tcpx_p2p_send(c, offer_mr, 0, sizeof(*offer), &x)) ||
	    (rc = tcpx_p2p_wait(x, TIMEOUT_MS)) || (rc = tcpx_p2p_xfer_release(x)))
		return fail("decode", "the offer", rc);

	/* The notification comes after every byte of every layer before it. */
	while (!(rc = tcpx_p2p_notif_poll(s, &note, 1, &n)) && n == 0 && time(NULL) < give_up)
		;
	if (rc || n == 0)
		return fail("decode", "notification", rc ? rc : TCPX_P2P_ETIMEDOUT);
	printf("decode: notification \"%.*s\"\n", (int)note.len - 1, (const char *)note.msg);
	if (cudaMemcpy(host, pool, POOL_BYTES, cudaMemcpyDeviceToHost))
		return fail("decode", "copy", TCPX_P2P_ECUDA);
	for (i = 0; i < LAYERS; i++)
		for (k = 0; k < LAYER; k++)
			bad += host[(size_t)i * LAYER + k] != layer_byte(i);

	rc = tcpx_p2p_conn_barrier(c, TIMEOUT_MS);
	pthread_join(th, NULL);
	if (rc || arg.rc)
		return fail("decode", "barrier", rc ? rc : arg.rc);
	tcpx_p2p_conn_destroy(c);
	tcpx_p2p_mr_deregister(offer_mr);
	tcpx_p2p_mr_deregister(pool_mr);
	cudaFree(pool);
	free(host);
	free(offer);
	if (bad) {
		fprintf(stderr, "kv_layerwise: %zu bytes of the pool are wrong\n", bad);
		return -1;
	}
	return tcpx_p2p_session_destroy(s);
}

int main(void)
{
	int n = 0;

	if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
		printf("kv_layerwise: no CUDA device: skipping (it needs a GPU)\n");
		return 77;
	}
	if (decode())
		return 1;
	printf("kv_layerwise: ok (%d layers of %u bytes, each written on its event)\n", LAYERS,
	       LAYER);
	return 0;
}
