/* Exports of this side's memory to the peer and imports of the peer's
 * (api.h: no lock held on entry; each takes the conn's lock).  A peer's
 * write or read is checked against the exports in items/export.c. */
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "core/api/api.h"
#include "core/conn.h"
#include "core/items/items.h"
#include "core/mr.h"
#include "core/session.h"
#include "util/error.h"

#define TP_RDESC_MAGIC 0x52585054u /* "TPXR" */
#define TP_RDESC_VERSION 2u /* 2: 128-bit keys */
/* A descriptor: u32 magic, u8 version, u8 memory type, u8 access, u8 0,
 * u32 export index, u32 0, u64 length, the key, zeros to 64 bytes. */
#define TP_RDESC_KEY 24

int tcpx_p2p_mr_export(tcpx_p2p_conn *c, tcpx_p2p_mr *mr, size_t offset, size_t len,
		       unsigned access, tcpx_p2p_rdesc *out)
{
	unsigned char key[TP_KEY_BYTES];
	struct tp_items *r;
	struct tp_export *e;
	unsigned char *d;
	int rc = 0;

	if (!c || !mr || !out)
		return tp__error(TCPX_P2P_EINVAL, "mr_export: NULL argument");
	rc = tp__redial_use(&c, "mr_export");
	if (rc)
		return rc;
	if (mr->s != c->s)
		return tp__error(TCPX_P2P_EINVAL, "mr_export: mr of another session");
	if (!access || (access & ~(unsigned)(TCPX_P2P_ACCESS_WRITE | TCPX_P2P_ACCESS_READ)))
		return tp__error(TCPX_P2P_EINVAL, "mr_export: access 0x%x", access);
	if (offset > mr->len || len > mr->len - offset)
		return tp__error(TCPX_P2P_EINVAL, "mr_export: [%zu, +%zu) outside the %zu-byte "
				 "region", offset, len, mr->len);
	if (getrandom(key, sizeof(key), 0) != sizeof(key))
		return tp__error(TCPX_P2P_ENET, "mr_export: no random bytes");
	pthread_mutex_lock(&c->lock);
	r = c->items;
	if (c->err) {
		rc = tp__error(c->err, "mr_export: the connection failed earlier: %s", c->why);
	} else if (r->nexp == r->cap) {
		uint32_t cap = r->cap ? 2 * r->cap : 8;

		e = realloc(r->exp, cap * sizeof(*e));
		if (e) {
			r->exp = e;
			r->cap = cap;
		} else {
			rc = tp__error(TCPX_P2P_ENOMEM, "mr_export: out of memory");
		}
	}
	if (!rc) {
		e = &r->exp[r->nexp];
		*e = (struct tp_export){ .mr_id = mr->id, .off = offset, .len = len,
					 .access = access, .type = mr->type };
		memcpy(e->key, key, TP_KEY_BYTES);
		memset(out, 0, sizeof(*out));
		d = out->bytes;
		tp_put32(d, TP_RDESC_MAGIC);
		d[4] = TP_RDESC_VERSION;
		d[5] = (unsigned char)mr->type;
		d[6] = (unsigned char)access;
		tp_put32(d + 8, r->nexp);
		tp_put64(d + 16, len);
		memcpy(d + TP_RDESC_KEY, key, TP_KEY_BYTES);
		r->nexp++;
	}
	pthread_mutex_unlock(&c->lock);
	return rc;
}

int tcpx_p2p_mr_unexport(tcpx_p2p_conn *c, const tcpx_p2p_rdesc *desc)
{
	const unsigned char *d;
	struct tp_export *e;
	uint32_t idx;
	int rc = 0;

	if (!c || !desc)
		return tp__error(TCPX_P2P_EINVAL, "mr_unexport: NULL argument");
	rc = tp__redial_use(&c, "mr_unexport");
	if (rc)
		return rc;
	d = desc->bytes;
	idx = tp_get32(d + 8);
	pthread_mutex_lock(&c->lock);
	e = tp_get32(d) == TP_RDESC_MAGIC && d[4] == TP_RDESC_VERSION && idx < c->items->nexp
		    ? &c->items->exp[idx]
		    : NULL;
	if (!e || !tp__items_key_equal(e->key, d + TP_RDESC_KEY))
		rc = tp__error(TCPX_P2P_EINVAL, "mr_unexport: not a descriptor exported on this "
			       "connection");
	else
		e->revoked = true; /* every later use is refused; accepted ones finish */
	pthread_mutex_unlock(&c->lock);
	return rc;
}

int tcpx_p2p_rmr_import(tcpx_p2p_conn *c, const tcpx_p2p_rdesc *desc, tcpx_p2p_rmr **out)
{
	const unsigned char *d;
	struct tcpx_p2p_rmr *m;
	int rc;

	if (!c || !desc || !out)
		return tp__error(TCPX_P2P_EINVAL, "rmr_import: NULL argument");
	rc = tp__redial_use(&c, "rmr_import");
	if (rc)
		return rc;
	d = desc->bytes;
	if (tp_get32(d) != TP_RDESC_MAGIC || d[4] != TP_RDESC_VERSION ||
	    (d[5] != TCPX_P2P_MEM_HOST && d[5] != TCPX_P2P_MEM_CUDA) || !d[6] ||
	    (d[6] & ~(TCPX_P2P_ACCESS_WRITE | TCPX_P2P_ACCESS_READ)))
		return tp__error(TCPX_P2P_EPROTO, "rmr_import: not a region descriptor of this "
				 "version");
	m = calloc(1, sizeof(*m));
	if (!m)
		return tp__error(TCPX_P2P_ENOMEM, "rmr_import: out of memory");
	m->c = c;
	m->type = d[5];
	m->access = d[6];
	m->idx = tp_get32(d + 8);
	memcpy(m->key, d + TP_RDESC_KEY, TP_KEY_BYTES);
	m->len = (size_t)tp_get64(d + 16);
	*out = m;
	return 0;
}

int tcpx_p2p_rmr_query(const tcpx_p2p_rmr *r, size_t *len, int *mem_type, unsigned *access)
{
	if (!r)
		return tp__error(TCPX_P2P_EINVAL, "rmr_query: NULL rmr");
	if (len)
		*len = r->len;
	if (mem_type)
		*mem_type = r->type;
	if (access)
		*access = r->access;
	return 0;
}

int tcpx_p2p_rmr_release(tcpx_p2p_rmr *r)
{
	free(r);
	return 0;
}
