/* Just enough of the protobuf wire format for the RxDM's few messages
 * (UnixSocketProto and the flow-steering request inside it). */
#ifndef TCPXSIM_PB_H
#define TCPXSIM_PB_H

#include <stddef.h>
#include <stdint.h>

enum rxdm_kind { RXDM_REQ_RAW = 1, RXDM_REQ_RULE, RXDM_REQ_REGISTER };

struct rxdm_rule {
	int flow_type;      /* TCP_V4_FLOW or TCP_V6_FLOW (ethtool numbering) */
	char src_ip[64];    /* the peer, as the receiver sees it */
	int src_port;
	char dst_ip[64];    /* the receiving socket's own address */
	int dst_port;
	char gpu[32];       /* the GPU whose bounce buffer takes the flow */
	int queue_id;       /* -1 when not given */
};

struct rxdm_request {
	enum rxdm_kind kind;
	const uint8_t *raw;  /* RXDM_REQ_RAW: points into the parsed buffer */
	size_t raw_len;
	struct rxdm_rule rule;
	int register_client; /* RXDM_REQ_REGISTER */
};

/* Parse a serialized UnixSocketProto: 0, or -EPROTO for bytes that are not
 * one (truncated, a wrong wire type, an oversized string, no payload). */
int rxdm_parse(const uint8_t *buf, size_t len, struct rxdm_request *req);

/* Serialize UnixSocketProto{raw_bytes = data}: its length, or 0 when it
 * does not fit in `cap`. */
size_t rxdm_put_raw(uint8_t *out, size_t cap, const void *data, size_t len);

/* Serialize UnixSocketProto{flow_steer_rule_request = rule} (what a TCPX
 * plugin sends; the tests use it to play the plugin). */
size_t rxdm_put_rule(uint8_t *out, size_t cap, const struct rxdm_rule *rule);

#endif
