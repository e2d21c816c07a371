/* Peer authentication (TCPX_P2P_AUTH_TOKEN, docs/reliability.md): peers
 * with the same token connect and move data; a peer without it, or with
 * another, is refused before any plugin call (counted by the fake plugin
 * of tests/loader); blobs carry a MAC; a connection to oneself is refused. */
#include <dlfcn.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "fake_plugin.h"
#include "pair.h"

#define TOKEN "k3J9-w2sQ-8vLm-Zr4T"
#define OTHER "not-the-same-token-at-all"
#define BLOB_HDR 100 /* sizeof(struct tp_blob_hdr), src/core/setup/blob.h */

static void cfg_token(tcpx_p2p_config *cfg, const char *token, const char *plugin)
{
	assert_int_equal(tcpx_p2p_config_init(cfg), 0);
	cfg->auth_token = token;
	if (plugin)
		cfg->plugin_path = plugin;
}

static struct fake_calls *fake(void)
{
	void *dl = dlopen(FAKE_V7_PATH, RTLD_NOW | RTLD_NOLOAD);
	struct fake_calls *c;

	assert_non_null(dl);
	c = dlsym(dl, "fake_calls");
	assert_non_null(c);
	dlclose(dl);
	return c;
}

static void move_bytes(struct tp_pair *p)
{
	const size_t n = 1 << 20;
	unsigned char *a = malloc(n), *b = calloc(1, n);
	tcpx_p2p_mr *ma, *mb;
	tcpx_p2p_xfer *x[2];

	assert_non_null(a);
	assert_non_null(b);
	tp_fill(a, n, 42);
	assert_int_equal(tcpx_p2p_mr_register(p->s[0], a, n, TCPX_P2P_MEM_HOST, &ma), 0);
	assert_int_equal(tcpx_p2p_mr_register(p->s[1], b, n, TCPX_P2P_MEM_HOST, &mb), 0);
	assert_int_equal(tcpx_p2p_send(p->c[0], ma, 0, n, &x[0]), 0);
	assert_int_equal(tcpx_p2p_recv(p->c[1], mb, 0, n, &x[1]), 0);
	assert_int_equal(tp_complete_all(x, 2), 0);
	assert_int_equal(tp_check(b, n, 42), (size_t)-1);
	assert_int_equal(tcpx_p2p_mr_deregister(ma), 0);
	assert_int_equal(tcpx_p2p_mr_deregister(mb), 0);
	free(a);
	free(b);
}

static void test_same_token(void **state)
{
	tcpx_p2p_config cfg;
	struct tp_pair p;
	int blobs;

	cfg_token(&cfg, TOKEN, NULL);
	for (blobs = 0; blobs < 2; blobs++) {
		assert_int_equal(tp_pair_open(&p, &cfg, blobs), 0);
		move_bytes(&p);
		tp_pair_close(&p);
	}
}

/* Blob exchange: the blob carries a MAC; a changed byte, a blob without
 * one, or one for a side without a token are refused before any connect. */
static void test_blob_mac(void **state)
{
	tcpx_p2p_config cfg[3];
	tcpx_p2p_session *s[3];
	tcpx_p2p_listener *l[3];
	tcpx_p2p_conn *c = NULL;
	const void *blob;
	unsigned char bad[8192];
	size_t len, plain_len;
	int i;

	cfg_token(&cfg[0], TOKEN, NULL);
	cfg_token(&cfg[1], TOKEN, NULL);
	cfg_token(&cfg[2], NULL, NULL);
	for (i = 0; i < 3; i++) {
		assert_int_equal(tcpx_p2p_session_create(&cfg[i], &s[i]), 0);
		assert_int_equal(tcpx_p2p_listen(s[i], &l[i]), 0);
	}
	assert_int_equal(tcpx_p2p_listener_blob(l[2], &blob, &plain_len), 0);
	assert_int_equal(tcpx_p2p_listener_blob(l[1], &blob, &len), 0);
	assert_int_equal(len, plain_len + 32);
	memcpy(bad, blob, len);
	bad[BLOB_HDR + 20] ^= 1; /* the emulator's listen address */
	assert_int_equal(tcpx_p2p_connect(l[0], bad, len, 1000, &c), TCPX_P2P_EPROTO);
	assert_non_null(strstr(tcpx_p2p_last_error(), "fails its MAC"));
	assert_int_equal(tcpx_p2p_connect(l[2], blob, len, 1000, &c), TCPX_P2P_EPROTO);
	assert_non_null(strstr(tcpx_p2p_last_error(), "carries a MAC"));
	assert_int_equal(tcpx_p2p_listener_blob(l[2], &blob, &plain_len), 0);
	assert_int_equal(tcpx_p2p_connect(l[0], blob, plain_len, 1000, &c), TCPX_P2P_EPROTO);
	assert_non_null(strstr(tcpx_p2p_last_error(), "carries no MAC"));
	assert_null(c);
	for (i = 0; i < 3; i++) {
		assert_int_equal(tcpx_p2p_listener_destroy(l[i]), 0);
		assert_int_equal(tcpx_p2p_session_destroy(s[i]), 0);
	}
}

