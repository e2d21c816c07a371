/* hostile_peer: what a hostile peer costs a target and its other peers.
 *
 * One process, three sessions over the emulator on loopback: a target T
 * (with its progress thread), a good peer G that writes into an export of
 * T over and over from its own thread, and an attacker A that connects to
 * T again and again and, on each connection, sends one kind of control
 * message the protocol has, as many as it takes to cross a bound of T (or
 * malformed), then drops the connection.  Messages are written into A's
 * control stream directly, as a peer running other code would.
 *
 * Prints G's write GB/s before and during the attack, and T's process
 * figures (open descriptors, resident memory) before, at the highest point
 * and after.  A benchmark, not a test: numbers go to docs/performance.md.
 *
 * Usage: hostile_peer [rounds per kind (default 1000)] [write bytes (1 MiB)] [kind (all)]
 * (over the emulator this build made, unless TCPX_P2P_PLUGIN names another) */
#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/conn.h"
#include "core/ctl.h"
#include "core/session.h"
#include "pair.h"

struct good {
	tcpx_p2p_conn *c;
	tcpx_p2p_rmr *rm;
	tcpx_p2p_mr *mr;
	size_t len;
	atomic_ullong bytes;
	atomic_bool stop;
	int err;
};

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	if (!d)
		return -1;
	while (readdir(d))
		n++;
	closedir(d);
	return n - 3; /* ., .., the DIR's own */
}

static long rss_kib(void)
{
	long pages = 0, rss = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (!f)
		return -1;
	if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
		rss = -1;
	fclose(f);
	return rss < 0 ? -1 : rss * (sysconf(_SC_PAGESIZE) / 1024);
}

static void *good_loop(void *arg)
{
	struct good *g = arg;
	tcpx_p2p_seg l = { g->mr, 0, g->len };
	tcpx_p2p_rseg r = { g->rm, 0, g->len };
	tcpx_p2p_xfer *x;

	while (!atomic_load(&g->stop)) {
		g->err = tcpx_p2p_write(g->c, &l, 1, &r, 1, NULL, &x);
		if (!g->err)
			g->err = tcpx_p2p_wait(x, 30000);
		if (g->err)
			break;
		tcpx_p2p_xfer_release(x);
		atomic_fetch_add(&g->bytes, g->len);
	}
	return NULL;
}

/* GB/s of the good peer over secs. */
static double measure(struct good *g, double secs)
{
	unsigned long long b0 = atomic_load(&g->bytes);
	double t0 = now();

	usleep((useconds_t)(secs * 1e6));
	return (double)(atomic_load(&g->bytes) - b0) / (now() - t0) / 1e9;
}

/* ---- the attacker's messages ---------------------------------------------- */

static unsigned char *msg(tcpx_p2p_conn *c, enum tp_ctl_type type, size_t body)
{
	unsigned char *m;

	pthread_mutex_lock(&c->lock);
	if (tp__ctl_msg(c, type, body, &m))
		m = NULL;
	pthread_mutex_unlock(&c->lock);
	return m; /* written before the next pass: this thread drives A */
}

static void one_sided(tcpx_p2p_conn *c, enum tp_ctl_type type, uint64_t id,
		      const tcpx_p2p_rdesc *d, int good_key, uint64_t off, uint32_t nseg)
{
	unsigned char *m = msg(c, type, 24 + (size_t)nseg * TP_WSEG_BYTES);

	tp_put64(m, id);
	tp_put64(m + 8, nseg);
	tp_put32(m + 16, nseg);
	tp_put32(m + 20, 0);
	for (uint32_t i = 0; i < nseg; i++) {
		unsigned char *p = m + 24 + (size_t)i * TP_WSEG_BYTES;

		tp_put32(p, tp_get32(d->bytes + 8));
		tp_put32(p + 4, 0);
		memcpy(p + 8, d->bytes + 24, TP_KEY_BYTES);
		if (!good_key)
			p[8] ^= 0x80;
		tp_put64(p + 8 + TP_KEY_BYTES, off + i);
		tp_put64(p + 16 + TP_KEY_BYTES, 1);
	}
}

enum kind {
	K_SEND,       /* sends nobody receives, past peer_max_items */
	K_WRITE_HANG, /* writes whose data never comes, with segment lists */
	K_BAD_KEY,    /* writes naming keys never given, past the guess limit */
	K_READ_REFUSED, /* reads outside the export: refused, answered */
	K_READ_RESP,  /* a response to a read nobody asked for */
	K_ACK,        /* an answer to a transfer that does not exist */
	K_NOTIF,      /* notifications nobody takes, past peer_max_notifs */
	K_UNKNOWN,    /* a message of no known type */
	K_HEARTBEAT,  /* heartbeats, 8,000 to a frame, kept coming while the conn lives */
	K_COUNT,
};

