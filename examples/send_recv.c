/*
 * send_recv: two processes exchange 64 MiB through libtcpx_p2p and check
 * every byte they receive.
 *
 *   send_recv server PORT        wait for one peer on PORT (0: any free
 *                                port; the line "listening on port N" says
 *                                which)
 *   send_recv client HOST PORT   connect to the server at HOST:PORT
 *
 * Both sides send 64 MiB of host memory to each other at the same time and
 * verify what arrives.  The plugin is chosen as docs/configuration.md says
 * (TCPX_P2P_PLUGIN picks one; the bundled emulator is the fallback), and every
 * other TCPX_P2P_* variable applies too.  Exit status 0 when the bytes match.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tcpx_p2p.h>

#define XFER_BYTES (64u << 20)
#define TIMEOUT_MS 60000

/* Report a failed call: the code's name and the library's detail. */
static int fail(const char *what, int rc)
{
	fprintf(stderr, "send_recv: %s: %s (%s)\n", what, tcpx_p2p_strerror(rc),
		tcpx_p2p_last_error());
	return rc;
}

/* Position-dependent so that a chunk landing at the wrong offset shows. */
static uint64_t pattern(uint64_t seed, size_t i)
{
	uint64_t x = (seed << 40) ^ (i * 0x9e3779b97f4a7c15ull);

	return x ^ (x >> 29);
}

static void fill(uint64_t *buf, size_t words, uint64_t seed)
{
	size_t i;

	for (i = 0; i < words; i++)
		buf[i] = pattern(seed, i);
}

/* Index of the first wrong word, or words when all match. */
static size_t check(const uint64_t *buf, size_t words, uint64_t seed)
{
	size_t i;

	for (i = 0; i < words; i++)
		if (buf[i] != pattern(seed, i))
			break;
	return i;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int parse_port(const char *text, uint16_t *port)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(text, &end, 10);
	if (errno || end == text || *end || v > 65535)
		return -1;
	*port = (uint16_t)v;
	return 0;
}

/* Accept one peer (server) or dial one (client). */
static int make_conn(tcpx_p2p_session *s, int is_server, const char *host, uint16_t port,
		     tcpx_p2p_conn **conn)
{
	tcpx_p2p_server *srv;
	uint16_t bound;
	int rc;

	if (!is_server) {
		rc = tcpx_p2p_dial(s, host, port, TIMEOUT_MS, conn);
		return rc ? fail("dial", rc) : 0;
	}
	rc = tcpx_p2p_server_create(s, NULL, port, &srv);
	if (rc)
		return fail("server_create", rc);
	tcpx_p2p_server_port(srv, &bound);
	printf("listening on port %u\n", bound);
	fflush(stdout);
	rc = tcpx_p2p_server_accept(srv, TIMEOUT_MS, conn);
	if (rc)
		fail("server_accept", rc);
	/* Accepted connections outlive the server. */
	tcpx_p2p_server_destroy(srv);
	return rc;
}

/* Post the receive first, then the send; wait for both. */
static int exchange(tcpx_p2p_conn *c, tcpx_p2p_mr *tx_mr, tcpx_p2p_mr *rx_mr)
{
	tcpx_p2p_xfer *sx, *rx;
	int rc;

	rc = tcpx_p2p_recv(c, rx_mr, 0, XFER_BYTES, &rx);
	if (rc)
		return fail("recv", rc);
	rc = tcpx_p2p_send(c, tx_mr, 0, XFER_BYTES, &sx);
	if (rc) {
		fail("send", rc);
		goto release_rx;
	}
	rc = tcpx_p2p_wait(sx, TIMEOUT_MS);
	if (rc)
		fail("wait for the send", rc);
	else if ((rc = tcpx_p2p_wait(rx, TIMEOUT_MS)))
		fail("wait for the receive", rc);
	/* A failed xfer is released like a completed one; one that timed out
	 * is still pending and cannot be (EBUSY), and this program is about
	 * to exit anyway. */
	tcpx_p2p_xfer_release(sx);
release_rx:
	tcpx_p2p_xfer_release(rx);
	return rc;
}