struct dialer {
	tcpx_p2p_session *s;
	uint16_t port;
	tcpx_p2p_conn *c;
	int rc;
	char why[512];
};

static void *dial_thread(void *arg)
{
	struct dialer *d = arg;

	d->rc = tcpx_p2p_dial(d->s, "127.0.0.1", d->port, 5000, &d->c);
	strncpy(d->why, tcpx_p2p_last_error(), sizeof(d->why) - 1);
	return NULL;
}

/* Server with TOKEN, dialer with dial_token (NULL: none), both on the fake
 * plugin.  Returns server_accept's code; *d gets the dialer's. */
static int serve_one(const char *dial_token, struct dialer *d, char *why, size_t why_len)
{
	tcpx_p2p_config cfg[2];
	tcpx_p2p_session *s;
	tcpx_p2p_server *srv;
	tcpx_p2p_conn *c = NULL;
	pthread_t th;
	int rc;

	cfg_token(&cfg[0], TOKEN, FAKE_V7_PATH);
	cfg_token(&cfg[1], dial_token, FAKE_V7_PATH);
	assert_int_equal(tcpx_p2p_session_create(&cfg[0], &s), 0);
	assert_int_equal(tcpx_p2p_session_create(&cfg[1], &d->s), 0);
	assert_int_equal(tcpx_p2p_server_create(s, "127.0.0.1", 0, &srv), 0);
	assert_int_equal(tcpx_p2p_server_port(srv, &d->port), 0);
	memset(fake(), 0, offsetof(struct fake_calls, logger));
	assert_int_equal(pthread_create(&th, NULL, dial_thread, d), 0);
	rc = tcpx_p2p_server_accept(srv, 5000, &c);
	snprintf(why, why_len, "%s", tcpx_p2p_last_error());
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_null(c);
	assert_int_equal(tcpx_p2p_server_destroy(srv), 0);
	assert_int_equal(tcpx_p2p_session_destroy(s), 0);
	assert_int_equal(tcpx_p2p_session_destroy(d->s), 0);
	return rc;
}

static void test_wrong_token_never_reaches_plugin(void **state)
{
	struct dialer d = { 0 };
	char why[512];
	struct fake_calls *fc;

	/* The dialer checks the server's proof first, refuses it and hangs
	 * up: the server is left with a closed socket. */
	assert_int_equal(serve_one(OTHER, &d, why, sizeof(why)), TCPX_P2P_ECLOSED);
	assert_int_equal(d.rc, TCPX_P2P_EPROTO);
	assert_non_null(strstr(d.why, "server failed authentication"));
	assert_non_null(strstr(d.why, "127.0.0.1:")); /* the peer's address */
	assert_non_null(strstr(why, "127.0.0.1:"));
	fc = fake();
	assert_int_equal(fc->listen, 0);
	assert_int_equal(fc->connect, 0);
	assert_int_equal(fc->accept, 0);
}

static void test_no_token_never_reaches_plugin(void **state)
{
	struct dialer d = { 0 };
	char why[512];
	struct fake_calls *fc;

	assert_int_equal(serve_one(NULL, &d, why, sizeof(why)), TCPX_P2P_EPROTO);
	assert_non_null(strstr(why, "did not authenticate"));
	/* The server hangs up; the dialer's detail names the token. */
	assert_int_equal(d.rc, TCPX_P2P_ECLOSED);
	assert_non_null(strstr(d.why, "TCPX_P2P_AUTH_TOKEN"));
	fc = fake();
	/* The dialer listened (one comm per channel) before it sent its blob;
	 * the server made none, and nobody connected or accepted. */
	assert_true(fc->listen > 0);
	assert_int_equal(fc->connect, 0);
	assert_int_equal(fc->accept, 0);
}

