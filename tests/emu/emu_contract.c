/*
 * Contract tests of the TCPX emulator plugin, driven through
 * ncclNetPlugin_v7 in one process over loopback.  argv[1] picks a group;
 * CMake registers one test per group with the environment of its mode.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "abi/handle_layout.h"
#include "emu_harness.h"

/* 65537 and 200000 take 2 and 4 of 8 sockets: requests that skip sockets. */
static const int data_sizes[] = { 0, 1, 4095, 65537, 4096, 200000, (1 << 20) + 3, 4 << 20 };
#define NSIZES ((int)(sizeof(data_sizes) / sizeof(data_sizes[0])))

static int bounce_mode(void)
{
	const char *b = getenv("TCPX_EMU_BOUNCE");

	return b && strcmp(b, "off") != 0;
}

/* Receives into rbuf and returns the payload as the caller sees it. */
static void complete_recv(struct emu_pair *p, void *req, uint64_t k, char *rbuf, char *out,
			  uint64_t size)
{
	const struct tp_unpack_handle *uh = emu_unpack_handle(p);
	ncclResult_t res;

	assert_int_equal(emu_wait(p, req, &res), 0);
	assert_int_equal(res, ncclSuccess);
	if (uh) {
		int cnt = emu_unpack(uh, (int)(k % TP_UNPACK_QUEUE_DEPTH), out, size);

		assert_true(cnt >= 0);
		assert_true(size == 0 || cnt > 0);
	} else if (out != rbuf) {
		memcpy(out, rbuf, size);
	}
	assert_int_equal(net->irecvConsumed(p->rcomm, 1, req), ncclSuccess);
}

/* One message of size bytes from s into r (tag), both requests waited for
 * and successful; the receive, not yet consumed. */
static void *move_one(struct emu_pair *p, char *s, char *r, int size, int tag)
{
	void *sreq, *rreq;
	ncclResult_t res;

	assert_int_equal(emu_irecv(p, r, size, tag, NULL, &rreq), ncclSuccess);
	assert_int_equal(emu_isend(p, s, size, tag, NULL, &sreq), ncclSuccess);
	assert_int_equal(emu_wait(p, sreq, &res), 0);
	assert_int_equal(res, ncclSuccess);
	assert_int_equal(emu_wait(p, rreq, &res), 0);
	assert_int_equal(res, ncclSuccess);
	return rreq;
}

static void test_properties(void **state)
{
	ncclNetProperties_v7_t props;
	int n = 0;

	assert_string_equal(net->name, "TCPXEmu_v7");
	assert_int_equal(net->devices(&n), ncclSuccess);
	assert_int_equal(n, 1);
	assert_int_equal(net->getProperties(0, &props), ncclSuccess);
	assert_string_equal(props.name, "tcpxemu");
	assert_string_equal(props.pciPath, "");
	assert_true(props.ptrSupport & NCCL_PTR_HOST);
	assert_int_equal(props.maxRecvs, 1);
	assert_int_equal(props.maxComms, 65536);
	assert_int_equal(props.speed, 100000);
	assert_int_equal(props.netDeviceType,
			 bounce_mode() ? NCCL_NET_DEVICE_UNPACK : NCCL_NET_DEVICE_HOST);
	if (bounce_mode())
		assert_int_equal(props.netDeviceVersion, NCCL_NET_DEVICE_UNPACK_VERSION);
	assert_null(net->regMrDmaBuf);
	assert_null(net->iflush);
	assert_null(net->getDeviceMr);
}

/*
 * Every size, several rounds so the meta slots wrap, with up to 8
 * transfers in flight; the posted receive is larger than the send (the
 * sender's size wins).  Bounce mode: a sentinel in cnt[k % 16] proves
 * the k-th receive used that slot.
 */
static void test_data_integrity(void **state)
{
	struct emu_pair p;
	const int total = 3 * NSIZES + 4, depth = 8;
	char *sbuf[8], *rbuf[8], *out = malloc(4 << 20);
	void *sreq[8], *rreq[8], *smh, *rmh[8];
	const struct tp_unpack_handle *uh;

	assert_int_equal(emu_pair_open(&p), 0);
	uh = emu_unpack_handle(&p);
	assert_int_equal(uh != NULL, bounce_mode());
	for (int i = 0; i < depth; i++) {
		sbuf[i] = malloc(4 << 20);
		rbuf[i] = malloc((4 << 20) + 64);
		assert_int_equal(net->regMr(p.rcomm, rbuf[i], (4 << 20) + 64, NCCL_PTR_HOST,
					    &rmh[i]), ncclSuccess);
	}
	assert_int_equal(net->regMr(p.scomm, sbuf[0], 4 << 20, NCCL_PTR_HOST, &smh),
			 ncclSuccess);
	for (int k = 0; k < total + depth; k++) {
		if (k >= depth) {
			int j = k - depth, b = j % depth;
			uint64_t size = (uint64_t)data_sizes[j % NSIZES];
			ncclResult_t res;

			assert_int_equal(emu_wait(&p, sreq[b], &res), 0);
			assert_int_equal(res, ncclSuccess);
			memset(out, 0x5a, size);
			complete_recv(&p, rreq[b], (uint64_t)j, rbuf[b], uh ? out : rbuf[b], size);
			assert_memory_equal(uh ? out : rbuf[b], sbuf[b], size);
		}
		if (k < total) {
			int b = k % depth, size = data_sizes[k % NSIZES];

			emu_fill_random(sbuf[b], (size_t)size, (uint32_t)k + 1);
			if (uh)
				((struct tp_unpack_meta *)uh->meta)->cnt[k % 16] = 0xdead;
			assert_int_equal(emu_irecv(&p, rbuf[b], size + 64, k, rmh[b], &rreq[b]),
					 ncclSuccess);
			assert_int_equal(emu_isend(&p, sbuf[b], size, k, smh, &sreq[b]),
					 ncclSuccess);
		}
	}
	for (int i = 0; i < depth; i++) {
		net->deregMr(p.rcomm, rmh[i]);
		free(sbuf[i]);
		free(rbuf[i]);
	}
	net->deregMr(p.scomm, smh);
	free(out);
	emu_pair_close(&p);
}

