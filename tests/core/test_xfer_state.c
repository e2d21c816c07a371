/* A transfer's states (src/core/xfer_state.c): every path a transfer takes
 * through them moves without a complaint, and a move outside the table is
 * reported as an internal error (a test-hook build, as CI's, would stop
 * there: this test lets it go on, as a release build does). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "core/xfer.h"
#include "tcpx_p2p.h"

static int warnings;
static char last[512];

static void sink(int level, const char *subsys, const char *msg, void *arg)
{
	(void)subsys;
	(void)arg;
	if (level == TCPX_P2P_LOG_WARN) {
		warnings++;
		snprintf(last, sizeof(last), "%s", msg);
	}
}

static int setup(void **state)
{
	(void)state;
#if TP_TEST_HOOKS
	tp__xfer_illegal_stops = false;
#endif
	warnings = 0;
	last[0] = 0;
	return tcpx_p2p_set_log(sink, NULL, TCPX_P2P_LOG_WARN);
}

static int teardown(void **state)
{
	(void)state;
	return tcpx_p2p_set_log(NULL, NULL, TCPX_P2P_LOG_WARN);
}

#define END ((enum tp_xfer_state)-1)

/* Walk a new xfer through path (ended by END). */
static void walk(const enum tp_xfer_state *path)
{
	struct tcpx_p2p_xfer *x = tp__xfer_new(TP_OP_SEND, TP_SEND);

	assert_non_null(x);
	assert_int_equal(x->state, TP_XS_NEW);
	for (; *path != END; path++) {
		tp__xfer_set_state(x, *path);
		assert_int_equal(x->state, *path);
	}
	tp__xfer_free(x);
}

/* The paths docs/architecture.md ("A transfer's life") describes. */
static void test_every_path_is_legal(void **state)
{
	static const enum tp_xfer_state paths[][6] = {
		/* a receive, settling behind this side's answer */
		{ TP_XS_UNMATCHED, TP_XS_STREAMING, TP_XS_SETTLING, TP_XS_DONE, END },
		{ TP_XS_UNMATCHED, TP_XS_STREAMING, TP_XS_DONE, END },
		/* a receive whose totals differ from the peer's send */
		{ TP_XS_UNMATCHED, TP_XS_SETTLING, TP_XS_DONE, END },
		{ TP_XS_UNMATCHED, TP_XS_DONE, END },
		/* a send or write answered before, or after, its last chunk */
		{ TP_XS_STREAMING_UNANSWERED, TP_XS_STREAMING, TP_XS_DONE, END },
		{ TP_XS_STREAMING_UNANSWERED, TP_XS_UNANSWERED, TP_XS_DONE, END },
		/* a read: its response streams, or it is refused */
		{ TP_XS_UNANSWERED, TP_XS_STREAMING, TP_XS_SETTLING, TP_XS_DONE, END },
		{ TP_XS_UNANSWERED, TP_XS_STREAMING, TP_XS_DONE, END },
		{ TP_XS_UNANSWERED, TP_XS_SETTLING, TP_XS_DONE, END },
		{ TP_XS_UNANSWERED, TP_XS_DONE, END },
		/* the library's own items */
		{ TP_XS_STREAMING, END },
		/* gated on an event (or behind one): released as a send or write,
		 * or a read; failed (its event, its deadline, its conn) */
		{ TP_XS_GATED, TP_XS_STREAMING_UNANSWERED, TP_XS_UNANSWERED, TP_XS_DONE, END },
		{ TP_XS_GATED, TP_XS_UNANSWERED, TP_XS_STREAMING, TP_XS_DONE, END },
		{ TP_XS_GATED, TP_XS_DONE, END },
		/* the conn fails under a transfer in any pending state */
		{ TP_XS_STREAMING_UNANSWERED, TP_XS_DONE, END },
		{ TP_XS_STREAMING, TP_XS_DONE, END },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
		walk(paths[i]);
	assert_int_equal(warnings, 0);
}

/* A move the table has not: a library bug, logged, and made all the same
 * (the code that asked for it goes on as it would have). */
static void test_illegal_move_reported(void **state)
{
	static const enum tp_xfer_state path[] = { TP_XS_UNMATCHED, TP_XS_DONE,
						   TP_XS_STREAMING, END };

	(void)state;
	walk(path);
	assert_int_equal(warnings, 1);
	assert_non_null(strstr(last, "internal error"));
	assert_non_null(strstr(last, "from done to streaming"));
}

static void test_names(void **state)
{
	(void)state;
	assert_string_equal(tp__xfer_state_name(TP_XS_GATED), "gated");
	assert_string_equal(tp__xfer_state_name(TP_XS_NEW), "new");
	assert_string_equal(tp__xfer_state_name(TP_XS_DONE), "done");
	assert_string_equal(tp__xfer_state_name((enum tp_xfer_state)99), "invalid");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_every_path_is_legal, setup, teardown),
		cmocka_unit_test_setup_teardown(test_illegal_move_reported, setup, teardown),
		cmocka_unit_test(test_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL) ? 1 : 0;
}
