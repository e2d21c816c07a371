/* TCPX_P2P_NICS parsing and the closest-NIC set on PCIe trees (an A3 tree,
 * and a switch with two NICs). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "core/setup/nics.h"
#include "core/setup/topo.h"

static const char *const names[] = { "eth1", "eth2", "eth3", "eth4" };
static const int closest[] = { 2 };

static int pick(const char *spec, int *out)
{
	int n = -1;

	if (tp__nics_pick(spec, names, 4, closest, 1, out, &n))
		return -1;
	return n;
}

static void test_pick(void **state)
{
	int out[TP_MAX_NICS];

	assert_int_equal(pick(NULL, out), 1);
	assert_int_equal(out[0], 2);
	assert_int_equal(pick("auto", out), 1);
	assert_int_equal(out[0], 2);
	assert_int_equal(pick("", out), 1);
	assert_int_equal(pick("all", out), 4);
	assert_int_equal(out[3], 3);
	/* Keywords in any case, as the other enumerated settings; names exact. */
	assert_int_equal(pick("All", out), 4);
	assert_int_equal(pick("AUTO", out), 1);
	assert_int_equal(out[0], 2);
	assert_int_equal(pick("ETH1", out), -1);
	assert_int_equal(pick("eth4,eth1", out), 2);
	assert_int_equal(out[0], 3);
	assert_int_equal(out[1], 0);
	assert_int_equal(pick("1,eth2,1", out), 1); /* repeats collapse */
	assert_int_equal(out[0], 1);
	assert_int_equal(pick("0,3", out), 2);
	assert_int_equal(pick("eth5", out), -1);
	assert_int_equal(pick("4", out), -1);
	assert_int_equal(pick("eth", out), -1);
	assert_int_equal(pick("eth1,,eth2", out), -1);
	assert_int_equal(pick(",", out), -1);
}

#define ROOT0 "/sys/devices/pci0000:00/0000:00:04.0"
#define ROOT1 "/sys/devices/pci0000:80/0000:80:04.0"
#define SW(r, s) r "/0000:" s ":00.0/0000:" s ":01.0"

/* A3: one NIC per switch of two GPUs; the set is that one NIC. */
static void test_closest_set_a3(void **state)
{
	const char *const nics[] = {
		SW(ROOT0, "10") "/0000:11:00.0", SW(ROOT0, "20") "/0000:21:00.0",
		SW(ROOT1, "90") "/0000:91:00.0", SW(ROOT1, "a0") "/0000:a1:00.0",
	};
	const char *const gpus[] = {
		SW(ROOT0, "10") "/0000:12:00.0", SW(ROOT0, "20") "/0000:23:00.0",
		SW(ROOT1, "90") "/0000:92:00.0", SW(ROOT1, "a0") "/0000:a3:00.0",
	};
	int out[TP_MAX_NICS], g;

	for (g = 0; g < 4; g++) {
		assert_int_equal(tp__topo_closest_set(gpus[g], nics, 4, out, TP_MAX_NICS), 1);
		assert_int_equal(out[0], g);
	}
}

/* Two NICs behind the GPU's switch: both, in device order; none shared. */
static void test_closest_set_two(void **state)
{
	const char *const nics[] = {
		SW(ROOT0, "20") "/0000:21:00.0", SW(ROOT0, "10") "/0000:11:00.0",
		SW(ROOT0, "10") "/0000:14:00.0", "",
	};
	int out[TP_MAX_NICS];

	assert_int_equal(tp__topo_closest_set(SW(ROOT0, "10") "/0000:12:00.0", nics, 4, out,
					      TP_MAX_NICS), 2);
	assert_int_equal(out[0], 1);
	assert_int_equal(out[1], 2);
	assert_int_equal(tp__topo_closest_set(SW(ROOT0, "10") "/0000:12:00.0", nics, 4, out, 1),
			 1);
	assert_int_equal(tp__topo_closest_set("/sys/devices/pci0000:40/0000:40:01.0", nics, 4,
					      out, TP_MAX_NICS), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pick),
		cmocka_unit_test(test_closest_set_a3),
		cmocka_unit_test(test_closest_set_two),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