static void test_async_connect(void **state)
{
	struct emu_pair p;
	void *again = NULL;

	assert_int_equal(emu_pair_open(&p), 0);
	/* One call to start, then at least two more before a comm appears. */
	assert_true(p.connect_calls >= 3);
	assert_true(p.accept_calls >= 2);
	emu_clear_warn();
	assert_int_equal(net->connect(0, p.handle, &again, NULL), ncclInvalidUsage);
	assert_null(again);
	assert_true(emu_warned("already used"));
	emu_clear_warn();
	assert_int_equal(net->accept(p.lcomm, &again, &p.dh), ncclInvalidUsage);
	assert_null(again);
	assert_true(emu_warned("one connection"));
	emu_pair_close(&p);
}

static void test_request_limit(void **state)
{
	struct emu_pair p;
	char sbuf[16], rbuf[16];
	void *sreq[17], *rreq[17];
	ncclResult_t res;

	assert_int_equal(emu_pair_open(&p), 0);
	for (int i = 0; i < 16; i++) {
		sbuf[i] = (char)i;
		assert_int_equal(emu_irecv(&p, &rbuf[i], 1, i, NULL, &rreq[i]), ncclSuccess);
		assert_int_equal(emu_isend(&p, &sbuf[i], 1, i, NULL, &sreq[i]), ncclSuccess);
	}
	emu_clear_warn();
	rreq[16] = (void *)1;
	assert_int_equal(emu_irecv(&p, rbuf, 1, 16, NULL, &rreq[16]), ncclInternalError);
	assert_null(rreq[16]);
	assert_true(emu_warned("unable to allocate requests"));
	emu_clear_warn();
	assert_int_equal(emu_isend(&p, sbuf, 1, 16, NULL, &sreq[16]), ncclInternalError);
	assert_true(emu_warned("unable to allocate requests"));

	/* Sends free their slot at test; receives only at irecvConsumed. */
	for (int i = 0; i < 16; i++) {
		assert_int_equal(emu_wait(&p, sreq[i], &res), 0);
		assert_int_equal(res, ncclSuccess);
	}
	for (int i = 0; i < 16; i++) {
		assert_int_equal(emu_wait(&p, rreq[i], &res), 0);
		assert_int_equal(res, ncclSuccess);
	}
	assert_int_equal(emu_irecv(&p, rbuf, 1, 16, NULL, &rreq[16]), ncclInternalError);
	assert_int_equal(net->irecvConsumed(p.rcomm, 1, rreq[0]), ncclSuccess);
	assert_int_equal(emu_irecv(&p, rbuf, 1, 16, NULL, &rreq[16]), ncclSuccess);
	for (int i = 1; i < 16; i++)
		assert_int_equal(net->irecvConsumed(p.rcomm, 1, rreq[i]), ncclSuccess);
	if (!bounce_mode())
		assert_memory_equal(rbuf, sbuf, 16);
	assert_int_equal(emu_isend(&p, sbuf, 1, 16, NULL, &sreq[16]), ncclSuccess);
	assert_int_equal(emu_wait(&p, sreq[16], &res), 0);
	assert_int_equal(emu_wait(&p, rreq[16], &res), 0);
	assert_int_equal(res, ncclSuccess);
	emu_pair_close(&p);
}

static void test_fifo_rules(void **state)
{
	struct emu_pair p;
	char s[2] = { 7, 9 }, r[2];
	void *sreq[2], *rreq[2];
	ncclResult_t res;
	int done = 0;

	assert_int_equal(emu_pair_open(&p), 0);
	for (int i = 0; i < 2; i++)
		assert_int_equal(emu_irecv(&p, &r[i], 1, i, NULL, &rreq[i]), ncclSuccess);
	emu_clear_warn();
	assert_int_equal(net->test(rreq[1], &done, NULL), ncclInvalidUsage);
	assert_true(emu_warned("test on non-head request"));
	emu_clear_warn();
	assert_int_equal(net->irecvConsumed(p.rcomm, 1, rreq[0]), ncclInvalidUsage);
	assert_true(emu_warned("irecvConsumed out of order"));
	for (int i = 0; i < 2; i++)
		assert_int_equal(emu_isend(&p, &s[i], 1, i, NULL, &sreq[i]), ncclSuccess);
	emu_clear_warn();
	assert_int_equal(net->test(sreq[1], &done, NULL), ncclInvalidUsage);
	assert_true(emu_warned("test on non-head request"));
	for (int i = 0; i < 2; i++) {
		assert_int_equal(emu_wait(&p, sreq[i], &res), 0);
		assert_int_equal(res, ncclSuccess);
		assert_int_equal(emu_wait(&p, rreq[i], &res), 0);
		assert_int_equal(res, ncclSuccess);
	}
	emu_clear_warn();
	assert_int_equal(net->test(sreq[0], &done, NULL), ncclInvalidUsage);
	assert_true(emu_warned("test after done"));
	emu_clear_warn();
	assert_int_equal(net->test(rreq[0], &done, NULL), ncclInvalidUsage);
	assert_true(emu_warned("test after done"));
	emu_clear_warn();
	assert_int_equal(net->irecvConsumed(p.rcomm, 1, rreq[1]), ncclInvalidUsage);
	assert_true(emu_warned("irecvConsumed out of order"));
	assert_int_equal(net->irecvConsumed(p.rcomm, 1, rreq[0]), ncclSuccess);
	assert_int_equal(net->irecvConsumed(p.rcomm, 1, rreq[1]), ncclSuccess);
	emu_clear_warn();
	assert_int_equal(net->irecvConsumed(p.rcomm, 1, rreq[1]), ncclInvalidUsage);
	if (!bounce_mode())
		assert_memory_equal(r, s, 2);
	emu_clear_warn();
	assert_int_equal(net->irecv(p.rcomm, 2, (void *[]){ r, r }, (int[]){ 1, 1 },
				    (int[]){ 0, 0 }, (void *[]){ NULL, NULL }, &rreq[0]),
			 ncclInvalidArgument);
	emu_pair_close(&p);
}