static const char *const kind_name[K_COUNT] = {
	"send", "write_hang", "bad_key", "read_refused", "read_resp", "ack", "notif", "unknown",
	"heartbeat",
};

static unsigned long long heartbeats; /* queued by the attacker */

/* Keep two frames of heartbeats waiting in the attacker's stream. */
static void heartbeat_refill(tcpx_p2p_conn *a)
{
	pthread_mutex_lock(&a->lock);
	unsigned char *m;

	while (!a->err && tp__ctl_out_bytes(a) < 2 * TP_CTL_FRAME &&
	       !tp__ctl_msg(a, TP_CTL_HEARTBEAT, 0, &m))
		heartbeats++;
	pthread_mutex_unlock(&a->lock);
}

static void attack(tcpx_p2p_conn *a, const tcpx_p2p_rdesc *d, enum kind k)
{
	unsigned char *m;

	switch (k) {
	case K_SEND:
		for (int i = 0; i < 70; i++) {
			m = msg(a, TP_CTL_SEND, 16);
			tp_put64(m, (uint64_t)i + 1);
			tp_put64(m + 8, 4096);
		}
		break;
	case K_WRITE_HANG:
		for (int i = 0; i < 4; i++)
			one_sided(a, TP_CTL_WRITE, (uint64_t)i + 1, d, 1, 0, 4096);
		break;
	case K_BAD_KEY:
		for (int i = 0; i < 10; i++)
			one_sided(a, TP_CTL_WRITE, (uint64_t)i + 1, d, 0, 0, 16);
		break;
	case K_READ_REFUSED:
		for (int i = 0; i < 64; i++)
			one_sided(a, TP_CTL_READ_REQ, (uint64_t)i + 1, d, 1, 1u << 30, 4);
		break;
	case K_READ_RESP:
		m = msg(a, TP_CTL_READ_RESP, 16);
		tp_put64(m, 77);
		tp_put64(m + 8, 4096);
		break;
	case K_ACK:
		m = msg(a, TP_CTL_ACK, 24);
		memset(m, 0, 24);
		tp_put64(m, 99);
		break;
	case K_NOTIF:
		for (int i = 0; i < 70; i++) {
			m = msg(a, TP_CTL_NOTIF, 4 + 512);
			tp_put32(m, 512);
			memset(m + 4, 'n', 512);
		}
		break;
	case K_HEARTBEAT: /* refilled in main's loop */
		break;
	default:
		m = msg(a, (enum tp_ctl_type)77, 8);
		memset(m, 0, 8);
		break;
	}
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 1000;
	size_t len = argc > 2 ? strtoull(argv[2], NULL, 0) : 1u << 20;
	int only = -1;
	tcpx_p2p_session *t, *gs, *as;
	tcpx_p2p_config cfg;
	tcpx_p2p_conn *gc, *tc;
	tcpx_p2p_mr *tmr;
	tcpx_p2p_rdesc d;
	struct good g = { 0 };
	pthread_t th;
	char *tbuf, *gbuf;
	int fd0, fd_peak, failed[K_COUNT] = { 0 };
	long rss0, rss_peak, rss;
	double base, during, t0;

	for (int k = 0; argc > 3 && k < K_COUNT; k++)
		only = strcmp(argv[3], kind_name[k]) ? only : k;
	if (rounds <= 0 || !len || (argc > 3 && only < 0))
		return fprintf(stderr, "usage: hostile_peer [rounds per kind] [write bytes] "
			       "[kind: send, ..., heartbeat]\n"), 2;
	/* Linked with the library's objects, not next to the .so: name the
	 * emulator this build made unless the environment names a plugin. */
	setenv("TCPX_P2P_PLUGIN", TP_EMU_PLUGIN, 0);
	tcpx_p2p_config_init(&cfg);
	cfg.peer_max_items = 64;
	cfg.peer_max_notifs = 64;
	cfg.progress_thread = 1;
	if (tcpx_p2p_session_create(&cfg, &t) || tcpx_p2p_session_create(NULL, &gs) ||
	    tcpx_p2p_session_create(NULL, &as))
		return fprintf(stderr, "session: %s\n", tcpx_p2p_last_error()), 1;
	tbuf = malloc(len);
	gbuf = calloc(1, len);
	if (!tbuf || !gbuf || tcpx_p2p_mr_register(t, tbuf, len, TCPX_P2P_MEM_HOST, &tmr) ||
	    tcpx_p2p_mr_register(gs, gbuf, len, TCPX_P2P_MEM_HOST, &g.mr) ||
	    tp_link(gs, t, &gc, &tc) ||
	    tcpx_p2p_mr_export(tc, tmr, 0, len, TCPX_P2P_ACCESS_WRITE, &d) ||
	    tcpx_p2p_rmr_import(gc, &d, &g.rm))
		return fprintf(stderr, "set-up: %s\n", tcpx_p2p_last_error()), 1;
	g.c = gc;
	g.len = len;
	pthread_create(&th, NULL, good_loop, &g);
	usleep(300000); /* warm up */
	fd0 = fd_peak = open_fds();
	rss0 = rss_peak = rss_kib();
	base = measure(&g, 2.0);

	unsigned long long b0 = atomic_load(&g.bytes);

	t0 = now();
	for (int r = 0; r < rounds; r++) {
		for (int k = only < 0 ? 0 : only; k < (only < 0 ? K_COUNT : only + 1); k++) {
			tcpx_p2p_conn *ac, *atc;
			tcpx_p2p_rdesc ad;
			int rc = 0;

			if (tp_link(as, t, &ac, &atc) ||
			    tcpx_p2p_mr_export(atc, tmr, 0, len, TCPX_P2P_ACCESS_WRITE |
					       TCPX_P2P_ACCESS_READ, &ad))
				return fprintf(stderr, "round %d: %s\n", r, tcpx_p2p_last_error()), 1;
			attack(ac, &ad, (enum kind)k);
			/* Until the target failed the connection, or 2 s; the kinds
			 * that stay within the bounds (they never fail it) get 10 ms. */
			double end = now() + (k == K_WRITE_HANG || k == K_READ_REFUSED ? 0.01 : 2.0);

			while (!rc && now() < end) {
				if (k == K_HEARTBEAT)
					heartbeat_refill(ac);
				tcpx_p2p_progress(ac);
				pthread_mutex_lock(&atc->lock);
				rc = atc->err;
				pthread_mutex_unlock(&atc->lock);
			}
			failed[k] += rc != 0;
			tcpx_p2p_conn_destroy(ac);
			tcpx_p2p_conn_destroy(atc);
		}
		if (r % 50 == 0 || r == rounds - 1) {
			int n = open_fds();

			rss = rss_kib();
			fd_peak = n > fd_peak ? n : fd_peak;
			rss_peak = rss > rss_peak ? rss : rss_peak;
		}
	}
	during = (double)(atomic_load(&g.bytes) - b0) / (now() - t0) / 1e9;
	{
		tcpx_p2p_notif n[64];
		int got;

		while (tcpx_p2p_notif_poll(t, n, 64, &got) == 0 && got) /* the failure events */
			;
	}
	atomic_store(&g.stop, true);
	pthread_join(th, NULL);
	printf("# hostile_peer: %d rounds x %d message kinds (%.1f s), good peer writes of %zu B\n",
	       rounds, only < 0 ? K_COUNT : 1, now() - t0, len);
	printf("# target's connection to the attacker failed, per kind:");
	for (int k = 0; k < K_COUNT; k++)
		printf(" %s %d/%d", kind_name[k], failed[k], rounds);
	printf("\n");
	if (only < 0 || only == K_HEARTBEAT)
		printf("heartbeats queued by the attacker: %llu (%.2f M/s)\n", heartbeats,
		       (double)heartbeats / (now() - t0) / 1e6);
	printf("good peer GB/s: before %.3f, during %.3f (%.2f)%s\n", base, during,
	       base > 0 ? during / base : 0.0, g.err ? " (its write failed)" : "");
	printf("open fds: before %d, peak %d, after %d\n", fd0, fd_peak, open_fds());
	printf("RSS KiB: before %ld, peak %ld, after %ld\n", rss0, rss_peak, rss_kib());
	tcpx_p2p_rmr_release(g.rm);
	tcpx_p2p_conn_destroy(gc);
	tcpx_p2p_conn_destroy(tc);
	tcpx_p2p_mr_deregister(g.mr);
	tcpx_p2p_mr_deregister(tmr);
	tcpx_p2p_session_destroy(as);
	tcpx_p2p_session_destroy(gs);
	tcpx_p2p_session_destroy(t);
	free(tbuf);
	free(gbuf);
	return g.err ? 1 : 0;
}
