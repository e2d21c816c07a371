#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "emu_harness.h"

const ncclNet_v7_t *net;

static pthread_mutex_t warn_lock = PTHREAD_MUTEX_INITIALIZER;
static char warn_last[1024];
static char warn_all[16384];
static int warn_n;
static int null_seen;

static void logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
		   const char *fmt, ...)
{
	char buf[1024];
	va_list ap;

	if (level != NCCL_LOG_WARN)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	fprintf(stderr, "[plugin WARN %s:%d] %s\n", file, line, buf);
	pthread_mutex_lock(&warn_lock);
	snprintf(warn_last, sizeof(warn_last), "%s", buf);
	if (strlen(warn_all) + strlen(buf) + 2 < sizeof(warn_all)) {
		strcat(warn_all, buf);
		strcat(warn_all, "\n");
	}
	warn_n++;
	pthread_mutex_unlock(&warn_lock);
}

const char *emu_last_warn(void)
{
	return warn_last;
}

int emu_warn_count(void)
{
	int n;

	pthread_mutex_lock(&warn_lock);
	n = warn_n;
	pthread_mutex_unlock(&warn_lock);
	return n;
}

void emu_clear_warn(void)
{
	pthread_mutex_lock(&warn_lock);
	warn_last[0] = 0;
	warn_all[0] = 0;
	warn_n = 0;
	pthread_mutex_unlock(&warn_lock);
}

int emu_warned(const char *needle)
{
	int hit;

	pthread_mutex_lock(&warn_lock);
	hit = strstr(warn_all, needle) != NULL;
	pthread_mutex_unlock(&warn_lock);
	return hit;
}

int emu_load(void)
{
	const char *path = getenv("TCPX_P2P_PLUGIN");
	void *dl;

	if (!path) {
		fprintf(stderr, "TCPX_P2P_PLUGIN is not set\n");
		return -1;
	}
	/* The contract is TCPX's: test() never writes a size.  (By default the
	 * emulator reports sizes where receives land in place, as TCP plugins
	 * do; the library's tests cover that.) */
	setenv("TCPX_EMU_SIZES", "0", 0);
	dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!dl) {
		fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
		return -1;
	}
	net = dlsym(dl, "ncclNetPlugin_v7");
	if (!net || dlsym(dl, "ncclNetPlugin_v6") || dlsym(dl, "tp__emu_listen")) {
		fprintf(stderr, "%s: want ncclNetPlugin_v7 and nothing else exported\n", path);
		return -1;
	}
	return net->init(logger) == ncclSuccess ? 0 : -1;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int emu_pair_open(struct emu_pair *p)
{
	char handle[NCCL_NET_HANDLE_MAXSIZE];
	double deadline = now() + 20;
	ncclResult_t r;

	memset(p, 0, sizeof(*p));
	p->dh = &p->dh_storage;
	if (net->listen(0, handle, &p->lcomm) != ncclSuccess)
		return -1;
	memcpy(p->handle, handle, sizeof(handle));
	while (!p->scomm || !p->rcomm) {
		if (now() > deadline) {
			fprintf(stderr, "connect/accept did not finish in 20 s\n");
			return -1;
		}
		if (!p->scomm) {
			p->connect_calls++;
			r = net->connect(0, p->handle, &p->scomm, NULL);
			if (r != ncclSuccess)
				return -1;
		}
		if (!p->rcomm) {
			p->accept_calls++;
			r = net->accept(p->lcomm, &p->rcomm, &p->dh);
			if (r != ncclSuccess)
				return -1;
		}
	}
	return 0;
}

void emu_pair_close(struct emu_pair *p)
{
	for (int i = 0; i < p->nauto; i++)
		net->deregMr(p->auto_comm[i], p->auto_mh[i]);
	if (p->scomm)
		net->closeSend(p->scomm);
	if (p->rcomm)
		net->closeRecv(p->rcomm);
	if (p->lcomm)
		net->closeListen(p->lcomm);
	memset(p, 0, sizeof(*p));
}

int emu_null_seen(void)
{
	return null_seen;
}

static int host_mh(struct emu_pair *p, void *comm, void *data, int size, void **mh)
{
	if (*mh)
		return 0;
	if (p->nauto == EMU_QUEUE ||
	    net->regMr(comm, data, size, NCCL_PTR_HOST, mh) != ncclSuccess)
		return -1;
	p->auto_comm[p->nauto] = comm;
	p->auto_mh[p->nauto++] = *mh;
	return 0;
}

static ncclResult_t queued(struct emu_queue *q, ncclResult_t r, void *req)
{
	if (r != ncclSuccess || !req)
		return r;
	if (q->n == EMU_QUEUE) {
		fprintf(stderr, "more than %d requests posted on one pair\n", EMU_QUEUE);
		return ncclInternalError;
	}
	q->req[q->n++] = req;
	return r;
}

ncclResult_t emu_isend(struct emu_pair *p, void *data, int size, int tag, void *mh, void **req)
{
	ncclResult_t r;

	if (host_mh(p, p->scomm, data, size, &mh))
		return ncclInternalError;
	for (int i = 0; i < 100000; i++) {
		r = net->isend(p->scomm, data, size, tag, mh, req);
		if (r != ncclSuccess || *req)
			return queued(&p->sq, r, *req);
		null_seen++;
	}
	return ncclInternalError;
}