/* A too-large send fails that receive only; the comm keeps working. */
static void test_truncation(void **state)
{
	struct emu_pair p;
	char *s = malloc(300000), *r = malloc(300000), *out = malloc(300000);
	void *sreq, *rreq;
	ncclResult_t res;

	assert_int_equal(emu_pair_open(&p), 0);
	emu_fill_random(s, 300000, 3);
	emu_clear_warn(); /* before posting, as the helper thread may warn at once */
	assert_int_equal(emu_irecv(&p, r, 100, 1, NULL, &rreq), ncclSuccess);
	assert_int_equal(emu_isend(&p, s, 200000, 1, NULL, &sreq), ncclSuccess);
	assert_int_equal(emu_wait(&p, rreq, &res), 0);
	assert_int_equal(res, ncclRemoteError);
	assert_true(emu_warned("message truncated"));
	assert_int_equal(emu_wait(&p, sreq, &res), 0);
	assert_int_equal(res, ncclSuccess);

	assert_int_equal(emu_irecv(&p, r, 300000, 2, NULL, &rreq), ncclSuccess);
	assert_int_equal(emu_isend(&p, s + 5, 250000, 2, NULL, &sreq), ncclSuccess);
	assert_int_equal(emu_wait(&p, sreq, &res), 0);
	assert_int_equal(res, ncclSuccess);
	complete_recv(&p, rreq, 1, r, out, 250000);
	assert_memory_equal(out, s + 5, 250000);
	free(s);
	free(r);
	free(out);
	emu_pair_close(&p);
}

static void test_accept_needs_storage(void **state)
{
	char handle[NCCL_NET_HANDLE_MAXSIZE];
	ncclNetDeviceHandle_v7_t *none = NULL;
	void *l, *rc = (void *)1;

	assert_int_equal(net->listen(0, handle, &l), ncclSuccess);
	emu_clear_warn();
	assert_int_equal(net->accept(l, &rc, NULL), ncclInvalidArgument);
	assert_null(rc);
	assert_true(emu_warned("accept needs caller-owned ncclNetDeviceHandle storage"));
	assert_int_equal(net->accept(l, &rc, &none), ncclInvalidArgument);
	assert_int_equal(net->closeListen(l), ncclSuccess);
}

static void test_unpack_handle(void **state)
{
	struct emu_pair p;

	assert_int_equal(emu_pair_open(&p), 0);
	assert_int_equal(p.dh_storage.netDeviceType, NCCL_NET_DEVICE_UNPACK);
	assert_int_equal(p.dh_storage.netDeviceVersion, 7);
	assert_int_equal(p.dh_storage.size, sizeof(struct tp_unpack_handle));
	assert_int_equal(p.dh_storage.needsProxyProgress, 1);
	assert_non_null(emu_unpack_handle(&p)->meta);
	assert_non_null(emu_unpack_handle(&p)->bounce_buf);
	assert_true(emu_unpack_handle(&p)->head == (uint64_t)-1);
	emu_pair_close(&p);
}

/* After irecvConsumed the pages the records pointed at hold 0xA5. */
static void test_poison(void **state)
{
	struct emu_pair p;
	const int size = (1 << 20) + 3;
	char *s = malloc(size), *r = malloc(size), *out = malloc(size);
	tp_unpack_rec *recs = malloc(2048 * sizeof(*recs));
	const struct tp_unpack_handle *uh;
	void *sreq, *rreq;
	ncclResult_t res;
	int cnt;

	assert_int_equal(emu_pair_open(&p), 0);
	uh = emu_unpack_handle(&p);
	assert_non_null(uh);
	emu_fill_random(s, size, 11);
	assert_int_equal(emu_irecv(&p, r, size, 0, NULL, &rreq), ncclSuccess);
	assert_int_equal(emu_isend(&p, s, size, 0, NULL, &sreq), ncclSuccess);
	assert_int_equal(emu_wait(&p, sreq, &res), 0);
	assert_int_equal(emu_wait(&p, rreq, &res), 0);
	assert_int_equal(res, ncclSuccess);
	cnt = emu_unpack(uh, 0, out, size);
	assert_true(cnt > 0);
	assert_memory_equal(out, s, size);
	memcpy(recs, uh->meta->mem[0], (size_t)cnt * sizeof(*recs));
	assert_int_equal(net->irecvConsumed(p.rcomm, 1, rreq), ncclSuccess);
	for (int i = 0; i < cnt; i++) {
		const unsigned char *b = (const unsigned char *)uh->bounce_buf + recs[i].src_off;

		for (uint32_t j = 0; j < recs[i].len; j++)
			assert_int_equal(b[j], 0xA5);
	}
	free(recs);
	free(s);
	free(r);
	free(out);
	emu_pair_close(&p);
}

/*
 * Pages are recycled as a NIC's page pool recycles them: one receive of
 * 256 KiB at a time, 200 times, lands on scattered pages, and on few
 * distinct ones over all (at most 2048 of the pool's 8192: the emulator
 * picks among the 1024 most recently freed), so the host pool a comm
 * touches stays small and warm.  Picking uniformly over the whole pool,
 * the 200 receives would touch about 6,600 pages; always reusing the
 * pages just freed (no random pick), about 70.
 */
