/* The RxDM messages against bytes the protobuf compiler made from the
 * TCPX plugin's unix_socket_proto.proto (protoc --encode=UnixSocketProto). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "pb.h"

/* flow_steer_rule_request { flow_steer_ntuple { flow_type: 1
 *   src { ip_address: "127.0.0.1" port: 40000 }
 *   dst { ip_address: "127.0.0.1" port: 5000 } }
 *   queue_id: 3 gpu_pci_addr: "0000:04:00.0" } */
static const uint8_t rule_bytes[] = {
	0x12, 0x35, 0x0a, 0x23, 0x08, 0x01, 0x12, 0x0f, 0x0a, 0x09, 0x31, 0x32, 0x37, 0x2e,
	0x30, 0x2e, 0x30, 0x2e, 0x31, 0x10, 0xc0, 0xb8, 0x02, 0x1a, 0x0e, 0x0a, 0x09, 0x31,
	0x32, 0x37, 0x2e, 0x30, 0x2e, 0x30, 0x2e, 0x31, 0x10, 0x88, 0x27, 0x10, 0x03, 0x1a,
	0x0c, 0x30, 0x30, 0x30, 0x30, 0x3a, 0x30, 0x34, 0x3a, 0x30, 0x30, 0x2e, 0x30};
static const uint8_t ok_bytes[] = {0x0a, 0x03, 0x4f, 0x6b, 0x2e}; /* raw_bytes: "Ok." */
static const uint8_t register_bytes[] = {0x32, 0x02, 0x08, 0x01};

static void test_parse_rule(void **state)
{
	struct rxdm_request req;
	assert_int_equal(rxdm_parse(rule_bytes, sizeof(rule_bytes), &req), 0);
	assert_int_equal(req.kind, RXDM_REQ_RULE);
	assert_int_equal(req.rule.flow_type, 1);
	assert_string_equal(req.rule.src_ip, "127.0.0.1");
	assert_int_equal(req.rule.src_port, 40000);
	assert_string_equal(req.rule.dst_ip, "127.0.0.1");
	assert_int_equal(req.rule.dst_port, 5000);
	assert_int_equal(req.rule.queue_id, 3);
	assert_string_equal(req.rule.gpu, "0000:04:00.0");
}

static void test_put_matches_protoc(void **state)
{
	uint8_t out[256];
	struct rxdm_request req;
	assert_int_equal(rxdm_put_raw(out, sizeof(out), "Ok.", 3), sizeof(ok_bytes));
	assert_memory_equal(out, ok_bytes, sizeof(ok_bytes));
	assert_int_equal(rxdm_parse(rule_bytes, sizeof(rule_bytes), &req), 0);
	assert_int_equal(rxdm_put_rule(out, sizeof(out), &req.rule), sizeof(rule_bytes));
	assert_memory_equal(out, rule_bytes, sizeof(rule_bytes));
	assert_int_equal(rxdm_put_raw(out, 4, "Ok.", 3), 0); /* no room */
}

static void test_parse_raw_and_register(void **state)
{
	struct rxdm_request req;
	assert_int_equal(rxdm_parse(ok_bytes, sizeof(ok_bytes), &req), 0);
	assert_int_equal(req.kind, RXDM_REQ_RAW);
	assert_int_equal(req.raw_len, 3);
	assert_memory_equal(req.raw, "Ok.", 3);
	assert_int_equal(rxdm_parse(register_bytes, sizeof(register_bytes), &req), 0);
	assert_int_equal(req.kind, RXDM_REQ_REGISTER);
	assert_int_equal(req.register_client, 1);
}

/* Every truncation of a valid message, and a few hostile ones, are refused
 * or parsed without reading past the end (ASan watches). */
static void test_hostile(void **state)
{
	struct rxdm_request req;
	for (size_t n = 0; n < sizeof(rule_bytes); n++) {
		uint8_t copy[sizeof(rule_bytes)];
		memcpy(copy, rule_bytes, n);
		int rc = rxdm_parse(copy, n, &req);
		assert_true(rc == 0 || rc == -71);
	}
	assert_int_equal(rxdm_parse(rule_bytes, 0, &req), -71); /* nothing in it */
	static const uint8_t long_len[] = {0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x00};
	assert_int_equal(rxdm_parse(long_len, sizeof(long_len), &req), -71);
	static const uint8_t group[] = {0x0b, 0x0c};
	assert_int_equal(rxdm_parse(group, sizeof(group), &req), -71);
	static const uint8_t endless_varint[] = {0x08, 0xff, 0xff, 0xff, 0xff, 0xff,
						 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
	assert_int_equal(rxdm_parse(endless_varint, sizeof(endless_varint), &req), -71);
	/* an address string with a NUL, or longer than the field, is refused */
	static const uint8_t nul_ip[] = {0x12, 0x09, 0x0a, 0x07, 0x12, 0x05,
					 0x0a, 0x03, 0x31, 0x00, 0x32};
	assert_int_equal(rxdm_parse(nul_ip, sizeof(nul_ip), &req), -71);
	static const uint8_t zero_field[] = {0x02, 0x00};
	assert_int_equal(rxdm_parse(zero_field, sizeof(zero_field), &req), -71);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_rule),
		cmocka_unit_test(test_put_matches_protoc),
		cmocka_unit_test(test_parse_raw_and_register),
		cmocka_unit_test(test_hostile),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
