/* Liveness (docs/reliability.md, "Liveness"): a hub process with a
 * connection to each of two peer processes; one peer is stopped (SIGSTOP:
 * its sockets stay open and nothing moves) or killed (SIGKILL) while both
 * keep the hub busy, or (idle) its application stops calling the library
 * for twice the hub's dead_after_ms and then goes on: alive, it must not
 * be presumed dead (its keepalive thread heartbeats).  The hub never waits on that peer with a deadline:
 *   notif   the hub only polls notifications (each peer sends them);
 *   poster  the hub posts sends with the progress thread and only looks
 *           at them (tcpx_p2p_test), as an application that polls later.
 * Either way the hub must learn of the failure (the failure notification,
 * the pending send's error), and the other peer's connection must go on:
 * things are counted, never timed; the deadline is only a hang limit.
 * Usage: test_liveness notif|poster stop|kill|idle */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "tcpx_p2p.h"
#include "pair.h"

#define HB_MS 100
#ifndef DEAD_MS
#define DEAD_MS 5000
#endif
#define XFER 4096
#define BEFORE 20 /* completions from each peer before the fault */
#define AFTER 20  /* from the healthy peer after the hub saw the fault */

#define IDLE_MS (2 * DEAD_MS + 1000)

static int poster, use_kill, use_idle;
static volatile sig_atomic_t go_idle; /* a peer's SIGUSR1 */

static void on_usr1(int sig)
{
	(void)sig;
	go_idle = 1;
}