ncclResult_t emu_irecv(struct emu_pair *p, void *data, int size, int tag, void *mh, void **req)
{
	ncclResult_t r;

	if (host_mh(p, p->rcomm, data, size, &mh))
		return ncclInternalError;
	for (int i = 0; i < 100000; i++) {
		r = net->irecv(p->rcomm, 1, &data, &size, &tag, &mh, req);
		if (r != ncclSuccess || *req)
			return queued(&p->rq, r, *req);
		null_seen++;
	}
	return ncclInternalError;
}

static int sizes_written;

static void pump_queue(struct emu_queue *q)
{
	int done = 0, sizes[1] = { -12345 };

	if (q->head == q->n)
		return;
	q->res[q->head] = net->test(q->req[q->head], &done, sizes);
	if (sizes[0] != -12345)
		sizes_written = 1;
	if (done || q->res[q->head] != ncclSuccess)
		q->head++;
}

void emu_pump(struct emu_pair *p)
{
	pump_queue(&p->sq);
	pump_queue(&p->rq);
}

/* Index of the latest post of req, and its queue. */
static int find(struct emu_pair *p, void *req, struct emu_queue **q)
{
	for (int side = 0; side < 2; side++) {
		*q = side ? &p->rq : &p->sq;
		for (int i = (*q)->n - 1; i >= 0; i--)
			if ((*q)->req[i] == req)
				return i;
	}
	return -1;
}

int emu_test(struct emu_pair *p, void *req, int *done, ncclResult_t *res)
{
	struct emu_queue *q;
	int i = find(p, req, &q);

	*done = 0;
	if (i < 0) {
		fprintf(stderr, "request %p was not posted through the harness\n", req);
		return -1;
	}
	if (i >= q->head)
		emu_pump(p);
	if (sizes_written) {
		fprintf(stderr, "test wrote sizes\n");
		return -1;
	}
	if (i < q->head) {
		*done = 1;
		*res = q->res[i];
	}
	return 0;
}

int emu_wait(struct emu_pair *p, void *req, ncclResult_t *res)
{
	double deadline = now() + 20;
	int done = 0;

	while (now() < deadline) {
		if (emu_test(p, req, &done, res))
			return -1;
		if (done)
			return 0;
	}
	fprintf(stderr, "request %p not done after 20 s\n", req);
	return -2;
}

const struct tp_unpack_handle *emu_unpack_handle(const struct emu_pair *p)
{
	if (p->dh_storage.netDeviceType != NCCL_NET_DEVICE_UNPACK)
		return NULL;
	return p->dh_storage.handle;
}

int emu_unpack(const struct tp_unpack_handle *uh, int slot, char *dst, uint64_t size)
{
	const struct tp_unpack_meta *meta = uh->meta;
	uint64_t cnt = __atomic_load_n(&meta->cnt[slot], __ATOMIC_ACQUIRE);
	uint64_t covered = 0;
	unsigned char *seen;

	if (cnt > TP_UNPACK_MAX_PAGES) {
		fprintf(stderr, "slot %d: %llu records\n", slot, (unsigned long long)cnt);
		return -1;
	}
	/* Records come in task completion order with any length up to a page:
	 * a byte map catches overlaps and gaps without assuming an order. */
	seen = calloc(size / 8 + 1, 1);
	if (!seen)
		return -1;
	for (uint64_t i = 0; i < cnt; i++) {
		const tp_unpack_rec *r = &meta->mem[slot][i];
		uint32_t in_page = r->src_off % TP_UNPACK_PAGE_SIZE;

		if (r->len == 0 || r->len > TP_UNPACK_PAGE_SIZE ||
		    in_page + r->len > TP_UNPACK_PAGE_SIZE || r->dst_off > size ||
		    r->len > size - r->dst_off) {
			fprintf(stderr, "slot %d record %llu bad: src %u len %u dst %llu (size %llu)\n",
				slot, (unsigned long long)i, r->src_off, r->len,
				(unsigned long long)r->dst_off, (unsigned long long)size);
			goto fail;
		}
		for (uint64_t b = r->dst_off; b < r->dst_off + r->len; b++) {
			if (seen[b / 8] & (1u << (b % 8))) {
				fprintf(stderr, "slot %d record %llu overlaps byte %llu\n", slot,
					(unsigned long long)i, (unsigned long long)b);
				goto fail;
			}
			seen[b / 8] |= (unsigned char)(1u << (b % 8));
		}
		memcpy(dst + r->dst_off, (const char *)uh->bounce_buf + r->src_off, r->len);
		covered += r->len;
	}
	free(seen);
	if (covered != size) {
		fprintf(stderr, "slot %d records cover %llu bytes, want %llu\n", slot,
			(unsigned long long)covered, (unsigned long long)size);
		return -1;
	}
	return (int)cnt;

fail:
	free(seen);
	return -1;
}

void emu_fill_random(void *buf, size_t n, uint32_t seed)
{
	unsigned char *p = buf;
	uint32_t x = seed * 2654435761u + 1;

	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		p[i] = (unsigned char)(x >> 24);
	}
}
