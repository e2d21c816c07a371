#include "pair.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	return x ^ (x >> 33);
}

static unsigned char pattern_byte(uint64_t seed, size_t i)
{
	return (unsigned char)(mix(seed * 0x9e3779b97f4a7c15ull + (i >> 3)) >> ((i & 7) * 8));
}

void tp_fill(void *buf, size_t len, uint64_t seed)
{
	unsigned char *p = buf;
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = pattern_byte(seed, i);
}

size_t tp_check(const void *buf, size_t len, uint64_t seed)
{
	const unsigned char *p = buf;
	size_t i;

	for (i = 0; i < len; i++)
		if (p[i] != pattern_byte(seed, i))
			return i;
	return (size_t)-1;
}

int tp_send_counted(tcpx_p2p_conn *c, tcpx_p2p_mr *mr, size_t piece, int n, int *done)
{
	tcpx_p2p_xfer *x;
	int rc = 0;

	for (int i = 0; i < n && !rc; i++) {
		rc = tcpx_p2p_send(c, mr, (size_t)i * piece, piece, &x);
		if (rc)
			break;
		rc = tcpx_p2p_wait(x, TP_TEST_TIMEOUT_MS);
		tcpx_p2p_xfer_release(x);
		if (!rc)
			__atomic_add_fetch(done, 1, __ATOMIC_RELEASE);
	}
	return rc;
}

int tp_complete_all(tcpx_p2p_xfer **x, int n)
{
	int left = n, done, i, rc;

	while (left) {
		for (i = 0; i < n; i++) {
			if (!x[i])
				continue;
			done = 0;
			rc = tcpx_p2p_test(x[i], &done);
			if (rc)
				return rc;
			if (done) {
				rc = tcpx_p2p_xfer_release(x[i]);
				if (rc)
					return rc;
				x[i] = NULL;
				left--;
			}
		}
	}
	return 0;
}

struct side {
	struct tp_pair *p;
	int idx;
	int use_blobs;
	tcpx_p2p_server *srv;
	uint16_t port;
	tcpx_p2p_listener *l;
	const void *peer_blob;
	size_t peer_len;
	int rc;
};

static void *run_side(void *arg)
{
	struct side *sd = arg;
	struct tp_pair *p = sd->p;

	if (sd->use_blobs)
		sd->rc = tcpx_p2p_connect(sd->l, sd->peer_blob, sd->peer_len, TP_TEST_TIMEOUT_MS,
					  &p->c[sd->idx]);
	else if (sd->idx == 0)
		sd->rc = tcpx_p2p_server_accept(sd->srv, TP_TEST_TIMEOUT_MS, &p->c[0]);
	else
		sd->rc = tcpx_p2p_dial(p->s[1], "127.0.0.1", sd->port, TP_TEST_TIMEOUT_MS,
				       &p->c[1]);
	if (sd->rc)
		fprintf(stderr, "pair side %d: %s: %s\n", sd->idx, tcpx_p2p_strerror(sd->rc),
			tcpx_p2p_last_error());
	return NULL;
}

int tp_pair_open(struct tp_pair *p, const tcpx_p2p_config *cfg, int use_blobs)
{
	tcpx_p2p_config both[2];
	int i;

	for (i = 0; i < 2; i++) {
		if (cfg)
			both[i] = *cfg;
		else if (tcpx_p2p_config_init(&both[i]))
			return TCPX_P2P_EINVAL;
	}
	return tp_pair_open2(p, both, use_blobs);
}

