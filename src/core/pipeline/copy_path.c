/* Which copies move a chunk's bytes between the plugin's buffer and the
 * transfer's memory: the one place that chooses among the unpack kernel,
 * copy lists (the copy-list kernel or batched cudaMemcpyAsync), per-record
 * copies and the host.  Its callers (stream.c) carry the choice out;
 * devq.c launches the device paths it names. */
#include "core/pipeline/comm.h"
#include "core/pipeline/hostcopy.h"
#include "core/session.h"

/* A list of copies on the session's stream: the copy-list kernel where it
 * can reach both sides, else batched copies. */
static enum tp_copy_path device_list(bool dev_src, const struct tp_slot *sl)
{
	return dev_src && (sl->dst_dev || sl->dst_mapped) ? TP_PATH_LIST_KERNEL
							   : TP_PATH_LIST_COPIES;
}

enum tp_copy_path tp__copy_path(const struct tcpx_p2p_session *s, const struct tp_comm *cm,
				const struct tp_slot *sl)
{
	bool worth = tp__hcopy_worth(sl->len);
	bool host_src;

	/* A send through staging gathers its segments there. */
	if (cm->dir == TP_SEND) {
		if (!sl->dst_dev)
			return worth ? TP_PATH_HOST_THREADS : TP_PATH_HOST_NOW;
		return TP_PATH_LIST_KERNEL;
	}
	/* A receive scattered into several segments, from the bounce records
	 * or the staging slot (of the transfer's memory type); or a large
	 * host-bounce chunk into host memory, whose record copies go to the
	 * copy threads. */
	if (sl->multi || (cm->meta && !cm->bounce_on_device && !sl->dst_dev && worth)) {
		host_src = cm->meta ? !cm->bounce_on_device : !sl->dst_dev;
		if (host_src && !sl->dst_dev)
			return worth ? TP_PATH_HOST_THREADS : TP_PATH_HOST_NOW;
		return device_list(!host_src, sl);
	}
	if (!cm->meta)
		return TP_PATH_NONE;
	if (!cm->bounce_on_device && !sl->dst_dev)
		return TP_PATH_RECORDS;
	/* The kernel reads device bounce pages and writes device memory or
	 * mapped host memory; every other pair goes through copies
	 * (cudaMemcpyDefault). */
	if (cm->bounce_on_device && (sl->dst_dev || sl->dst_mapped) &&
	    s->cfg.unpack == TCPX_P2P_UNPACK_KERNEL)
		return TP_PATH_KERNEL;
	if (sl->dst_dev && s->cfg.unpack == TCPX_P2P_UNPACK_HOST)
		return TP_PATH_STAGED;
	return TP_PATH_D2D;
}
