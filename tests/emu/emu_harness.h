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

struct emu_pair {
	void *lcomm;
	void *scomm;
	void *rcomm;
	ncclNetDeviceHandle_v7_t dh_storage;
	ncclNetDeviceHandle_v7_t *dh;
	char handle[NCCL_NET_HANDLE_MAXSIZE];  /* the connector's private copy */
	int connect_calls;
	int accept_calls;
};

int emu_pair_open(struct emu_pair *p);
void emu_pair_close(struct emu_pair *p);

/* Posts, retrying while the plugin answers with a NULL request. */
ncclResult_t emu_isend(struct emu_pair *p, void *data, int size, int tag, void *mh,
		       void **req);
ncclResult_t emu_irecv(struct emu_pair *p, void *data, int size, int tag, void *mh,
		       void **req);

/* Tests until done or error; -2 on a 20 s deadline. */
int emu_wait(void *req, ncclResult_t *res);

/* The unpack handle and meta ring of a bounce-mode receive comm (host mode). */
const struct tp_unpack_handle *emu_unpack_handle(const struct emu_pair *p);

/*
 * Checks the records of slot (within one page, <= 4096, >= 2048 but the
 * last, dst ascending and covering [0, size)) and gathers them into dst.
 * Returns the record count, or -1 with a cmocka-visible message on error.
 */
int emu_unpack(const struct tp_unpack_handle *uh, int slot, char *dst, uint64_t size);

void emu_fill_random(void *buf, size_t n, uint32_t seed);
int emu_null_seen(void);

#endif