static void test_page_recycling(void **state)
{
	struct emu_pair p;
	const int size = 256 << 10, rounds = 200;
	char *s = malloc(size), *r = malloc(size), *out = malloc(size);
	unsigned char *seen = calloc(1u << 20, 1); /* pages of a pool of up to 4 GiB */
	const struct tp_unpack_handle *uh;
	int distinct = 0, scattered = 0;

	assert_int_equal(emu_pair_open(&p), 0);
	uh = emu_unpack_handle(&p);
	assert_non_null(uh);
	for (int k = 0; k < rounds; k++) {
		const tp_unpack_rec *rec = uh->meta->mem[k % 16];
		void *rreq;
		int cnt;

		emu_fill_random(s, size, (uint32_t)k + 7);
		rreq = move_one(&p, s, r, size, k);
		cnt = emu_unpack(uh, k % 16, out, size);
		assert_true(cnt > 0);
		assert_memory_equal(out, s, size);
		for (int i = 0; i < cnt; i++) {
			uint32_t page = rec[i].src_off / TP_UNPACK_PAGE_SIZE;
			uint32_t prev = i ? rec[i - 1].src_off / TP_UNPACK_PAGE_SIZE : page;

			distinct += !seen[page];
			seen[page] = 1;
			/* the next record's bytes begin on another page, not the next one */
			if (page != prev && page != prev + 1)
				scattered++;
		}
		assert_int_equal(net->irecvConsumed(p.rcomm, 1, rreq), ncclSuccess);
	}
	assert_true(scattered > rounds);
	assert_true(distinct > 256 && distinct <= 2048);
	free(seen);
	free(s);
	free(r);
	free(out);
	emu_pair_close(&p);
}

/* Six 4 MiB receives outstanding against a 2048-page pool: each waits for
 * the consume of an earlier one, and all complete. */
static void test_small_pool(void **state)
{
	struct emu_pair p;
	const int n = 6, size = 4 << 20;
	char *s = malloc((size_t)n * size), *r = malloc(size), *out = malloc(size);
	void *sreq[6], *rreq[6];
	ncclResult_t res;
	int sdone = 0;

	assert_int_equal(emu_pair_open(&p), 0);
	emu_fill_random(s, (size_t)n * size, 5);
	for (int i = 0; i < n; i++) {
		assert_int_equal(emu_irecv(&p, r, size, i, NULL, &rreq[i]), ncclSuccess);
		assert_int_equal(emu_isend(&p, s + (size_t)i * size, size, i, NULL, &sreq[i]),
				 ncclSuccess);
	}
	for (int i = 0; i < n; i++) {
		complete_recv(&p, rreq[i], (uint64_t)i, r, out, size);
		assert_memory_equal(out, s + (size_t)i * size, size);
		while (sdone < n) {
			int done = 0;

			assert_int_equal(emu_test(&p, sreq[sdone], &done, &res), 0);
			if (!done)
				break;
			assert_int_equal(res, ncclSuccess);
			sdone++;
		}
	}
	while (sdone < n) {
		assert_int_equal(emu_wait(&p, sreq[sdone++], &res), 0);
		assert_int_equal(res, ncclSuccess);
	}
	free(s);
	free(r);
	free(out);
	emu_pair_close(&p);
}

static void test_strict_tags(void **state)
{
	struct emu_pair p;
	char s[64], r[64], out[64];
	void *sreq, *rreq;
	ncclResult_t res;

	assert_int_equal(emu_pair_open(&p), 0);
	emu_fill_random(s, sizeof(s), 9);
	/* before posting: the helper thread may warn before isend returns */
	emu_clear_warn();
	assert_int_equal(emu_irecv(&p, r, 64, 6, NULL, &rreq), ncclSuccess);
	assert_int_equal(emu_isend(&p, s, 64, 5, NULL, &sreq), ncclSuccess);
	assert_int_equal(emu_wait(&p, rreq, &res), 0);
	assert_int_equal(res, ncclInvalidUsage);
	assert_true(emu_warned("tag mismatch: send tag 5, posted receive tag 6"));
	assert_int_equal(emu_wait(&p, sreq, &res), 0);

	assert_int_equal(emu_irecv(&p, r, 64, 7, NULL, &rreq), ncclSuccess);
	assert_int_equal(emu_isend(&p, s, 64, 7, NULL, &sreq), ncclSuccess);
	assert_int_equal(emu_wait(&p, sreq, &res), 0);
	complete_recv(&p, rreq, 1, r, out, 64);
	assert_memory_equal(out, s, 64);
	emu_pair_close(&p);
}

static void test_null_requests(void **state)
{
	test_data_integrity(state);
	assert_true(emu_null_seen() > 0);
}

static void test_socket_clamp(void **state)
{
	/* The clamp warning comes at connect/listen; the pair must still work. */
	emu_clear_warn();
	test_data_integrity(state);
	assert_true(emu_warned("clamped"));
}

/* Deregister what the harness registered on comm, before closing it alone. */
static void drop_regs(struct emu_pair *p, void *comm)
{
	int n = 0;

	for (int i = 0; i < p->nauto; i++) {
		if (p->auto_comm[i] == comm) {
			net->deregMr(comm, p->auto_mh[i]);
			continue;
		}
		p->auto_comm[n] = p->auto_comm[i];
		p->auto_mh[n++] = p->auto_mh[i];
	}
	p->nauto = n;
}

/* Close both ends with receives and a large send in flight: no hang, and
 * the close of a comm whose peer is still there is refused as a contract
 * violation (the comm is freed all the same). */
static void test_close_in_flight(void **state)
{
	struct emu_pair p;
	const int big = 64 << 20;
	char *s = malloc(big), *r = malloc(4096);
	void *req;

	assert_int_equal(emu_pair_open(&p), 0);
	memset(s, 1, big);
	for (int i = 0; i < 4; i++)
		assert_int_equal(emu_irecv(&p, r, 1, i, NULL, &req), ncclSuccess);
	assert_int_equal(emu_isend(&p, s, big, 0, NULL, &req), ncclSuccess);
	assert_int_equal(emu_isend(&p, s, big, 1, NULL, &req), ncclSuccess);
	emu_clear_warn();
	drop_regs(&p, p.rcomm);
	assert_int_equal(net->closeRecv(p.rcomm), ncclInvalidUsage);
	assert_true(emu_warned("closeRecv with 4 requests in flight"));
	p.rcomm = NULL;
	emu_pair_close(&p);
	free(s);
	free(r);
}

/* TCPX_EMU_CLOSE_INFLIGHT=fail-others: as with aws-ofi-nccl's shared
 * endpoint, such a close breaks every other comm of the process (its next
 * post or test fails); comms made after it work. */