static void cfg_init(tcpx_p2p_config *cfg, int thread)
{
	tcpx_p2p_config_init(cfg);
	cfg->heartbeat_ms = HB_MS;
	cfg->dead_after_ms = DEAD_MS;
	cfg->progress_thread = thread;
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A peer: dial the hub, then send notifications (notif) or receive the
 * hub's sends (poster) until its connection ends. */
static int peer_main(int rfd)
{
	tcpx_p2p_session *s = NULL;
	tcpx_p2p_conn *c = NULL;
	tcpx_p2p_mr *mr = NULL;
	tcpx_p2p_xfer *x;
	tcpx_p2p_config cfg;
	uint16_t port;
	static char buf[XFER];
	int rc;

	if (read(rfd, &port, sizeof(port)) != sizeof(port))
		return 2;
	signal(SIGUSR1, on_usr1);
	cfg_init(&cfg, 0);
	if (tcpx_p2p_session_create(&cfg, &s) ||
	    tcpx_p2p_dial(s, "127.0.0.1", port, TP_TEST_TIMEOUT_MS, &c) ||
	    tcpx_p2p_mr_register(s, buf, sizeof(buf), TCPX_P2P_MEM_HOST, &mr))
		return 3;
	for (;;) {
		if (poster) {
			rc = tcpx_p2p_recv(c, mr, 0, sizeof(buf), &x);
			if (!rc) {
				rc = tcpx_p2p_wait(x, TP_TEST_TIMEOUT_MS);
				tcpx_p2p_xfer_release(x);
			}
		} else {
			rc = tcpx_p2p_notify(c, "tick", 4);
			if (rc == TCPX_P2P_EAGAIN)
				rc = 0;
			if (!rc)
				rc = tcpx_p2p_progress(c);
			usleep(2000);
		}
		if (rc)
			break;
		if (go_idle) { /* busy elsewhere: no call into the library */
			go_idle = 0;
			usleep(IDLE_MS * 1000);
		}
	}
	tcpx_p2p_conn_destroy(c);
	tcpx_p2p_mr_deregister(mr);
	tcpx_p2p_session_destroy(s);
	return 0;
}

static pid_t spawn(int *wfd)
{
	int p[2];
	pid_t pid;

	if (pipe(p))
		return -1;
	pid = fork();
	if (pid == 0) {
		/* A hub that fails an assertion leaves no peer behind, stopped or not. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(p[1]);
		_exit(peer_main(p[0]));
	}
	close(p[0]);
	*wfd = p[1];
	return pid;
}

struct hub {
	tcpx_p2p_session *s;
	tcpx_p2p_conn *c[2];
	tcpx_p2p_mr *mr;
	tcpx_p2p_xfer *x[2];
	long done[2];   /* completions (notifications taken, sends done) per peer */
	int err[2];     /* the failure the hub saw per peer (0: none yet) */
	char why[2][256];
};

static int which(const struct hub *h, const tcpx_p2p_conn *c)
{
	return c == h->c[0] ? 0 : c == h->c[1] ? 1 : -1;
}

/* One look at everything: notifications taken, or sends looked at and
 * new ones posted. */
static void hub_step(struct hub *h)
{
	tcpx_p2p_notif n[16];
	int i, k, cnt, done, rc;

	if (!poster) {
		assert_int_equal(tcpx_p2p_notif_poll(h->s, n, 16, &cnt), 0);
		for (k = 0; k < cnt; k++) {
			i = which(h, n[k].conn);
			assert_true(i >= 0);
			if (n[k].len) {
				h->done[i]++;
			} else if (!h->err[i]) {
				h->err[i] = tcpx_p2p_progress(h->c[i]);
				snprintf(h->why[i], sizeof(h->why[i]), "%s", tcpx_p2p_last_error());
			}
		}
		usleep(1000);
		return;
	}
	for (i = 0; i < 2; i++) {
		if (h->err[i])
			continue;
		if (!h->x[i]) {
			rc = tcpx_p2p_send(h->c[i], h->mr, 0, XFER, &h->x[i]);
			if (rc) {
				h->err[i] = rc;
				snprintf(h->why[i], sizeof(h->why[i]), "%s", tcpx_p2p_last_error());
			}
			continue;
		}
		rc = tcpx_p2p_test(h->x[i], &done);
		if (!rc && !done)
			continue;
		if (rc) {
			h->err[i] = rc;
			snprintf(h->why[i], sizeof(h->why[i]), "%s", tcpx_p2p_last_error());
		} else {
			h->done[i]++;
		}
		assert_int_equal(tcpx_p2p_xfer_release(h->x[i]), 0);
		h->x[i] = NULL;
	}
	usleep(1000);
}

/* Peer 0 stops calling the library for IDLE_MS; the hub goes on driving
 * its side all along.  Both connections must come through: afterwards
 * peer 0 completes AFTER more, having been heard from (heartbeats) while
 * idle.  Then everything is closed and both peers exit cleanly. */
static void peer_idle(struct hub *h, const pid_t *pid, const int *wfd, int64_t limit)
{
	tcpx_p2p_stats before = { .struct_size = sizeof(before) };
	tcpx_p2p_stats after = { .struct_size = sizeof(after) };
	int64_t t0;
	long a;
	int status;

	assert_int_equal(tcpx_p2p_conn_stats(h->c[0], &before), 0);
	assert_int_equal(kill(pid[0], SIGUSR1), 0);
	t0 = now_ms();
	while (now_ms() - t0 < IDLE_MS && !h->err[0] && !h->err[1])
		hub_step(h);
	a = h->done[0];
	while ((h->done[0] < a + AFTER || h->done[1] < BEFORE + AFTER) && !h->err[0] &&
	       !h->err[1]) {
		hub_step(h);
		assert_true(now_ms() < limit);
	}
	print_message("  peer 0 idle %d ms (hub's dead_after_ms %d): errors %d/%d (%s)\n",
		      IDLE_MS, DEAD_MS, h->err[0], h->err[1], h->why[0]);
	assert_int_equal(h->err[0], 0);
	assert_int_equal(h->err[1], 0);
	assert_int_equal(tcpx_p2p_conn_stats(h->c[0], &after), 0);
	assert_true(after.heartbeats_recv > before.heartbeats_recv);
	for (int i = 0; i < 2; i++) {
		if (h->x[i]) {
			assert_int_equal(tcpx_p2p_wait(h->x[i], TP_TEST_TIMEOUT_MS), 0);
			tcpx_p2p_xfer_release(h->x[i]);
		}
		tcpx_p2p_conn_destroy(h->c[i]);
		assert_int_equal(waitpid(pid[i], &status, 0), pid[i]);
		assert_true(WIFEXITED(status));
		assert_int_equal(WEXITSTATUS(status), 0);
		close(wfd[i]);
	}
	assert_int_equal(tcpx_p2p_mr_deregister(h->mr), 0);
	assert_int_equal(tcpx_p2p_session_destroy(h->s), 0);
}

static void test_peer_fault(void **state)
{
	static char buf[XFER];
	struct hub h = { 0 };
	tcpx_p2p_config cfg;
	tcpx_p2p_server *srv;
	tcpx_p2p_stats st = { .struct_size = sizeof(st) };
	int wfd[2], status;
	pid_t pid[2];
	uint16_t port;
	int64_t t0, seen, limit;
	long b_at_fault;

	(void)state;
	/* Peers first: nothing of the library runs in this process before
	 * the forks. */
	for (int i = 0; i < 2; i++) {
		pid[i] = spawn(&wfd[i]);
		assert_true(pid[i] > 0);
	}
	cfg_init(&cfg, poster);
	assert_int_equal(tcpx_p2p_session_create(&cfg, &h.s), 0);
	assert_int_equal(tcpx_p2p_mr_register(h.s, buf, sizeof(buf), TCPX_P2P_MEM_HOST, &h.mr), 0);
	assert_int_equal(tcpx_p2p_server_create(h.s, "127.0.0.1", 0, &srv), 0);
	assert_int_equal(tcpx_p2p_server_port(srv, &port), 0);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(write(wfd[i], &port, sizeof(port)), (ssize_t)sizeof(port));
		assert_int_equal(tcpx_p2p_server_accept(srv, TP_TEST_TIMEOUT_MS, &h.c[i]), 0);
	}
	tcpx_p2p_server_destroy(srv);

	limit = now_ms() + TP_TEST_TIMEOUT_MS; /* hang limit only */
	while (h.done[0] < BEFORE || h.done[1] < BEFORE) {
		hub_step(&h);
		assert_true(now_ms() < limit);
	}
	assert_int_equal(h.err[0] + h.err[1], 0);
	if (use_idle) {
		peer_idle(&h, pid, wfd, limit);
		return;
	}
	kill(pid[0], use_kill ? SIGKILL : SIGSTOP);
	t0 = now_ms();
	while (!h.err[0]) {
		hub_step(&h);
		assert_true(now_ms() < limit);
	}
	seen = now_ms() - t0;
	print_message("  hub saw peer 0's %s after %lld ms: %s (%s)\n",
		      use_kill ? "death" : "stop", (long long)seen, tcpx_p2p_strerror(h.err[0]),
		      h.why[0]);
	assert_int_equal(h.err[0], TCPX_P2P_ECLOSED);
	if (!use_kill) /* a stopped peer closes nothing: only its silence tells */
		assert_non_null(strstr(h.why[0], "sent nothing"));
	/* The other connection goes on. */
	b_at_fault = h.done[1];
	while (h.done[1] < b_at_fault + AFTER) {
		hub_step(&h);
		assert_true(now_ms() < limit);
	}
	assert_int_equal(h.err[1], 0);
	assert_int_equal(tcpx_p2p_progress(h.c[1]), 0);
	assert_int_equal(tcpx_p2p_conn_stats(h.c[0], &st), 0);
	if (!use_kill)
		assert_true(st.heartbeats_missed > 0);
	assert_int_equal(tcpx_p2p_conn_stats(h.c[1], &st), 0);
	assert_true(st.heartbeats_recv > 0 || st.xfers_out > 0 || st.notifs_in > 0);

	kill(pid[0], SIGKILL);
	assert_int_equal(waitpid(pid[0], &status, 0), pid[0]);
	for (int i = 0; i < 2; i++) {
		if (h.x[i]) {
			tcpx_p2p_wait(h.x[i], 0);
			tcpx_p2p_conn_destroy(h.c[i]);
			h.c[i] = NULL;
			tcpx_p2p_xfer_release(h.x[i]);
		}
		if (h.c[i])
			tcpx_p2p_conn_destroy(h.c[i]);
	}
	/* The healthy peer sees its connection closed and exits cleanly. */
	assert_int_equal(waitpid(pid[1], &status, 0), pid[1]);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_int_equal(tcpx_p2p_mr_deregister(h.mr), 0);
	assert_int_equal(tcpx_p2p_session_destroy(h.s), 0);
	close(wfd[0]);
	close(wfd[1]);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = { cmocka_unit_test(test_peer_fault) };

	if (argc != 3 || (strcmp(argv[1], "notif") && strcmp(argv[1], "poster")) ||
	    (strcmp(argv[2], "stop") && strcmp(argv[2], "kill") && strcmp(argv[2], "idle"))) {
		fprintf(stderr, "usage: test_liveness notif|poster stop|kill|idle\n");
		return 1;
	}
	poster = !strcmp(argv[1], "poster");
	use_kill = !strcmp(argv[2], "kill");
	use_idle = !strcmp(argv[2], "idle");
	return cmocka_run_group_tests_name("liveness", tests, NULL, NULL) ? 1 : 0;
}
