/*
 * Shared helpers for the emulator contract tests: load the plugin named by
 * TCPX_P2P_PLUGIN, capture its warnings, open loopback comm pairs and
 * drive requests with deadlines so a broken plugin fails instead of hanging.
 */
#ifndef TP_EMU_HARNESS_H
#define TP_EMU_HARNESS_H

#include <stddef.h>
#include <stdint.h>

#include "abi/nccl_net.h"

extern const ncclNet_v7_t *net;

/* 0 on success; -1 with a message on stderr. */
int emu_load(void);

/* The most recent WARN line and the number seen since the last clear. */
const char *emu_last_warn(void);
int emu_warn_count(void);
void emu_clear_warn(void);
int emu_warned(const char *needle);

/* Requests posted on one side, in posting order, and what test said. */
#define EMU_QUEUE 1024
struct emu_queue {
	void *req[EMU_QUEUE];
	ncclResult_t res[EMU_QUEUE];
	int n;    /* posted */
	int head; /* [0, head) reported done by test */
};

struct emu_pair {
	void *lcomm;
	void *scomm;
	void *rcomm;
	ncclNetDeviceHandle_v7_t dh_storage;
	ncclNetDeviceHandle_v7_t *dh;
	char handle[NCCL_NET_HANDLE_MAXSIZE];  /* the connector's private copy */
	int connect_calls;
	int accept_calls;
	/* The plugin moves bytes only inside test() (docs/tcpx.md, plugin
	 * contract rule 12): waiting on one request tests the oldest open
	 * request of both sides, as a real caller's progress loop must. */
	struct emu_queue sq, rq;
	/* Registrations the helpers made for posts given no mhandle. */
	void *auto_mh[EMU_QUEUE];
	void *auto_comm[EMU_QUEUE];
	int nauto;
};

int emu_pair_open(struct emu_pair *p);
void emu_pair_close(struct emu_pair *p);

/* Posts, retrying while the plugin answers with a NULL request.  A NULL mh
 * registers [data, data + size) as host memory on that comm first (the
 * plugin refuses NULL mhandles, as TCPX does). */
ncclResult_t emu_isend(struct emu_pair *p, void *data, int size, int tag, void *mh,
		       void **req);
ncclResult_t emu_irecv(struct emu_pair *p, void *data, int size, int tag, void *mh,
		       void **req);

/* Tests the oldest open request of each side once. */
void emu_pump(struct emu_pair *p);

/* Pumps until req (the latest post of that pointer) was reported done or
 * failed; -2 on a 20 s deadline, -1 when test wrote sizes. */
int emu_wait(struct emu_pair *p, void *req, ncclResult_t *res);

/* One pump; *done says whether req was reported. */
int emu_test(struct emu_pair *p, void *req, int *done, ncclResult_t *res);

/* The unpack handle and meta ring of a bounce-mode receive comm (host mode). */
const struct tp_unpack_handle *emu_unpack_handle(const struct emu_pair *p);

/*
 * Checks the records of slot (each 1..4096 bytes within one page and inside
 * [0, size); together covering it once, in any order) and gathers them
 * into dst.  Returns the record count, or -1 with a message on stderr.
 */
int emu_unpack(const struct tp_unpack_handle *uh, int slot, char *dst, uint64_t size);

void emu_fill_random(void *buf, size_t n, uint32_t seed);
int emu_null_seen(void);

#endif
