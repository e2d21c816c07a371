/* The protobuf wire format's few pieces the RxDM's messages need (pb.h). */
#include "pb.h"

#include <errno.h>
#include <string.h>

enum { WIRE_VARINT = 0, WIRE_I64 = 1, WIRE_LEN = 2, WIRE_I32 = 5 };

struct reader {
	const uint8_t *p, *end;
};

static int get_varint(struct reader *r, uint64_t *v)
{
	*v = 0;
	for (int shift = 0; shift < 64; shift += 7) {
		if (r->p == r->end)
			return -1;
		uint8_t b = *r->p++;
		*v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return 0;
	}
	return -1;
}

/* One field of a message: its number and wire type; a varint's value in
 * v, a length-delimited field's bytes in data (len long). */
struct field {
	uint32_t num, wire;
	uint64_t v;
	const uint8_t *data;
	size_t len;
};

/* The next field: 1, 0 at the end, -1 for malformed bytes.  Fixed-size
 * fields are skipped over but reported. */
static int next_field(struct reader *r, struct field *f)
{
	uint64_t key;
	if (r->p == r->end)
		return 0;
	if (get_varint(r, &key) || (key >> 3) == 0 || (key >> 3) > UINT32_MAX)
		return -1;
	f->num = (uint32_t)(key >> 3);
	f->wire = (uint32_t)(key & 7);
	switch (f->wire) {
	case WIRE_VARINT:
		return get_varint(r, &f->v) ? -1 : 1;
	case WIRE_I64:
	case WIRE_I32: {
		size_t n = f->wire == WIRE_I64 ? 8 : 4;
		if ((size_t)(r->end - r->p) < n)
			return -1;
		r->p += n;
		return 1;
	}
	case WIRE_LEN:
		if (get_varint(r, &f->v) || f->v > (uint64_t)(r->end - r->p))
			return -1;
		f->data = r->p;
		f->len = (size_t)f->v;
		r->p += f->len;
		return 1;
	default:
		return -1; /* groups are not used by these messages */
	}
}

static int copy_string(char *dst, size_t cap, const uint8_t *s, size_t n)
{
	if (n >= cap || memchr(s, 0, n))
		return -1;
	memcpy(dst, s, n);
	dst[n] = '\0';
	return 0;
}

/* SocketAddress { string ip_address = 1; int32 port = 2; } */
static int parse_address(const uint8_t *buf, size_t len, char *ip, size_t cap, int *port)
{
	struct reader r = {buf, buf + len};
	struct field f = {0};
	int rc;
	while ((rc = next_field(&r, &f)) == 1) {
		if (f.num == 1 && f.wire == WIRE_LEN && copy_string(ip, cap, f.data, f.len))
			return -1;
		if (f.num == 2 && f.wire == WIRE_VARINT) {
			if (f.v > 65535)
				return -1;
			*port = (int)f.v;
		}
	}
	return rc;
}

/* FlowSteerNtupleProto { int32 flow_type = 1; SocketAddress src = 2, dst = 3; } */
static int parse_ntuple(const uint8_t *buf, size_t len, struct rxdm_rule *rule)
{
	struct reader r = {buf, buf + len};
	struct field f = {0};
	int rc;
	while ((rc = next_field(&r, &f)) == 1) {
		if (f.num == 1 && f.wire == WIRE_VARINT)
			rule->flow_type = (int)f.v;
		else if (f.num == 2 && f.wire == WIRE_LEN &&
			 parse_address(f.data, f.len, rule->src_ip, sizeof(rule->src_ip), &rule->src_port))
			return -1;
		else if (f.num == 3 && f.wire == WIRE_LEN &&
			 parse_address(f.data, f.len, rule->dst_ip, sizeof(rule->dst_ip), &rule->dst_port))
			return -1;
	}
	return rc;
}

/* FlowSteerRuleRequest { ntuple = 1; int32 queue_id = 2; string gpu_pci_addr = 3; } */
static int parse_rule(const uint8_t *buf, size_t len, struct rxdm_rule *rule)
{
	struct reader r = {buf, buf + len};
	struct field f = {0};
	int rc;
	memset(rule, 0, sizeof(*rule));
	rule->queue_id = -1;
	while ((rc = next_field(&r, &f)) == 1) {
		if (f.num == 1 && f.wire == WIRE_LEN && parse_ntuple(f.data, f.len, rule))
			return -1;
		else if (f.num == 2 && f.wire == WIRE_VARINT)
			rule->queue_id = (int)(int32_t)f.v;
		else if (f.num == 3 && f.wire == WIRE_LEN &&
			 copy_string(rule->gpu, sizeof(rule->gpu), f.data, f.len))
			return -1;
	}
	return rc;
}