/* A bare socket replaying a blob without authenticating: the server's
 * plugin is never called. */
static void test_raw_hello_never_reaches_plugin(void **state)
{
	struct { uint32_t magic; uint16_t version, type; uint32_t len; } hdr;
	struct sockaddr_in sa = { .sin_family = AF_INET };
	unsigned char blob[BLOB_HDR + 2 * 128];
	tcpx_p2p_config cfg;
	tcpx_p2p_session *s;
	tcpx_p2p_server *srv;
	tcpx_p2p_conn *c = NULL;
	uint16_t port;
	int fd;

	cfg_token(&cfg, TOKEN, FAKE_V7_PATH);
	assert_int_equal(tcpx_p2p_session_create(&cfg, &s), 0);
	assert_int_equal(tcpx_p2p_server_create(s, "127.0.0.1", 0, &srv), 0);
	assert_int_equal(tcpx_p2p_server_port(srv, &port), 0);
	memset(fake(), 0, offsetof(struct fake_calls, logger));
	fd = socket(AF_INET, SOCK_STREAM, 0);
	sa.sin_port = htons(port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	memset(blob, 0x41, sizeof(blob));
	hdr.magic = htonl(0x54505831u);
	hdr.version = htons(1);
	hdr.type = htons(1);
	hdr.len = htonl(sizeof(blob));
	assert_int_equal(send(fd, &hdr, sizeof(hdr), 0), (ssize_t)sizeof(hdr));
	assert_int_equal(send(fd, blob, sizeof(blob), 0), (ssize_t)sizeof(blob));
	assert_int_equal(tcpx_p2p_server_accept(srv, 5000, &c), TCPX_P2P_EPROTO);
	assert_non_null(strstr(tcpx_p2p_last_error(), "did not authenticate"));
	assert_int_equal(fake()->listen, 0);
	assert_int_equal(fake()->connect, 0);
	close(fd);
	assert_int_equal(tcpx_p2p_server_destroy(srv), 0);
	assert_int_equal(tcpx_p2p_session_destroy(s), 0);
}

/* One session dialing its own server. */
static void test_self_refused(void **state)
{
	tcpx_p2p_config cfg;
	tcpx_p2p_server *srv;
	tcpx_p2p_conn *c = NULL;
	struct dialer d = { 0 };
	pthread_t th;

	cfg_token(&cfg, TOKEN, NULL);
	assert_int_equal(tcpx_p2p_session_create(&cfg, &d.s), 0);
	assert_int_equal(tcpx_p2p_server_create(d.s, "127.0.0.1", 0, &srv), 0);
	assert_int_equal(tcpx_p2p_server_port(srv, &d.port), 0);
	assert_int_equal(pthread_create(&th, NULL, dial_thread, &d), 0);
	assert_int_equal(tcpx_p2p_server_accept(srv, 5000, &c), TCPX_P2P_EPROTO);
	assert_non_null(strstr(tcpx_p2p_last_error(), "oneself"));
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_not_equal(d.rc, 0);
	assert_int_equal(tcpx_p2p_server_destroy(srv), 0);
	assert_int_equal(tcpx_p2p_session_destroy(d.s), 0);
}

/* The token never shows: --dump-config prints "(set)". */
static void test_token_hidden(void **state)
{
	tcpx_p2p_config cfg;
	const char *name;
	char value[256];
	int i, found = 0;

	cfg_token(&cfg, TOKEN, NULL);
	for (i = 0; i < tcpx_p2p_config_count(); i++) {
		assert_int_equal(tcpx_p2p_config_describe(&cfg, i, &name, NULL, value,
							  sizeof(value)), 0);
		assert_null(strstr(value, TOKEN));
		if (!strcmp(name, "TCPX_P2P_AUTH_TOKEN")) {
			assert_string_equal(value, "(set)");
			found = 1;
		}
	}
	assert_true(found);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_same_token),
		cmocka_unit_test(test_blob_mac),
		cmocka_unit_test(test_wrong_token_never_reaches_plugin),
		cmocka_unit_test(test_no_token_never_reaches_plugin),
		cmocka_unit_test(test_raw_hello_never_reaches_plugin),
		cmocka_unit_test(test_self_refused),
		cmocka_unit_test(test_token_hidden),
	};

	return cmocka_run_group_tests(tests, NULL, NULL) ? 1 : 0;
}
