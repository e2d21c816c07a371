/* NIC choice by PCIe distance, on an A3-like tree (docs/tcpx.md, "Running on
 * GCP A3"). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "core/setup/topo.h"

#define ROOT0 "/sys/devices/pci0000:00/0000:00:04.0"
#define ROOT1 "/sys/devices/pci0000:80/0000:80:04.0"
/* four switches, each with two GPUs and one NIC */
#define SW(r, s) r "/0000:" s ":00.0/0000:" s ":01.0"

static const char *const nics[] = {
	SW(ROOT0, "10") "/0000:11:00.0", SW(ROOT0, "20") "/0000:21:00.0",
	SW(ROOT1, "90") "/0000:91:00.0", SW(ROOT1, "a0") "/0000:a1:00.0",
};

static void test_a3_pairs(void **state)
{
	const char *const gpus[] = {
		SW(ROOT0, "10") "/0000:12:00.0", SW(ROOT0, "10") "/0000:13:00.0",
		SW(ROOT0, "20") "/0000:22:00.0", SW(ROOT0, "20") "/0000:23:00.0",
		SW(ROOT1, "90") "/0000:92:00.0", SW(ROOT1, "90") "/0000:93:00.0",
		SW(ROOT1, "a0") "/0000:a2:00.0", SW(ROOT1, "a0") "/0000:a3:00.0",
	};
	int g;

	for (g = 0; g < 8; g++)
		assert_int_equal(tp__topo_closest(gpus[g], nics, 4), g / 2);
}

static void test_no_information(void **state)
{
	const char *const empty[] = { "", "", NULL };
	const char *const other_root[] = { "/sys/devices/pci0000:40/0000:40:01.0/0000:41:00.0" };

	assert_int_equal(tp__topo_closest(SW(ROOT0, "10") "/0000:12:00.0", empty, 3), -1);
	assert_int_equal(tp__topo_closest("", nics, 4), -1);
	assert_int_equal(tp__topo_closest(NULL, nics, 4), -1);
	/* only /sys/devices in common: no preference */
	assert_int_equal(tp__topo_closest(SW(ROOT0, "10") "/0000:12:00.0", other_root, 1), -1);
	/* component-wise, not character-wise: pci0000:0 is not pci0000:00 */
	assert_int_equal(tp__topo_closest("/sys/devices/pci0000:0/x", nics, 4), -1);
}

/* Same root complex but no shared switch: still the nearer root wins. */
static void test_nearest_root(void **state)
{
	assert_int_equal(tp__topo_closest(ROOT1 "/0000:b0:00.0", nics, 4), 2);
	assert_int_equal(tp__topo_pci_path("not-a-bus-id", (char[64]){ 0 }, 64), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_a3_pairs),
		cmocka_unit_test(test_no_information),
		cmocka_unit_test(test_nearest_root),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
