/* Error text, version string and the per-thread last-error detail. */
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "util/error.h"

static void test_strerror_every_code(void **state)
{
	const char *seen[1 - TCPX_P2P_EPEERRESTART];
	int code, j;

	for (code = TCPX_P2P_OK; code >= TCPX_P2P_EPEERRESTART; code--) {
		const char *s = tcpx_p2p_strerror(code);

		assert_non_null(s);
		assert_true(strlen(s) > 3);
		assert_string_not_equal(s, "unknown error");
		for (j = 0; j < -code; j++)
			assert_string_not_equal(s, seen[j]);
		seen[-code] = s;
	}
	assert_string_equal(tcpx_p2p_strerror(TCPX_P2P_ETIMEDOUT), "timed out");
}

static void test_strerror_unknown(void **state)
{
	static const int bad[] = { 1, 77, TCPX_P2P_EPEERRESTART - 1, -1000, INT_MIN, INT_MAX };
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_string_equal(tcpx_p2p_strerror(bad[i]), "unknown error");
}

static void test_version(void **state)
{
	char want[32];

	snprintf(want, sizeof(want), "%d.%d.%d", TCPX_P2P_VERSION_MAJOR, TCPX_P2P_VERSION_MINOR,
		 TCPX_P2P_VERSION_PATCH);
	assert_string_equal(tcpx_p2p_version(), want);
	assert_string_equal(tcpx_p2p_version(), TCPX_P2P_VERSION_STRING);
}

static void test_error_detail(void **state)
{
	char big[2048];

	assert_int_equal(tp__error(TCPX_P2P_ENET, "dial %s:%d: %s", "10.0.0.1", 5000, "refused"),
			 TCPX_P2P_ENET);
	assert_string_equal(tcpx_p2p_last_error(), "dial 10.0.0.1:5000: refused");

	/* Wrapping the previous detail must not corrupt it (overlap). */
	assert_int_equal(tp__error(TCPX_P2P_ECLOSED, "conn: %s", tcpx_p2p_last_error()),
			 TCPX_P2P_ECLOSED);
	assert_string_equal(tcpx_p2p_last_error(), "conn: dial 10.0.0.1:5000: refused");

	/* Truncated to 1023 characters, never overflowing. */
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	tp__error(TCPX_P2P_EINVAL, "%s", big);
	assert_int_equal(strlen(tcpx_p2p_last_error()), 1023);
}

struct thread_arg {
	pthread_barrier_t *barrier;
	int id;
	int ok;
};

static void *error_thread(void *p)
{
	struct thread_arg *a = p;
	char want[64];
	int i;

	snprintf(want, sizeof(want), "thread %d detail", a->id);
	a->ok = strcmp(tcpx_p2p_last_error(), "") == 0;
	for (i = 0; i < 1000; i++) {
		tp__error(TCPX_P2P_EINVAL, "thread %d detail", a->id);
		if (i == 0)
			pthread_barrier_wait(a->barrier);
		if (strcmp(tcpx_p2p_last_error(), want))
			a->ok = 0;
	}
	return NULL;
}

static void test_last_error_per_thread(void **state)
{
	pthread_barrier_t barrier;
	struct thread_arg args[2];
	pthread_t th[2];
	int i;

	tp__error(TCPX_P2P_ENOMEM, "main thread detail");
	pthread_barrier_init(&barrier, NULL, 2);
	for (i = 0; i < 2; i++) {
		args[i] = (struct thread_arg){ .barrier = &barrier, .id = i };
		assert_int_equal(pthread_create(&th[i], NULL, error_thread, &args[i]), 0);
	}
	for (i = 0; i < 2; i++) {
		pthread_join(th[i], NULL);
		assert_true(args[i].ok);
	}
	pthread_barrier_destroy(&barrier);
	assert_string_equal(tcpx_p2p_last_error(), "main thread detail");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_strerror_every_code),
		cmocka_unit_test(test_strerror_unknown),
		cmocka_unit_test(test_version),
		cmocka_unit_test(test_error_detail),
		cmocka_unit_test(test_last_error_per_thread),
	};

	return cmocka_run_group_tests(tests, NULL, NULL) ? 1 : 0;
}