int tp_pair_open2(struct tp_pair *p, const tcpx_p2p_config cfg[2], int use_blobs)
{
	struct side sd[2];
	pthread_t th;
	static unsigned char copy[2][8192];
	const void *blob;
	size_t len;
	int i, rc;

	memset(p, 0, sizeof(*p));
	memset(sd, 0, sizeof(sd));
	for (i = 0; i < 2; i++) {
		rc = tcpx_p2p_session_create(&cfg[i], &p->s[i]);
		if (rc) {
			fprintf(stderr, "session_create: %s\n", tcpx_p2p_last_error());
			goto fail;
		}
		sd[i].p = p;
		sd[i].idx = i;
		sd[i].use_blobs = use_blobs;
	}
	if (use_blobs) {
		for (i = 0; i < 2; i++) {
			rc = tcpx_p2p_listen(p->s[i], &sd[i].l);
			if (rc)
				goto fail;
			tcpx_p2p_listener_blob(sd[i].l, &blob, &len);
			if (len > sizeof(copy[0]))
				return TCPX_P2P_EINTERNAL;
			/* as an application would ship it: a copy */
			memcpy(copy[1 - i], blob, len);
			sd[1 - i].peer_blob = copy[1 - i];
			sd[1 - i].peer_len = len;
		}
	} else {
		rc = tcpx_p2p_server_create(p->s[0], "127.0.0.1", 0, &sd[0].srv);
		if (rc)
			goto fail;
		tcpx_p2p_server_port(sd[0].srv, &sd[1].port);
	}
	pthread_create(&th, NULL, run_side, &sd[0]);
	run_side(&sd[1]);
	pthread_join(th, NULL);
	for (i = 0; i < 2; i++)
		if (sd[i].rc && sd[i].l)
			tcpx_p2p_listener_destroy(sd[i].l);
	if (sd[0].srv)
		tcpx_p2p_server_destroy(sd[0].srv);
	rc = sd[0].rc ? sd[0].rc : sd[1].rc;
	if (rc)
		goto fail;
	return 0;
fail:
	tp_pair_close(p);
	return rc;
}

void tp_pair_close(struct tp_pair *p)
{
	int i;

	for (i = 0; i < 2; i++) {
		if (p->c[i] && tcpx_p2p_conn_destroy(p->c[i]))
			fprintf(stderr, "conn_destroy: %s\n", tcpx_p2p_last_error());
		p->c[i] = NULL;
	}
	for (i = 0; i < 2; i++) {
		if (p->s[i] && tcpx_p2p_session_destroy(p->s[i]))
			fprintf(stderr, "session_destroy: %s\n", tcpx_p2p_last_error());
		p->s[i] = NULL;
	}
}

struct link_side {
	tcpx_p2p_listener *l;
	const void *peer;
	size_t peer_len;
	tcpx_p2p_conn **out;
	int rc;
};

static void *link_side_main(void *arg)
{
	struct link_side *ls = arg;

	ls->rc = tcpx_p2p_connect(ls->l, ls->peer, ls->peer_len, TP_TEST_TIMEOUT_MS, ls->out);
	if (ls->rc) {
		fprintf(stderr, "tp_link: %s: %s\n", tcpx_p2p_strerror(ls->rc),
			tcpx_p2p_last_error());
		tcpx_p2p_listener_destroy(ls->l);
	}
	return NULL;
}

int tp_link(tcpx_p2p_session *a, tcpx_p2p_session *b, tcpx_p2p_conn **ca, tcpx_p2p_conn **cb)
{
	struct link_side side[2] = { { .out = ca }, { .out = cb } };
	tcpx_p2p_session *s[2] = { a, b };
	unsigned char copy[2][8192];
	const void *blob[2];
	size_t len[2];
	pthread_t th;
	int i, rc;

	for (i = 0; i < 2; i++) {
		rc = tcpx_p2p_listen(s[i], &side[i].l);
		if (rc) {
			if (i)
				tcpx_p2p_listener_destroy(side[0].l);
			return rc;
		}
		tcpx_p2p_listener_blob(side[i].l, &blob[i], &len[i]);
		if (len[i] > sizeof(copy[i]))
			return TCPX_P2P_EINTERNAL;
		memcpy(copy[i], blob[i], len[i]); /* as an application would ship it */
	}
	for (i = 0; i < 2; i++) {
		side[i].peer = copy[1 - i];
		side[i].peer_len = len[1 - i];
	}
	pthread_create(&th, NULL, link_side_main, &side[0]);
	link_side_main(&side[1]);
	pthread_join(th, NULL);
	if (side[0].rc || side[1].rc) {
		for (i = 0; i < 2; i++)
			if (!side[i].rc)
				tcpx_p2p_conn_destroy(*side[i].out);
		return side[0].rc ? side[0].rc : side[1].rc;
	}
	return 0;
}
