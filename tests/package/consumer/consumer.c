/*
 * Consumer of an installed libtcpx_p2p: checks that the installed header
 * matches the installed library, that a session finds a plugin, and moves
 * a few MiB through the built-in rendezvous on 127.0.0.1 between two
 * sessions of this process, verifying the bytes.
 *
 *   consumer [PLUGIN_DIR]   with PLUGIN_DIR, also require that the plugin
 *                           was loaded from that directory
 *
 * Exit status: 0 pass, 1 fail.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tcpx_p2p.h>

#define LEN ((3u << 20) + 4099) /* several chunks, the last one short */
#define TIMEOUT_MS 30000

struct dialer {
	tcpx_p2p_session *s;
	uint16_t port;
	tcpx_p2p_conn *c;
	int rc;
};

static int fail(const char *what, int rc)
{
	fprintf(stderr, "consumer: %s: %s (%s)\n", what, tcpx_p2p_strerror(rc),
		tcpx_p2p_last_error());
	return 1;
}

static int complete_both(tcpx_p2p_xfer *a, tcpx_p2p_xfer *b)
{
	int da = 0, db = 0, rc = 0;
	long spins;

	for (spins = 0; !rc && !(da && db) && spins < 100000000L; spins++) {
		if (!da)
			rc = tcpx_p2p_test(a, &da);
		if (!rc && !db)
			rc = tcpx_p2p_test(b, &db);
	}
	return rc ? rc : da && db ? 0 : TCPX_P2P_ETIMEDOUT;
}

static void *dial(void *arg)
{
	struct dialer *d = arg;

	d->rc = tcpx_p2p_dial(d->s, "127.0.0.1", d->port, TIMEOUT_MS, &d->c);
	if (d->rc)
		fail("dial", d->rc);
	return NULL;
}

static int check_plugin_dir(const char *path, const char *want_dir)
{
	char got[PATH_MAX], want[PATH_MAX], *slash;

	if (!realpath(path, got) || !realpath(want_dir, want)) {
		fprintf(stderr, "consumer: cannot resolve %s or %s\n", path, want_dir);
		return 1;
	}
	slash = strrchr(got, '/');
	*slash = '\0';
	if (strcmp(got, want)) {
		fprintf(stderr, "consumer: plugin loaded from %s, expected %s\n", got, want);
		return 1;
	}
	return 0;
}

static int transfer(tcpx_p2p_session *s0, tcpx_p2p_conn *c0, tcpx_p2p_session *s1,
		    tcpx_p2p_conn *c1)
{
	tcpx_p2p_mr *m0, *m1;
	tcpx_p2p_xfer *sx, *rx;
	unsigned char *src, *dst;
	size_t i;
	int rc, status = 1;

	src = malloc(LEN);
	dst = calloc(1, LEN);
	if (!src || !dst)
		goto free_buffers;
	for (i = 0; i < LEN; i++)
		src[i] = (unsigned char)(i * 131 + (i >> 12));
	if ((rc = tcpx_p2p_mr_register(s0, src, LEN, TCPX_P2P_MEM_HOST, &m0))) {
		fail("mr_register", rc);
		goto free_buffers;
	}
	if ((rc = tcpx_p2p_mr_register(s1, dst, LEN, TCPX_P2P_MEM_HOST, &m1))) {
		fail("mr_register", rc);
		goto deregister_src;
	}
	if ((rc = tcpx_p2p_recv(c1, m1, 0, LEN, &rx))) {
		fail("recv", rc);
		goto deregister_dst;
	}
	if ((rc = tcpx_p2p_send(c0, m0, 0, LEN, &sx))) {
		fail("send", rc);
		goto release_rx;
	}
	/* One thread drives both sessions: a send completes only once the
	 * receiving session matched it, so poll both rather than wait on one. */
	if ((rc = complete_both(sx, rx)))
		fail("test", rc);
	else if (memcmp(src, dst, LEN))
		fprintf(stderr, "consumer: received bytes differ from the sent ones\n");
	else
		status = 0;
	tcpx_p2p_xfer_release(sx);
release_rx:
	tcpx_p2p_xfer_release(rx);
deregister_dst:
	tcpx_p2p_mr_deregister(m1);
deregister_src:
	tcpx_p2p_mr_deregister(m0);
free_buffers:
	free(dst);
	free(src);
	return status;
}

int main(int argc, char **argv)
{
	tcpx_p2p_session_info info = { .struct_size = sizeof(info) };
	tcpx_p2p_session *s0, *s1;
	tcpx_p2p_server *srv;
	tcpx_p2p_conn *c0;
	tcpx_p2p_config cfg;
	struct dialer d = { 0 };
	pthread_t th;
	int rc, status = 1;

	if (strcmp(tcpx_p2p_version(), TCPX_P2P_VERSION_STRING)) {
		fprintf(stderr, "consumer: header version %s, library %s\n",
			TCPX_P2P_VERSION_STRING, tcpx_p2p_version());
		return 1;
	}
	if ((rc = tcpx_p2p_config_init(&cfg)))
		return fail("config_init", rc);
	cfg.gpu = -1;
	if ((rc = tcpx_p2p_session_create(&cfg, &s0)))
		return fail("session_create", rc);
	if ((rc = tcpx_p2p_session_create(&cfg, &s1))) {
		fail("session_create", rc);
		goto destroy_s0;
	}
	if ((rc = tcpx_p2p_session_query(s0, &info))) {
		fail("session_query", rc);
		goto destroy_s1;
	}
	printf("consumer: libtcpx_p2p %s, plugin %s (ABI v%d) from %s\n", tcpx_p2p_version(),
	       info.plugin_name, info.plugin_abi, info.plugin_path);
	if (argc > 1 && check_plugin_dir(info.plugin_path, argv[1]))
		goto destroy_s1;

	if ((rc = tcpx_p2p_server_create(s0, "127.0.0.1", 0, &srv))) {
		fail("server_create", rc);
		goto destroy_s1;
	}
	tcpx_p2p_server_port(srv, &d.port);
	d.s = s1;
	if (pthread_create(&th, NULL, dial, &d)) {
		fprintf(stderr, "consumer: pthread_create failed\n");
		goto destroy_server;
	}
	rc = tcpx_p2p_server_accept(srv, TIMEOUT_MS, &c0);
	if (rc)
		fail("server_accept", rc);
	pthread_join(th, NULL);
	if (!rc && !d.rc)
		status = transfer(s0, c0, s1, d.c);
	if (!rc)
		tcpx_p2p_conn_destroy(c0);
	if (!d.rc)
		tcpx_p2p_conn_destroy(d.c);
	if (!status)
		printf("consumer: %u bytes through the rendezvous, verified\n", LEN);
destroy_server:
	tcpx_p2p_server_destroy(srv);
destroy_s1:
	if ((rc = tcpx_p2p_session_destroy(s1)))
		status = fail("session_destroy", rc);
destroy_s0:
	if ((rc = tcpx_p2p_session_destroy(s0)))
		status = fail("session_destroy", rc);
	return status;
}
