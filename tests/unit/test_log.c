/* Log sink capture, level filter, line format, stderr-only default sink and
 * logging from several threads. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "util/log.h"

struct capture {
	pthread_mutex_t lock;
	int count;
	int level;
	char subsys[32];
	char msg[1100];
	int bad_lines;
};

static struct capture cap = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void capture_sink(int level, const char *subsys, const char *msg, void *arg)
{
	struct capture *c = arg;

	pthread_mutex_lock(&c->lock);
	c->count++;
	c->level = level;
	snprintf(c->subsys, sizeof(c->subsys), "%s", subsys);
	snprintf(c->msg, sizeof(c->msg), "%s", msg);
	if (strncmp(msg, "tcpx_p2p ", 9) || strchr(msg, '\n'))
		c->bad_lines++;
	pthread_mutex_unlock(&c->lock);
}

static int reset(void **state)
{
	cap.count = 0;
	cap.bad_lines = 0;
	cap.msg[0] = '\0';
	return tcpx_p2p_set_log(capture_sink, &cap, TCPX_P2P_LOG_WARN);
}

static int restore(void **state)
{
	return tcpx_p2p_set_log(NULL, NULL, TCPX_P2P_LOG_WARN);
}

static void test_warn_reaches_sink(void **state)
{
	char want[128];
	int line;

	line = __LINE__ + 1;
	TP_WARN("unit", "value %d from %s", 42, "here");
	assert_int_equal(cap.count, 1);
	assert_int_equal(cap.level, TCPX_P2P_LOG_WARN);
	assert_string_equal(cap.subsys, "unit");
	snprintf(want, sizeof(want), "tcpx_p2p WARN unit test_log.c:%d value 42 from here", line);
	assert_string_equal(cap.msg, want);
}

static void test_level_filter(void **state)
{
	TP_DEBUG("unit", "hidden at warn");
	TP_INFO("unit", "hidden at warn");
	assert_int_equal(cap.count, 0);

	assert_int_equal(tcpx_p2p_set_log(capture_sink, &cap, TCPX_P2P_LOG_DEBUG), 0);
	TP_DEBUG("unit", "shown at debug");
	assert_int_equal(cap.count, 1);
	assert_int_equal(cap.level, TCPX_P2P_LOG_DEBUG);
	assert_non_null(strstr(cap.msg, "tcpx_p2p DEBUG unit "));
	assert_non_null(strstr(cap.msg, " shown at debug"));

	assert_int_equal(tcpx_p2p_set_log(capture_sink, &cap, TCPX_P2P_LOG_NONE), 0);
	TP_WARN("unit", "hidden at none");
	assert_int_equal(cap.count, 1);
}

static void test_set_log_bad_level(void **state)
{
	assert_int_equal(tcpx_p2p_set_log(capture_sink, &cap, 5), TCPX_P2P_EINVAL);
	assert_int_equal(tcpx_p2p_set_log(capture_sink, &cap, -1), TCPX_P2P_EINVAL);
	assert_non_null(strstr(tcpx_p2p_last_error(), "log level"));
	/* The level in force is unchanged. */
	assert_int_equal(tp__log_level, TCPX_P2P_LOG_WARN);
}

