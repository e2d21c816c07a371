/* The rendezvous's framing (core/setup/rdv_frame.c): wire layout, every
 * decode error, and frames cut short or late over a socketpair. */
#include <arpa/inet.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/setup/rdv_frame.h"
#include "sock_all.h"
#include "util/error.h"

static int sv[2];

static int make_pair(void **state)
{
	return socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv);
}

static int close_pair(void **state)
{
	if (sv[0] >= 0)
		close(sv[0]);
	if (sv[1] >= 0)
		close(sv[1]);
	return 0;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void test_encode_layout(void **state)
{
	static const uint8_t want[12] = { 'T', 'P', 'X', '1', 0, 1, 0, 2, 0x00, 0x01, 0x02, 0x03 };
	struct tp_rdv_frame_hdr h;
	uint32_t len = 0;

	assert_int_equal(sizeof(h), 12);
	tp__rdv_frame_encode(&h, TP_RDV_FRAME_BARRIER, 0x010203);
	assert_memory_equal(&h, want, sizeof(want));

	tp__rdv_frame_encode(&h, TP_RDV_FRAME_HELLO, 4096);
	assert_int_equal(tp__rdv_frame_decode(&h, TP_RDV_FRAME_HELLO, 4096, &len), 0);
	assert_int_equal(len, 4096);
	tp__rdv_frame_encode(&h, TP_RDV_FRAME_BYE, 0);
	assert_int_equal(tp__rdv_frame_decode(&h, TP_RDV_FRAME_BYE, 0, &len), 0);
	assert_int_equal(len, 0);
	tp__rdv_frame_encode(&h, TP_RDV_FRAME_HELLO, TP_RDV_FRAME_MAX);
	assert_int_equal(tp__rdv_frame_decode(&h, TP_RDV_FRAME_HELLO, UINT32_MAX, &len), 0);
	assert_int_equal(len, TP_RDV_FRAME_MAX);
}

static void expect_proto(const struct tp_rdv_frame_hdr *h, uint16_t type, uint32_t cap,
			 const char *text)
{
	uint32_t len = 77;

	assert_int_equal(tp__rdv_frame_decode(h, type, cap, &len), TCPX_P2P_EPROTO);
	assert_int_equal(len, 77);
	if (!strstr(tcpx_p2p_last_error(), text))
		fail_msg("want \"%s\" in \"%s\"", text, tcpx_p2p_last_error());
}

static void test_decode_errors(void **state)
{
	struct tp_rdv_frame_hdr h;

	tp__rdv_frame_encode(&h, TP_RDV_FRAME_HELLO, 16);
	h.magic = htonl(0x47455420); /* "GET " from an HTTP client */
	expect_proto(&h, TP_RDV_FRAME_HELLO, 64, "bad magic 0x47455420: not a tcpx_p2p peer");

	tp__rdv_frame_encode(&h, TP_RDV_FRAME_HELLO, 16);
	h.version = htons(2);
	expect_proto(&h, TP_RDV_FRAME_HELLO, 64, "version 2");
	expect_proto(&h, TP_RDV_FRAME_HELLO, 64, "speaks 1");

	tp__rdv_frame_encode(&h, TP_RDV_FRAME_BYE, 0);
	expect_proto(&h, TP_RDV_FRAME_BARRIER, 64,
		     "expected a barrier frame (type 2), got bye (type 3)");

	tp__rdv_frame_encode(&h, TP_RDV_FRAME_HELLO, 65);
	expect_proto(&h, TP_RDV_FRAME_HELLO, 64, "65 bytes exceeds the limit of 64");

	tp__rdv_frame_encode(&h, TP_RDV_FRAME_HELLO, TP_RDV_FRAME_MAX + 1);
	expect_proto(&h, TP_RDV_FRAME_HELLO, UINT32_MAX, "exceeds the limit of 65536");

	tp__rdv_frame_encode(&h, TP_RDV_FRAME_HELLO, UINT32_MAX);
	expect_proto(&h, TP_RDV_FRAME_HELLO, UINT32_MAX, "exceeds");
}

static void test_roundtrip_socketpair(void **state)
{
	uint8_t payload[3000], buf[4096];
	uint32_t len = 0;
	size_t i;

	for (i = 0; i < sizeof(payload); i++)
		payload[i] = (uint8_t)(i * 7 + 3);
	assert_int_equal(tp__rdv_frame_send(sv[0], TP_RDV_FRAME_HELLO,
					    payload, sizeof(payload), 1000), 0);
	assert_int_equal(tp__rdv_frame_send(sv[0], TP_RDV_FRAME_BARRIER, NULL, 0, 1000), 0);
	assert_int_equal(tp__rdv_frame_recv(sv[1], TP_RDV_FRAME_HELLO,
					    buf, sizeof(buf), &len, 1000), 0);
	assert_int_equal(len, sizeof(payload));
	assert_memory_equal(buf, payload, sizeof(payload));
	assert_int_equal(tp__rdv_frame_recv(sv[1], TP_RDV_FRAME_BARRIER, NULL, 0, &len, 1000), 0);
	assert_int_equal(len, 0);

	assert_int_equal(tp__rdv_frame_send(sv[0], TP_RDV_FRAME_HELLO,
					    NULL, 4, 1000), TCPX_P2P_EINVAL);
	assert_int_equal(tp__rdv_frame_send(sv[0], TP_RDV_FRAME_HELLO,
					    buf, TP_RDV_FRAME_MAX + 1, 1000),
			 TCPX_P2P_EINVAL);
	assert_int_equal(tp__rdv_frame_send(-1, TP_RDV_FRAME_BYE, NULL, 0, 1000), TCPX_P2P_EINVAL);

	/* A frame over the receiver's capacity is refused before reading it. */
	assert_int_equal(tp__rdv_frame_send(sv[0], TP_RDV_FRAME_HELLO, buf, 64, 1000), 0);
	assert_int_equal(tp__rdv_frame_recv(sv[1], TP_RDV_FRAME_HELLO, buf, 63, &len, 1000),
			 TCPX_P2P_EPROTO);
	assert_non_null(strstr(tcpx_p2p_last_error(), "64 bytes exceeds the limit of 63"));
}

static void test_recv_wrong_peer(void **state)
{
	static const char http[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
	uint8_t buf[64];
	uint32_t len = 5;

	assert_int_equal(write(sv[0], http, sizeof(http) - 1), (ssize_t)sizeof(http) - 1);
	assert_int_equal(tp__rdv_frame_recv(sv[1], TP_RDV_FRAME_HELLO,
					    buf, sizeof(buf), &len, 1000),
			 TCPX_P2P_EPROTO);
	assert_int_equal(len, 5);
	assert_non_null(strstr(tcpx_p2p_last_error(), "bad magic 0x47455420"));
}

static void test_truncated_header(void **state)
{
	struct tp_rdv_frame_hdr h;
	uint32_t len;

	tp__rdv_frame_encode(&h, TP_RDV_FRAME_HELLO, 8);
	assert_int_equal(write(sv[0], &h, 5), 5);
	shutdown(sv[0], SHUT_WR);
	assert_int_equal(tp__rdv_frame_recv(sv[1], TP_RDV_FRAME_HELLO, NULL, 0, &len, 1000),
			 TCPX_P2P_ECLOSED);
	assert_non_null(strstr(tcpx_p2p_last_error(), "peer closed after 5 of 12 bytes"));
}

static void test_truncated_payload(void **state)
{
	uint8_t payload[100] = { 1, 2, 3 }, buf[100];
	struct tp_rdv_frame_hdr h;
	uint32_t len = 9;

	tp__rdv_frame_encode(&h, TP_RDV_FRAME_HELLO, sizeof(payload));
	assert_int_equal(write(sv[0], &h, sizeof(h)), (ssize_t)sizeof(h));
	assert_int_equal(write(sv[0], payload, 40), 40);
	close(sv[0]);
	sv[0] = -1;
	assert_int_equal(tp__rdv_frame_recv(sv[1], TP_RDV_FRAME_HELLO,
					    buf, sizeof(buf), &len, 1000),
			 TCPX_P2P_ECLOSED);
	assert_int_equal(len, 9);
	assert_non_null(strstr(tcpx_p2p_last_error(), "peer closed after 40 of 100 bytes"));
}

static void test_recv_timeout(void **state)
{
	uint8_t buf[16];
	uint32_t len;
	double t0, dt;

	t0 = now_s();
	assert_int_equal(tp__rdv_frame_recv(sv[1], TP_RDV_FRAME_HELLO, buf, sizeof(buf), &len, 200),
			 TCPX_P2P_ETIMEDOUT);
	dt = now_s() - t0;
	assert_true(dt >= 0.19); /* not before its deadline; how long after is the machine's */
	assert_non_null(strstr(tcpx_p2p_last_error(), "timed out"));

	/* Half a header, then silence: the deadline covers the whole frame. */
	assert_int_equal(write(sv[0], "TPX", 3), 3);
	t0 = now_s();
	assert_int_equal(sock_recv_all(sv[1], buf, 12, 150), TCPX_P2P_ETIMEDOUT);
	dt = now_s() - t0;
	assert_true(dt >= 0.14);
	assert_non_null(strstr(tcpx_p2p_last_error(), "after 3 of 12 bytes"));

	/* Zero timeout: one look, no wait.  The byte sent first is taken (the
	 * look happened); the second call finds nothing and gives up. */
	assert_int_equal(write(sv[0], "x", 1), 1);
	assert_int_equal(sock_recv_all(sv[1], buf, 1, 0), 0);
	assert_int_equal(buf[0], 'x');
	assert_int_equal(sock_recv_all(sv[1], buf, 1, 0), TCPX_P2P_ETIMEDOUT);
}

static void test_send_to_closed_peer(void **state)
{
	static uint8_t big[1 << 20];

	close(sv[1]);
	sv[1] = -1;
	/* EPIPE, not SIGPIPE: the process survives and sees ECLOSED. */
	assert_int_equal(sock_send_all(sv[0], big, sizeof(big), 1000), TCPX_P2P_ECLOSED);
}

static void test_send_timeout(void **state)
{
	static uint8_t big[8 << 20];
	double t0, dt;

	/* Nobody reads sv[1]: the buffers fill and the send must give up. */
	t0 = now_s();
	assert_int_equal(sock_send_all(sv[0], big, sizeof(big), 200), TCPX_P2P_ETIMEDOUT);
	dt = now_s() - t0;
	assert_true(dt >= 0.19); /* not before its deadline */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_encode_layout),
		cmocka_unit_test(test_decode_errors),
		cmocka_unit_test_setup_teardown(test_roundtrip_socketpair, make_pair, close_pair),
		cmocka_unit_test_setup_teardown(test_recv_wrong_peer, make_pair, close_pair),
		cmocka_unit_test_setup_teardown(test_truncated_header, make_pair, close_pair),
		cmocka_unit_test_setup_teardown(test_truncated_payload, make_pair, close_pair),
		cmocka_unit_test_setup_teardown(test_recv_timeout, make_pair, close_pair),
		cmocka_unit_test_setup_teardown(test_send_to_closed_peer, make_pair, close_pair),
		cmocka_unit_test_setup_teardown(test_send_timeout, make_pair, close_pair),
	};

	return cmocka_run_group_tests(tests, NULL, NULL) ? 1 : 0;
}
