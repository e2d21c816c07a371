/*
 * MemNet: an in-process NCCL net plugin (ncclNetPlugin_v7) for measuring
 * the library's own cost, nothing else (bench/chunk_cost.c,
 * scripts/chunk_cost.sh).  Both peers live in one process: listen()
 * registers a comm pair under an id that the handle carries, connect()
 * finds it by that id, accept() returns the receive end once the connect
 * happened ("not ready", a NULL comm, before).  There are no threads, no
 * sockets and no bounce buffer (netDeviceType HOST, so the library takes
 * its no-unpack path), and a request costs a few dozen instructions, so
 * that what a profile sees besides the library is small and constant.
 *
 * The contract the library relies on, as with TCPX: at most MN_QUEUE
 * requests per comm (a full FIFO answers a NULL request, "not now"); the
 * k-th receive of a comm matches the k-th send of its peer; the receiver
 * never learns the sent size (a send may be smaller than the posted
 * receive: the control channel posts 64 KiB frames and sends less), and
 * bytes move only inside test().  A receive completes in test() once its
 * send was posted, and completes that send with it.
 *
 * Only sends of at most MN_COPY_MAX bytes are copied: the library's
 * control frames must arrive intact, while data chunks need not for a
 * cost measurement (with chunks of at most 64 KiB they are copied too,
 * which chunk_cost --verify checks).  Not for moving data.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "abi/nccl_net.h"

#define MN_QUEUE 16               /* requests per comm, as TCPX */
#define MN_COPY_MAX (64u << 10)   /* the library's control frame */
#define MN_MAGIC 0x54454e4d454d4e4dULL /* "MNMEMNET" */

#define MN_WARN(...)                                                                   \
	do {                                                                           \
		if (mn_logger)                                                         \
			mn_logger(NCCL_LOG_WARN, ~0UL, __FILE__, __LINE__, __VA_ARGS__);   \
	} while (0)

struct mn_pair;

struct mn_req {
	struct mn_pair *pair;
	void *data;
	size_t size;
	uint32_t seq;       /* position in its comm's FIFO */
	bool send;
	bool busy;          /* posted, done not yet reported */
	bool done;
};

/* The send end and the receive end of one channel. */
struct mn_comm {
	struct mn_pair *pair;
	bool send;
};

struct mn_pair {
	pthread_mutex_t lock;     /* the FIFOs below */
	uint64_t id;
	struct mn_comm tx, rx;
	struct mn_req sreq[MN_QUEUE], rreq[MN_QUEUE];
	uint32_t nsend, nrecv;    /* requests posted so far */
	/* Under the registry lock: */
	bool listening, connected, accepted;
	int refs;                 /* listen comm, send end, receive end */
	struct mn_pair *next;
};

struct mn_handle {
	uint64_t magic;
	uint64_t id;
};

static ncclDebugLogger_t mn_logger;
static pthread_mutex_t mn_registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mn_pair *mn_registry;
static uint64_t mn_next_id;
static int mn_dummy_mr; /* every registration's handle: never NULL */

/* The registry lock is held. */
static void pair_put(struct mn_pair *p)
{
	struct mn_pair **pp;

	if (--p->refs)
		return;
	for (pp = &mn_registry; *pp; pp = &(*pp)->next) {
		if (*pp == p) {
			*pp = p->next;
			break;
		}
	}
	pthread_mutex_destroy(&p->lock);
	free(p);
}

static ncclResult_t mn_init(ncclDebugLogger_t logger)
{
	mn_logger = logger;
	return ncclSuccess;
}

static ncclResult_t mn_devices(int *ndev)
{
	*ndev = 1;
	return ncclSuccess;
}

static char mn_name[] = "memnet";
static char mn_pci[] = "";

static ncclResult_t mn_get_properties(int dev, ncclNetProperties_v7_t *props)
{
	if (dev != 0)
		return ncclInvalidArgument;
	memset(props, 0, sizeof(*props));
	props->name = mn_name;
	props->pciPath = mn_pci;
	props->ptrSupport = NCCL_PTR_HOST;
	props->speed = 100000;
	props->maxComms = 65536;
	props->maxRecvs = 1;
	props->netDeviceType = NCCL_NET_DEVICE_HOST;
	props->netDeviceVersion = NCCL_NET_DEVICE_INVALID_VERSION;
	return ncclSuccess;
}

static ncclResult_t mn_listen(int dev, void *handle, void **listen_comm)
{
	struct mn_handle *h = handle;
	struct mn_pair *p;

	if (dev != 0)
		return ncclInvalidArgument;
	p = calloc(1, sizeof(*p));
	if (!p)
		return ncclSystemError;
	pthread_mutex_init(&p->lock, NULL);
	p->tx = (struct mn_comm){ p, true };
	p->rx = (struct mn_comm){ p, false };
	p->listening = true;
	p->refs = 1;
	pthread_mutex_lock(&mn_registry_lock);
	p->id = ++mn_next_id;
	p->next = mn_registry;
	mn_registry = p;
	pthread_mutex_unlock(&mn_registry_lock);
	memset(h, 0, NCCL_NET_HANDLE_MAXSIZE);
	h->magic = MN_MAGIC;
	h->id = p->id;
	*listen_comm = p;
	return ncclSuccess;
}

