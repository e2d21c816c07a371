/* tp__copy_path (src/core/pipeline/copy_path.c) against the rules it gathered from
 * the send gather, the receive unpack and the device unpack's variants,
 * restated here one by one, for every combination of what it looks at. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "core/pipeline/comm.h"
#include "core/pipeline/hostcopy.h"
#include "core/session.h"

/* The send gather through staging: host memory on the host (in the pass
 * or, for a large chunk, on the copy threads), device memory by a list. */
static enum tp_copy_path gather_rule(const struct tp_slot *sl)
{
	bool host = !sl->dst_dev;

	if (host)
		return tp__hcopy_worth(sl->len) ? TP_PATH_HOST_THREADS : TP_PATH_HOST_NOW;
	return TP_PATH_LIST_KERNEL;
}

/* A received chunk: several segments (or a large host-bounce chunk into
 * host memory) by a list; no records: nothing; host bounce into host
 * memory: per record; else the device unpack's variant. */
static enum tp_copy_path unpack_rule(int unpack, const struct tp_comm *cm,
				     const struct tp_slot *sl)
{
	bool worth = tp__hcopy_worth(sl->len);

	if (sl->multi || (cm->meta && !cm->bounce_on_device && !sl->dst_dev && worth)) {
		bool dev_src = cm->meta ? cm->bounce_on_device : sl->dst_dev;
		bool host = !dev_src && !sl->dst_dev;

		if (host)
			return worth ? TP_PATH_HOST_THREADS : TP_PATH_HOST_NOW;
		return dev_src && (sl->dst_dev || sl->dst_mapped) ? TP_PATH_LIST_KERNEL
								   : TP_PATH_LIST_COPIES;
	}
	if (!cm->meta)
		return TP_PATH_NONE;
	if (!cm->bounce_on_device && !sl->dst_dev)
		return TP_PATH_RECORDS;
	if ((sl->dst_dev || sl->dst_mapped) && cm->bounce_on_device &&
	    unpack == TCPX_P2P_UNPACK_KERNEL)
		return TP_PATH_KERNEL;
	if (sl->dst_dev && unpack == TCPX_P2P_UNPACK_HOST)
		return TP_PATH_STAGED;
	return TP_PATH_D2D;
}

static void test_every_case(void **state)
{
	static struct tcpx_p2p_session s;
	static struct tp_unpack_meta ring;
	const uint32_t lens[] = { 0, 4096, 64u << 10, 4u << 20 };
	struct tp_comm cm;
	struct tp_slot sl;
	unsigned bits, n = 0;

	(void)state;
	for (int unpack = TCPX_P2P_UNPACK_KERNEL; unpack <= TCPX_P2P_UNPACK_HOST; unpack++)
		for (bits = 0; bits < 64; bits++)
			for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]); l++) {
				memset(&cm, 0, sizeof(cm));
				memset(&sl, 0, sizeof(sl));
				s.cfg.unpack = unpack;
				cm.dir = bits & 1 ? TP_SEND : TP_RECV;
				cm.meta = bits & 2 ? &ring : NULL;
				cm.bounce_on_device = bits & 4;
				sl.multi = bits & 8;
				sl.dst_dev = bits & 16;
				sl.dst_mapped = bits & 32;
				sl.len = lens[l];
				assert_int_equal(tp__copy_path(&s, &cm, &sl),
						 cm.dir == TP_SEND ? gather_rule(&sl)
								   : unpack_rule(unpack, &cm, &sl));
				n++;
			}
	assert_int_equal(n, 3 * 64 * 4);
}

int main(void)
{
	const struct CMUnitTest tests[] = { cmocka_unit_test(test_every_case) };

	return cmocka_run_group_tests(tests, NULL, NULL);
}