int main(int argc, char **argv)
{
	const size_t words = XFER_BYTES / sizeof(uint64_t);
	tcpx_p2p_session_info info = { .struct_size = sizeof(info) };
	tcpx_p2p_session *s;
	tcpx_p2p_config cfg;
	tcpx_p2p_conn *c;
	tcpx_p2p_mr *tx_mr, *rx_mr;
	uint64_t *tx, *rx, my_seed, peer_seed;
	const char *host = NULL;
	uint16_t port;
	size_t bad;
	double t0, dt;
	int is_server, rc, status = 1;

	is_server = argc == 3 && !strcmp(argv[1], "server");
	if (!is_server && !(argc == 4 && !strcmp(argv[1], "client"))) {
		fprintf(stderr, "usage: %s server PORT\n       %s client HOST PORT\n", argv[0],
			argv[0]);
		return 2;
	}
	if (!is_server)
		host = argv[2];
	if (parse_port(argv[argc - 1], &port) || (!is_server && port == 0)) {
		fprintf(stderr, "send_recv: bad port \"%s\"\n", argv[argc - 1]);
		return 2;
	}
	my_seed = is_server ? 1 : 2;
	peer_seed = is_server ? 2 : 1;

	/* Defaults, then the environment; a malformed variable is a mistake
	 * worth stopping for. */
	rc = tcpx_p2p_config_init(&cfg);
	if (rc)
		return fail("config_init", rc);
	cfg.gpu = -1; /* this example moves host memory */
	rc = tcpx_p2p_session_create(&cfg, &s);
	if (rc)
		return fail("session_create", rc);
	tcpx_p2p_session_query(s, &info);
	fprintf(stderr, "send_recv: plugin %s (ABI v%d) from %s\n", info.plugin_name,
		info.plugin_abi, info.plugin_path);

	tx = aligned_alloc(4096, XFER_BYTES);
	rx = aligned_alloc(4096, XFER_BYTES);
	if (!tx || !rx) {
		fprintf(stderr, "send_recv: out of memory\n");
		goto free_buffers;
	}
	fill(tx, words, my_seed);
	memset(rx, 0, XFER_BYTES);
	rc = tcpx_p2p_mr_register(s, tx, XFER_BYTES, TCPX_P2P_MEM_HOST, &tx_mr);
	if (rc) {
		fail("mr_register", rc);
		goto free_buffers;
	}
	rc = tcpx_p2p_mr_register(s, rx, XFER_BYTES, TCPX_P2P_MEM_HOST, &rx_mr);
	if (rc) {
		fail("mr_register", rc);
		goto deregister_tx;
	}

	if (make_conn(s, is_server, host, port, &c))
		goto deregister_rx;
	t0 = now_s();
	if (exchange(c, tx_mr, rx_mr))
		goto destroy_conn;
	dt = now_s() - t0;
	bad = check(rx, words, peer_seed);
	if (bad != words) {
		fprintf(stderr, "send_recv: byte %zu: got 0x%016llx, expected 0x%016llx\n",
			bad * sizeof(uint64_t), (unsigned long long)rx[bad],
			(unsigned long long)pattern(peer_seed, bad));
		goto destroy_conn;
	}
	/* Neither side closes while the other may still be receiving. */
	rc = tcpx_p2p_conn_barrier(c, TIMEOUT_MS);
	if (rc) {
		fail("barrier", rc);
		goto destroy_conn;
	}
	printf("%s: sent and received %u bytes, verified; %.2f GB/s each way (1e9 B/s)\n",
	       is_server ? "server" : "client", XFER_BYTES, XFER_BYTES / dt / 1e9);
	status = 0;

destroy_conn:
	tcpx_p2p_conn_destroy(c);
deregister_rx:
	tcpx_p2p_mr_deregister(rx_mr);
deregister_tx:
	tcpx_p2p_mr_deregister(tx_mr);
free_buffers:
	free(rx);
	free(tx);
	rc = tcpx_p2p_session_destroy(s);
	if (rc) {
		fail("session_destroy", rc);
		status = 1;
	}
	return status;
}
