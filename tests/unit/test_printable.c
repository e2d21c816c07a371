/* tp__printable: peer strings reach logs as bounded printable ASCII. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "util/printable.h"

static void test_printable(void **state)
{
	char out[16];

	assert_string_equal(tp__printable(out, sizeof(out), "TCPXEmu_v7", 10), "TCPXEmu_v7");
	assert_string_equal(tp__printable(out, sizeof(out), "a\x1b[2Jb\nc", 8), "a?[2Jb?c");
	/* Stops at the length even without a NUL, and at a NUL before it. */
	assert_string_equal(tp__printable(out, sizeof(out), "abcdef", 3), "abc");
	assert_string_equal(tp__printable(out, sizeof(out), "ab\0cd", 5), "ab");
	assert_string_equal(tp__printable(out, sizeof(out), "\xff\x80", 2), "??");
	/* Too long: cut with "...", never past the capacity. */
	assert_string_equal(tp__printable(out, sizeof(out), "0123456789abcdefghij", 20),
			    "0123456789ab...");
	assert_string_equal(tp__printable(out, 3, "abcdef", 6), "ab");
	assert_string_equal(tp__printable(out, sizeof(out), NULL, 5), "");
}

int main(void)
{
	const struct CMUnitTest tests[] = { cmocka_unit_test(test_printable) };

	return cmocka_run_group_tests(tests, NULL, NULL) ? 1 : 0;
}