static void test_close_fails_others(void **state)
{
	struct emu_pair p, q, later;
	char buf[64];
	void *req, *sreq;
	ncclResult_t res;

	assert_int_equal(emu_pair_open(&p), 0);
	assert_int_equal(emu_pair_open(&q), 0);
	assert_int_equal(emu_irecv(&p, buf, 64, 0, NULL, &req), ncclSuccess);
	drop_regs(&p, p.rcomm);
	assert_int_equal(net->closeRecv(p.rcomm), ncclInvalidUsage);
	p.rcomm = NULL;
	assert_true(emu_warned("every other comm of the process fails now"));
	assert_int_equal(emu_isend(&q, buf, 64, 0, NULL, &sreq), ncclInternalError);
	assert_true(emu_warned("another comm of this process was closed"));
	assert_int_equal(emu_pair_open(&later), 0);
	memset(buf, 7, sizeof(buf));
	assert_int_equal(emu_irecv(&later, buf + 32, 32, 0, NULL, &req), ncclSuccess);
	assert_int_equal(emu_isend(&later, buf, 32, 0, NULL, &sreq), ncclSuccess);
	assert_int_equal(emu_wait(&later, req, &res), 0);
	assert_int_equal(res, ncclSuccess);
	assert_int_equal(net->irecvConsumed(later.rcomm, 1, req), ncclSuccess);
	emu_pair_close(&later);
	emu_pair_close(&q);
	emu_pair_close(&p);
}

static void test_peer_death_recv(void **state)
{
	struct emu_pair p;
	char r[64];
	void *req;
	ncclResult_t res;

	assert_int_equal(emu_pair_open(&p), 0);
	assert_int_equal(emu_irecv(&p, r, 64, 0, NULL, &req), ncclSuccess);
	net->closeSend(p.scomm);
	p.scomm = NULL;
	assert_int_equal(emu_wait(&p, req, &res), 0);
	assert_true(res == ncclRemoteError || res == ncclSystemError);
	emu_pair_close(&p);
}