int rxdm_parse(const uint8_t *buf, size_t len, struct rxdm_request *req)
{
	struct reader r = {buf, buf + len};
	struct field f = {0};
	int rc, seen = 0;
	memset(req, 0, sizeof(*req));
	while ((rc = next_field(&r, &f)) == 1) {
		if (f.wire != WIRE_LEN)
			continue;
		if (f.num == 1) {
			req->kind = RXDM_REQ_RAW;
			req->raw = f.data;
			req->raw_len = f.len;
			seen = 1;
		} else if (f.num == 2) {
			if (parse_rule(f.data, f.len, &req->rule))
				return -EPROTO;
			req->kind = RXDM_REQ_RULE;
			seen = 1;
		} else if (f.num == 6) {
			/* ApplicationRegisterRequest { bool register_client = 1; } */
			struct reader a = {f.data, f.data + f.len};
			struct field g = {0};
			int rc2;
			while ((rc2 = next_field(&a, &g)) == 1)
				if (g.num == 1 && g.wire == WIRE_VARINT)
					req->register_client = g.v != 0;
			if (rc2 < 0)
				return -EPROTO;
			req->kind = RXDM_REQ_REGISTER;
			seen = 1;
		}
	}
	return rc < 0 || !seen ? -EPROTO : 0;
}

static size_t put_varint(uint8_t *out, size_t cap, uint64_t v)
{
	size_t n = 0;
	do {
		if (n == cap)
			return 0;
		out[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
		v >>= 7;
	} while (v);
	return n;
}

/* key, length, bytes; 0 when it does not fit. */
static size_t put_len(uint8_t *out, size_t cap, uint32_t field, const void *data, size_t len)
{
	size_t k = put_varint(out, cap, (uint64_t)field << 3 | WIRE_LEN);
	size_t l = k ? put_varint(out + k, cap - k, len) : 0;
	if (!k || !l || cap - k - l < len)
		return 0;
	memcpy(out + k + l, data, len);
	return k + l + len;
}

static size_t put_int(uint8_t *out, size_t cap, uint32_t field, int64_t v)
{
	size_t k = put_varint(out, cap, (uint64_t)field << 3 | WIRE_VARINT);
	size_t l = k ? put_varint(out + k, cap - k, (uint64_t)v) : 0;
	return k && l ? k + l : 0;
}

size_t rxdm_put_raw(uint8_t *out, size_t cap, const void *data, size_t len)
{
	return put_len(out, cap, 1, data, len);
}

static size_t put_address(uint8_t *out, size_t cap, const char *ip, int port)
{
	size_t a = put_len(out, cap, 1, ip, strlen(ip));
	size_t b = a ? put_int(out + a, cap - a, 2, port) : 0;
	return a && b ? a + b : 0;
}

size_t rxdm_put_rule(uint8_t *out, size_t cap, const struct rxdm_rule *rule)
{
	uint8_t src[96], dst[96], tuple[256], req[320];
	size_t ns = put_address(src, sizeof(src), rule->src_ip, rule->src_port);
	size_t nd = put_address(dst, sizeof(dst), rule->dst_ip, rule->dst_port);
	size_t nt = put_int(tuple, sizeof(tuple), 1, rule->flow_type);
	size_t x;
	if (!ns || !nd || !nt)
		return 0;
	if (!(x = put_len(tuple + nt, sizeof(tuple) - nt, 2, src, ns)))
		return 0;
	nt += x;
	if (!(x = put_len(tuple + nt, sizeof(tuple) - nt, 3, dst, nd)))
		return 0;
	nt += x;
	size_t nr = put_len(req, sizeof(req), 1, tuple, nt);
	if (!nr)
		return 0;
	if (rule->queue_id >= 0) {
		if (!(x = put_int(req + nr, sizeof(req) - nr, 2, rule->queue_id)))
			return 0;
		nr += x;
	}
	if (rule->gpu[0]) {
		if (!(x = put_len(req + nr, sizeof(req) - nr, 3, rule->gpu, strlen(rule->gpu))))
			return 0;
		nr += x;
	}
	return put_len(out, cap, 2, req, nr);
}