static ncclResult_t mn_connect(int dev, void *handle, void **send_comm,
			       ncclNetDeviceHandle_v7_t **dev_handle)
{
	const struct mn_handle *h = handle;
	ncclResult_t ret = ncclInvalidArgument;
	struct mn_pair *p;

	*send_comm = NULL;
	if (dev != 0 || h->magic != MN_MAGIC)
		return ncclInvalidArgument;
	pthread_mutex_lock(&mn_registry_lock);
	for (p = mn_registry; p && p->id != h->id; p = p->next)
		;
	if (p && p->listening && !p->connected) {
		p->connected = true;
		p->refs++;
		*send_comm = &p->tx;
		ret = ncclSuccess;
	}
	pthread_mutex_unlock(&mn_registry_lock);
	if (ret != ncclSuccess)
		MN_WARN("memnet connect: no listen comm %llu in this process, or it is connected",
			(unsigned long long)h->id);
	return ret;
}

static ncclResult_t mn_accept(void *listen_comm, void **recv_comm,
			      ncclNetDeviceHandle_v7_t **dev_handle)
{
	struct mn_pair *p = listen_comm;
	ncclResult_t ret = ncclSuccess;

	*recv_comm = NULL;
	pthread_mutex_lock(&mn_registry_lock);
	if (p->accepted) {
		ret = ncclInvalidUsage;
	} else if (p->connected) {
		p->accepted = true;
		p->refs++;
		*recv_comm = &p->rx;
		/* No device offload: the library reads the received bytes where
		 * it posted them. */
		if (dev_handle && *dev_handle)
			memset(*dev_handle, 0, sizeof(**dev_handle));
	}
	pthread_mutex_unlock(&mn_registry_lock);
	return ret;
}

static ncclResult_t mn_reg_mr(void *comm, void *data, int size, int type, void **mhandle)
{
	if (type != NCCL_PTR_HOST)
		return ncclInvalidArgument;
	*mhandle = &mn_dummy_mr;
	return ncclSuccess;
}

static ncclResult_t mn_dereg_mr(void *comm, void *mhandle)
{
	return ncclSuccess;
}

/* Queue a request at the tail of its comm's FIFO; a full FIFO is "not now". */
static void post(struct mn_comm *c, void *data, int size, void **request)
{
	struct mn_pair *p = c->pair;
	uint32_t *n = c->send ? &p->nsend : &p->nrecv;
	struct mn_req *r;

	pthread_mutex_lock(&p->lock);
	r = c->send ? &p->sreq[*n % MN_QUEUE] : &p->rreq[*n % MN_QUEUE];
	if (r->busy) {
		*request = NULL;
	} else {
		*r = (struct mn_req){ p, data, (size_t)size, *n, c->send, true, false };
		(*n)++;
		*request = r;
	}
	pthread_mutex_unlock(&p->lock);
}

static ncclResult_t mn_isend(void *send_comm, void *data, int size, int tag, void *mhandle,
			     void **request)
{
	struct mn_comm *c = send_comm;

	if (!c->send || size < 0)
		return ncclInvalidArgument;
	post(c, data, size, request);
	return ncclSuccess;
}

static ncclResult_t mn_irecv(void *recv_comm, int n, void **data, int *sizes, int *tags,
			     void **mhandles, void **request)
{
	struct mn_comm *c = recv_comm;

	if (c->send || n != 1 || sizes[0] < 0)
		return ncclInvalidArgument;
	post(c, data[0], sizes[0], request);
	return ncclSuccess;
}

static ncclResult_t mn_test(void *request, int *done, int *sizes)
{
	struct mn_req *r = request, *s;
	struct mn_pair *p = r->pair;
	size_t n;

	pthread_mutex_lock(&p->lock);
	/* A receive completes with the send of its FIFO position; that send
	 * cannot have been reused yet, since it completes only here. */
	if (!r->send && !r->done && (int32_t)(p->nsend - r->seq) > 0) {
		s = &p->sreq[r->seq % MN_QUEUE];
		/* TCPX semantics: the posted receive may be larger than the
		 * send; min() only keeps a library bug from overrunning. */
		n = s->size < r->size ? s->size : r->size;
		if (n <= MN_COPY_MAX)
			memcpy(r->data, s->data, n);
		r->done = s->done = true;
	}
	*done = r->done;
	if (r->done)
		r->busy = false; /* reported: the slot may take the next request */
	pthread_mutex_unlock(&p->lock);
	return ncclSuccess;
}

static ncclResult_t mn_close(struct mn_comm *c)
{
	pthread_mutex_lock(&mn_registry_lock);
	pair_put(c->pair);
	pthread_mutex_unlock(&mn_registry_lock);
	return ncclSuccess;
}

static ncclResult_t mn_close_send(void *send_comm)
{
	return mn_close(send_comm);
}

static ncclResult_t mn_close_recv(void *recv_comm)
{
	return mn_close(recv_comm);
}

static ncclResult_t mn_close_listen(void *listen_comm)
{
	struct mn_pair *p = listen_comm;

	pthread_mutex_lock(&mn_registry_lock);
	p->listening = false;
	pair_put(p);
	pthread_mutex_unlock(&mn_registry_lock);
	return ncclSuccess;
}

static ncclResult_t mn_irecv_consumed(void *recv_comm, int n, void *request)
{
	return ncclSuccess;
}

__attribute__((visibility("default"))) const ncclNet_v7_t ncclNetPlugin_v7 = {
	.name = "MemNet_v7",
	.init = mn_init,
	.devices = mn_devices,
	.getProperties = mn_get_properties,
	.listen = mn_listen,
	.connect = mn_connect,
	.accept = mn_accept,
	.regMr = mn_reg_mr,
	.regMrDmaBuf = NULL,
	.deregMr = mn_dereg_mr,
	.isend = mn_isend,
	.irecv = mn_irecv,
	.iflush = NULL,
	.test = mn_test,
	.closeSend = mn_close_send,
	.closeRecv = mn_close_recv,
	.closeListen = mn_close_listen,
	.getDeviceMr = NULL,
	.irecvConsumed = mn_irecv_consumed,
};