static void test_peer_death_send(void **state)
{
	struct emu_pair p;
	const int big = 16 << 20;
	char *s = malloc(big);
	ncclResult_t res = ncclSuccess;
	void *req;

	assert_int_equal(emu_pair_open(&p), 0);
	memset(s, 2, big);
	net->closeRecv(p.rcomm);
	p.rcomm = NULL;
	for (int i = 0; i < 64 && res == ncclSuccess; i++) {
		assert_int_equal(emu_isend(&p, s, big, i, NULL, &req), ncclSuccess);
		assert_int_equal(emu_wait(&p, req, &res), 0);
	}
	assert_true(res == ncclRemoteError || res == ncclSystemError);
	emu_pair_close(&p);
	free(s);
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/*
 * TCPX moves bytes only inside test() (docs/tcpx.md, plugin contract rule
 * 12): posted requests sit untouched until a test on their comm hands them
 * to the helpers, one request per test.  Bounce off, so the payload lands in the user buffer
 * where the test can watch for it.
 */
static void test_bytes_move_only_in_test(void **state)
{
	struct emu_pair p;
	char s[3][64], r[3][64];
	void *sreq[3], *rreq[3];
	ncclResult_t res;
	int done = 0;

	assert_int_equal(emu_pair_open(&p), 0);
	memset(r, 0, sizeof(r));
	for (int i = 0; i < 3; i++) {
		emu_fill_random(s[i], sizeof(s[i]), (uint32_t)i + 40);
		assert_int_equal(emu_irecv(&p, r[i], 64, i, NULL, &rreq[i]), ncclSuccess);
		assert_int_equal(emu_isend(&p, s[i], 64, i, NULL, &sreq[i]), ncclSuccess);
	}
	/* Posted on both sides, never tested: not one byte moves. */
	sleep_ms(100);
	for (int i = 0; i < 3; i++)
		assert_true(memcmp(r[i], (char[64]){ 0 }, 64) == 0);
	/* Receives tested (all three activated), sends not: still nothing. */
	for (int i = 0; i < 200; i++) {
		assert_int_equal(net->test(rreq[0], &done, NULL), ncclSuccess);
		assert_int_equal(done, 0);
		sleep_ms(1);
	}
	assert_true(memcmp(r[0], (char[64]){ 0 }, 64) == 0);
	/* One test of the head send activates exactly that send. */
	assert_int_equal(net->test(sreq[0], &done, NULL), ncclSuccess);
	for (int i = 0; i < 60000 && !done; i++) { /* 60 s at least: a hang, not speed */
		sleep_ms(1);
		assert_int_equal(net->test(rreq[0], &done, NULL), ncclSuccess);
	}
	assert_int_equal(done, 1);
	assert_memory_equal(r[0], s[0], 64);
	sleep_ms(100);
	assert_true(memcmp(r[1], (char[64]){ 0 }, 64) == 0);
	assert_true(memcmp(r[2], (char[64]){ 0 }, 64) == 0);
	/* The harness drives the rest the way a progress loop must (it saw
	 * none of the tests above: record the one that reported rreq[0]). */
	p.rq.res[0] = ncclSuccess;
	p.rq.head = 1;
	for (int i = 0; i < 3; i++) {
		assert_int_equal(emu_wait(&p, sreq[i], &res), 0);
		assert_int_equal(res, ncclSuccess);
	}
	for (int i = 0; i < 3; i++) {
		assert_int_equal(emu_wait(&p, rreq[i], &res), 0);
		assert_int_equal(res, ncclSuccess);
		assert_memory_equal(r[i], s[i], 64);
		assert_int_equal(net->irecvConsumed(p.rcomm, 1, rreq[i]), ncclSuccess);
	}
	emu_pair_close(&p);
}

/* TCPX reads the memory type from the mhandle: NULL is refused. */
static void test_null_mhandle(void **state)
{
	struct emu_pair p;
	char b[8] = { 0 };
	void *req = (void *)1, *data = b, *mh = NULL;
	int size = 8, tag = 0;

	assert_int_equal(emu_pair_open(&p), 0);
	emu_clear_warn();
	assert_int_equal(net->isend(p.scomm, b, 8, 0, NULL, &req), ncclInvalidArgument);
	assert_null(req);
	assert_true(emu_warned("isend: NULL mhandle"));
	req = (void *)1;
	assert_int_equal(net->irecv(p.rcomm, 1, &data, &size, &tag, &mh, &req),
			 ncclInvalidArgument);
	assert_null(req);
	assert_true(emu_warned("irecv: NULL mhandle"));
	emu_pair_close(&p);
}

/* NCCL_DYNAMIC_CHUNK_SIZE set: a receive of more tasks than the comm has
 * sockets is refused (TCPX would lose all but the last task's pages). */
static void test_task_limit(void **state)
{
	const long task = atol(getenv("NCCL_DYNAMIC_CHUNK_SIZE"));
	const int nsocks = atoi(getenv("NCCL_NSOCKS_PERTHREAD"));
	const int limit = (int)task * nsocks;
	struct emu_pair p;
	char *b = calloc(1, (size_t)limit + 1);
	void *req = NULL, *data = b, *mh = NULL;
	int size = limit + 1, tag = 0;

	assert_int_equal(emu_pair_open(&p), 0);
	assert_int_equal(net->regMr(p.rcomm, b, limit + 1, NCCL_PTR_HOST, &mh), ncclSuccess);
	emu_clear_warn();
	assert_int_equal(net->irecv(p.rcomm, 1, &data, &size, &tag, &mh, &req), ncclInvalidUsage);
	assert_null(req);
	assert_true(emu_warned("TCPX would leak its pages"));
	/* one task per socket is fine */
	size = limit;
	assert_int_equal(net->irecv(p.rcomm, 1, &data, &size, &tag, &mh, &req), ncclSuccess);
	net->deregMr(p.rcomm, mh);
	emu_pair_close(&p);
	free(b);
}

/*
 * Accept holds the comm back for TCPX_EMU_ACCEPT_WAIT_US (flow steering)
 * counted from the moment its sockets are in: two pairs driven in one loop
 * both get their comms, neither before the wait.  That the two waits
 * overlap (one wait in all, each on its own clock) is not asserted: only
 * an upper bound on the time would show it from here, and a loaded machine
 * breaks those; test_guards' acceptwait counts the overlap the library
 * makes instead.  The loop's limit only stops a hang.
 */
static void test_accept_wait(void **state)
{
	const char *env = getenv("TCPX_EMU_ACCEPT_WAIT_US");
	double wait = env ? atof(env) * 1e-6 : 0, t0 = now_s();
	struct emu_pair p[2];
	char handle[2][NCCL_NET_HANDLE_MAXSIZE];

	assert_true(wait >= 0.1);
	for (int i = 0; i < 2; i++) {
		memset(&p[i], 0, sizeof(p[i]));
		p[i].dh = &p[i].dh_storage;
		assert_int_equal(net->listen(0, handle[i], &p[i].lcomm), ncclSuccess);
		memcpy(p[i].handle, handle[i], sizeof(handle[i]));
	}
	while (!p[0].rcomm || !p[1].rcomm || !p[0].scomm || !p[1].scomm) {
		if (now_s() - t0 > wait + 60)
			fail_msg("the accepts did not complete within %.0f s", wait + 60);
		for (int i = 0; i < 2; i++) {
			if (!p[i].scomm)
				assert_int_equal(net->connect(0, p[i].handle, &p[i].scomm, NULL),
						 ncclSuccess);
			if (!p[i].rcomm)
				assert_int_equal(net->accept(p[i].lcomm, &p[i].rcomm, &p[i].dh),
						 ncclSuccess);
		}
		sleep_ms(1);
	}
	/* A lower bound: the emulator's clock starts after t0. */
	assert_true(now_s() - t0 >= wait);
	for (int i = 0; i < 2; i++)
		emu_pair_close(&p[i]);
}

/* TCPX_EMU_NULL_BOUNCE: the unpack handle names no bounce buffer. */
static void test_null_bounce(void **state)
{
	struct emu_pair p;

	assert_int_equal(emu_pair_open(&p), 0);
	assert_int_equal(p.dh_storage.netDeviceType, NCCL_NET_DEVICE_UNPACK);
	assert_non_null(emu_unpack_handle(&p)->meta);
	assert_null(emu_unpack_handle(&p)->bounce_buf);
	emu_pair_close(&p);
}

static uint32_t env_mss(void)
{
	const char *m = getenv("TCPX_EMU_MSS");

	return m ? (uint32_t)atoi(m) : 8192;
}

/*
 * Fragments follow TCPX: packets of the path MSS (<= TCPX_EMU_MSS) cut at
 * 4 KiB page boundaries, so no record is longer than the MSS or crosses a
 * page, and a 1 MiB receive needs at least 1 MiB / MSS of them.  Tasks of
 * different sockets finish in no fixed order: over 16 receives of two
 * slices each, some receive's records are not in dst_off order.  (One
 * helper thread per socket leaves that order to the scheduler, about a
 * coin toss per receive: 16 of them all in order is a 1 in 65536 chance.)
 */
static void test_fragments(void **state)
{
	struct emu_pair p;
	const int size = 1 << 20, rounds = 16; /* one per meta ring slot */
	const uint32_t mss = env_mss();
	char *s = malloc(size), *r = malloc(size), *out = malloc(size);
	const struct tp_unpack_handle *uh;
	int unordered = 0;

	assert_int_equal(emu_pair_open(&p), 0);
	uh = emu_unpack_handle(&p);
	assert_non_null(uh);
	for (int k = 0; k < rounds; k++) {
		const tp_unpack_rec *rec = uh->meta->mem[k];
		void *rreq;
		int cnt;

		emu_fill_random(s, size, (uint32_t)k + 21);
		memset(out, 0, size);
		rreq = move_one(&p, s, r, size, k);
		cnt = emu_unpack(uh, k, out, size);
		assert_true(cnt >= (int)(size / mss));
		assert_memory_equal(out, s, size);
		for (int i = 0; i < cnt; i++) {
			assert_true(rec[i].len <= mss);
			if (i && rec[i].dst_off < rec[i - 1].dst_off)
				unordered = 1;
		}
		assert_int_equal(net->irecvConsumed(p.rcomm, 1, rreq), ncclSuccess);
	}
	assert_true(unordered);
	free(s);
	free(r);
	free(out);
	emu_pair_close(&p);
}

/*
 * A receive needing more than 2048 records is where TCPX calls exit(1):
 * the emulator fails that receive instead, says why, drains its bytes,
 * and the next transfer on the comm arrives intact.
 */
static void test_fragment_limit(void **state)
{
	struct emu_pair p;
	const int big = 4 << 20, small = 64 << 10;
	char *s = malloc(big), *r = malloc(big), *out = malloc(small);
	void *sreq, *rreq;
	ncclResult_t res;

	assert_int_equal(emu_pair_open(&p), 0);
	assert_non_null(emu_unpack_handle(&p));
	emu_fill_random(s, big, 31);
	emu_clear_warn();
	assert_int_equal(emu_irecv(&p, r, big, 0, NULL, &rreq), ncclSuccess);
	assert_int_equal(emu_isend(&p, s, big, 0, NULL, &sreq), ncclSuccess);
	assert_int_equal(emu_wait(&p, sreq, &res), 0);
	assert_int_equal(res, ncclSuccess);
	assert_int_equal(emu_wait(&p, rreq, &res), 0);
	assert_int_equal(res, ncclInternalError);
	assert_true(emu_warned("more than 2048 fragments"));
	assert_true(emu_warned("TCPX would exit(1) here"));

	emu_fill_random(s, small, 32);
	assert_int_equal(emu_irecv(&p, r, small, 1, NULL, &rreq), ncclSuccess);
	assert_int_equal(emu_isend(&p, s, small, 1, NULL, &sreq), ncclSuccess);
	assert_int_equal(emu_wait(&p, sreq, &res), 0);
	assert_int_equal(res, ncclSuccess);
	complete_recv(&p, rreq, 1, r, out, small);
	assert_memory_equal(out, s, small);
	free(s);
	free(r);
	free(out);
	emu_pair_close(&p);
}

/* A receive that could need more pages than the whole pool fails at once
 * (waiting would never end); smaller ones on the comm still work. */
static void test_pool_too_small(void **state)
{
	struct emu_pair p;
	const int big = 1 << 20, small = 64 << 10;
	char *s = malloc(big), *r = malloc(big), *out = malloc(small);
	void *sreq, *rreq;
	ncclResult_t res;

	assert_int_equal(emu_pair_open(&p), 0);
	emu_fill_random(s, big, 41);
	emu_clear_warn();
	assert_int_equal(emu_irecv(&p, r, big, 0, NULL, &rreq), ncclSuccess);
	assert_int_equal(emu_isend(&p, s, big, 0, NULL, &sreq), ncclSuccess);
	assert_int_equal(emu_wait(&p, sreq, &res), 0);
	assert_int_equal(res, ncclSuccess);
	assert_int_equal(emu_wait(&p, rreq, &res), 0);
	assert_int_equal(res, ncclInternalError);
	assert_true(emu_warned("the pool has"));
	assert_int_equal(emu_irecv(&p, r, small, 1, NULL, &rreq), ncclSuccess);
	assert_int_equal(emu_isend(&p, s, small, 1, NULL, &sreq), ncclSuccess);
	assert_int_equal(emu_wait(&p, sreq, &res), 0);
	assert_int_equal(res, ncclSuccess);
	complete_recv(&p, rreq, 1, r, out, small);
	assert_memory_equal(out, s, small);
	free(s);
	free(r);
	free(out);
	emu_pair_close(&p);
}

/* Handle bytes come from the peer: a forged connect stage names no memory
 * (docs/tcpx.md, plugin contract rule 14).  The crafted values would be a wild pointer to a plugin
 * that kept its state in the handle. */
static void test_forged_handle(void **state)
{
	const uint64_t wild = 0x4141414141414141ull;
	char handle[NCCL_NET_HANDLE_MAXSIZE], copy[NCCL_NET_HANDLE_MAXSIZE];
	void *lcomm = NULL, *scomm = NULL;
	uint32_t stage = 1, slot = 5;
	int i;

	assert_int_equal(net->listen(0, handle, &lcomm), ncclSuccess);
	/* Connecting stage, any slot, a guessed key. */
	memcpy(copy, handle, sizeof(copy));
	memcpy(copy + TP_EMU_HANDLE_STAGE_OFF, &stage, sizeof(stage));
	memcpy(copy + TP_EMU_HANDLE_PROGRESS_OFF + 4, &slot, sizeof(slot));
	memcpy(copy + TP_EMU_HANDLE_PROGRESS_OFF + 8, &wild, sizeof(wild));
	emu_clear_warn();
	assert_int_equal(net->connect(0, copy, &scomm, NULL), ncclInvalidArgument);
	assert_null(scomm);
	assert_true(emu_warned("no connect in progress"));
	/* A fresh stage with progress fields set. */
	memcpy(copy, handle, sizeof(copy));
	memcpy(copy + TP_EMU_HANDLE_PROGRESS_OFF + 8, &wild, sizeof(wild));
	emu_clear_warn();
	assert_int_equal(net->connect(0, copy, &scomm, NULL), ncclInvalidArgument);
	assert_true(emu_warned("forged"));
	/* A real connect in progress: its slot with any other key is refused,
	 * and the real one still completes afterwards. */
	memcpy(copy, handle, sizeof(copy));
	assert_int_equal(net->connect(0, copy, &scomm, NULL), ncclSuccess);
	assert_null(scomm);
	{
		char other[NCCL_NET_HANDLE_MAXSIZE];
		uint64_t key;

		memcpy(other, copy, sizeof(other));
		memcpy(&key, other + TP_EMU_HANDLE_PROGRESS_OFF + 8, sizeof(key));
		key ^= 1;
		memcpy(other + TP_EMU_HANDLE_PROGRESS_OFF + 8, &key, sizeof(key));
		assert_int_equal(net->connect(0, other, &scomm, NULL), ncclInvalidArgument);
	}
	for (i = 0; i < 10000 && !scomm; i++)
		assert_int_equal(net->connect(0, copy, &scomm, NULL), ncclSuccess);
	assert_non_null(scomm);
	assert_int_equal(net->closeSend(scomm), ncclSuccess);
	assert_int_equal(net->closeListen(lcomm), ncclSuccess);
}

/* A connect nobody advances any more is released by the next listen or
 * connect once TCPX_EMU_CONNECT_ABANDON_MS (200 ms in this registration)
 * passed: its handle then names nothing. */
static void test_abandoned_connect(void **state)
{
	char handle[NCCL_NET_HANDLE_MAXSIZE], h2[NCCL_NET_HANDLE_MAXSIZE];
	void *lcomm = NULL, *l2 = NULL, *scomm = NULL;

	assert_int_equal(net->listen(0, handle, &lcomm), ncclSuccess);
	assert_int_equal(net->connect(0, handle, &scomm, NULL), ncclSuccess);
	assert_null(scomm);
	usleep(300 * 1000);
	assert_int_equal(net->listen(0, h2, &l2), ncclSuccess);
	emu_clear_warn();
	assert_int_equal(net->connect(0, handle, &scomm, NULL), ncclInvalidArgument);
	assert_true(emu_warned("no connect in progress"));
	assert_int_equal(net->closeListen(l2), ncclSuccess);
	assert_int_equal(net->closeListen(lcomm), ncclSuccess);
}

static int setup_group(void **state)
{
	return emu_load() ? -1 : 0;
}

int main(int argc, char **argv)
{
	const char *group = argc > 1 ? argv[1] : "off";
	const struct CMUnitTest contract[] = {
		cmocka_unit_test(test_properties),
		cmocka_unit_test(test_data_integrity),
		cmocka_unit_test(test_async_connect),
		cmocka_unit_test(test_request_limit),
		cmocka_unit_test(test_fifo_rules),
		cmocka_unit_test(test_truncation),
		cmocka_unit_test(test_forged_handle),
	};
	const struct CMUnitTest bounce[] = {
		cmocka_unit_test(test_accept_needs_storage),
		cmocka_unit_test(test_unpack_handle),
		cmocka_unit_test(test_page_recycling),
	};
	const struct CMUnitTest data[] = { cmocka_unit_test(test_data_integrity) };
	const struct CMUnitTest clamp[] = { cmocka_unit_test(test_socket_clamp) };
	const struct CMUnitTest poison[] = { cmocka_unit_test(test_poison) };
	const struct CMUnitTest pool[] = { cmocka_unit_test(test_small_pool) };
	const struct CMUnitTest tiny_pool[] = { cmocka_unit_test(test_pool_too_small) };
	const struct CMUnitTest strict[] = { cmocka_unit_test(test_strict_tags) };
	const struct CMUnitTest nullreq[] = { cmocka_unit_test(test_null_requests) };
	const struct CMUnitTest progress[] = {
		cmocka_unit_test(test_bytes_move_only_in_test),
		cmocka_unit_test(test_null_mhandle),
	};
	const struct CMUnitTest accept_wait[] = { cmocka_unit_test(test_accept_wait) };
	const struct CMUnitTest null_bounce[] = { cmocka_unit_test(test_null_bounce) };
	const struct CMUnitTest mss[] = {
		cmocka_unit_test(test_fragments),
		cmocka_unit_test(test_fragment_limit),
	};
	const struct CMUnitTest reap[] = { cmocka_unit_test(test_abandoned_connect) };
	const struct CMUnitTest close_others[] = { cmocka_unit_test(test_close_fails_others) };
	const struct CMUnitTest task[] = { cmocka_unit_test(test_task_limit) };
	const struct CMUnitTest fault[] = {
		cmocka_unit_test(test_close_in_flight),
		cmocka_unit_test(test_peer_death_recv),
		cmocka_unit_test(test_peer_death_send),
	};
	int fails;

#define RUN(name, tests) cmocka_run_group_tests_name(name, tests, setup_group, NULL)
	if (!strcmp(group, "off"))
		return RUN("emu contract (bounce off)", contract) ? 1 : 0;
	if (!strcmp(group, "host")) {
		fails = RUN("emu contract (host bounce)", contract);
		return fails + RUN("emu host bounce", bounce) ? 1 : 0;
	}
	if (!strncmp(group, "data", 4))
		return RUN("emu data", data) ? 1 : 0;
	if (!strcmp(group, "clamp"))
		return RUN("emu socket clamp", clamp) ? 1 : 0;
	if (!strcmp(group, "poison"))
		return RUN("emu poison", poison) ? 1 : 0;
	if (!strcmp(group, "pool"))
		return RUN("emu small pool", pool) ? 1 : 0;
	if (!strcmp(group, "tinypool"))
		return RUN("emu pool too small", tiny_pool) ? 1 : 0;
	if (!strcmp(group, "strict"))
		return RUN("emu strict tags", strict) ? 1 : 0;
	if (!strcmp(group, "nullreq"))
		return RUN("emu null requests", nullreq) ? 1 : 0;
	if (!strcmp(group, "progress"))
		return RUN("emu strict progress", progress) ? 1 : 0;
	if (!strcmp(group, "task"))
		return RUN("emu TCPX task limit", task) ? 1 : 0;
	if (!strcmp(group, "acceptwait"))
		return RUN("emu accept wait", accept_wait) ? 1 : 0;
	if (!strcmp(group, "nullbounce"))
		return RUN("emu null bounce", null_bounce) ? 1 : 0;
	if (!strncmp(group, "mss", 3))
		return RUN("emu fragments", mss) ? 1 : 0;
	if (!strcmp(group, "closeothers"))
		return RUN("emu close fails others", close_others) ? 1 : 0;
	if (!strcmp(group, "reap"))
		return RUN("emu abandoned connects", reap) ? 1 : 0;
	if (!strcmp(group, "fault"))
		return RUN("emu faults", fault) ? 1 : 0;
	fprintf(stderr, "unknown group %s\n", group);
	return 1;
}