static void test_long_message_truncated(void **state)
{
	char big[4000];

	memset(big, 'y', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	TP_WARN("unit", "%s", big);
	assert_int_equal(cap.count, 1);
	assert_true(strlen(cap.msg) < 1024);
	assert_int_equal(cap.bad_lines, 0);
}

static long file_size(FILE *f)
{
	fflush(f);
	fseek(f, 0, SEEK_END);
	return ftell(f);
}

/* The default sink writes one line to stderr and nothing to stdout. */
static void test_default_sink_stderr_only(void **state)
{
	FILE *out = tmpfile(), *err = tmpfile();
	char line[256] = "";
	int saved_out, saved_err;

	assert_non_null(out);
	assert_non_null(err);
	fflush(stdout);
	fflush(stderr);
	saved_out = dup(1);
	saved_err = dup(2);
	dup2(fileno(out), 1);
	dup2(fileno(err), 2);

	tcpx_p2p_set_log(NULL, NULL, TCPX_P2P_LOG_TRACE);
	TP_WARN("unit", "to stderr %d", 7);
	TP_INFO("unit", "info too");
	fflush(stdout);
	fflush(stderr);
	tcpx_p2p_set_log(NULL, NULL, TCPX_P2P_LOG_WARN);

	dup2(saved_out, 1);
	dup2(saved_err, 2);
	close(saved_out);
	close(saved_err);

	assert_int_equal(file_size(out), 0);
	rewind(err);
	assert_non_null(fgets(line, sizeof(line), err));
	assert_non_null(strstr(line, "tcpx_p2p WARN unit test_log.c:"));
	assert_non_null(strstr(line, " to stderr 7\n"));
	assert_non_null(fgets(line, sizeof(line), err));
	assert_non_null(strstr(line, " info too\n"));
	fclose(out);
	fclose(err);
}

#define NTHREADS 4
#define NLINES 2000

static void *log_thread(void *p)
{
	int i;

	for (i = 0; i < NLINES; i++)
		TP_WARN("thr", "thread %ld line %d", (long)(size_t)p, i);
	return NULL;
}

/* Sinks swapped while other threads log: every line lands in one of the
 * sinks, whole. */
static void test_threads(void **state)
{
	pthread_t th[NTHREADS];
	long i;

	for (i = 0; i < NTHREADS; i++)
		assert_int_equal(pthread_create(&th[i], NULL, log_thread, (void *)(size_t)i), 0);
	for (i = 0; i < 100; i++)
		tcpx_p2p_set_log(capture_sink, &cap, TCPX_P2P_LOG_WARN);
	for (i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	assert_int_equal(cap.count, NTHREADS * NLINES);
	assert_int_equal(cap.bad_lines, 0);
}

/* Repeats of one call site: a burst, then one line per period with the
 * count held back; other sites are counted apart. */
static void test_site_limit(void **state)
{
	static const char site_a[] = "a.c", site_b[] = "b.c";
	unsigned long held, passed = 0;
	time_t t0 = 1000;

	for (int i = 0; i < 1000; i++)
		passed += (unsigned long)tp__log_site_allow(site_a, 7, t0, &held);
	assert_int_equal(passed, TP_LOG_SITE_BURST);
	assert_true(tp__log_site_allow(site_b, 7, t0, &held)); /* another site */
	assert_true(tp__log_site_allow(site_a, 8, t0, &held)); /* another line */
	assert_false(tp__log_site_allow(site_a, 7, t0 + TP_LOG_SITE_PERIOD - 1, &held));
	assert_true(tp__log_site_allow(site_a, 7, t0 + TP_LOG_SITE_PERIOD, &held));
	assert_int_equal(held, 1000 - TP_LOG_SITE_BURST + 1);
	assert_false(tp__log_site_allow(site_a, 7, t0 + TP_LOG_SITE_PERIOD, &held));
	assert_true(tp__log_site_allow(site_a, 7, t0 + 2 * TP_LOG_SITE_PERIOD, &held));
	assert_int_equal(held, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_warn_reaches_sink, reset, restore),
		cmocka_unit_test_setup_teardown(test_level_filter, reset, restore),
		cmocka_unit_test_setup_teardown(test_set_log_bad_level, reset, restore),
		cmocka_unit_test_setup_teardown(test_long_message_truncated, reset, restore),
		cmocka_unit_test_setup_teardown(test_default_sink_stderr_only, reset, restore),
		cmocka_unit_test_setup_teardown(test_threads, reset, restore),
		cmocka_unit_test(test_site_limit),
	};

	return cmocka_run_group_tests(tests, NULL, NULL) ? 1 : 0;
}
