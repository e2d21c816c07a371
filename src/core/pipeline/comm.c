/* The pipeline of one comm, the same for the control channel and the data
 * channels: every comm is a FIFO of at most `window` requests moving
 * through  issue -> test -> (unpack) -> consume  (sends: issue -> test).
 * The plugin contract (docs/tcpx.md, rules 6, 7 and 12): test only the
 * oldest incomplete request, irecvConsumed in posting order, at most 16
 * requests per comm, a NULL request means "not now", and a posted request
 * moves no byte until test() hands it to the plugin's helper threads — at
 * most one per test, so a comm is tested once more per request it posted.
 *
 * These stages know nothing of what the requests carry: each returns to
 * its caller, which reads the slots that moved ([before, after) of the
 * window counter it advanced) and decides what they complete. */
#include "core/pipeline/comm.h"
#include "core/pipeline/devq.h"
#include "core/pipeline/hostcopy.h"
#include "core/pipeline/vec.h"
#include "core/pipeline/window.h"
#include "core/session.h"
#include "util/time.h"

int tp__comm_issue(struct tp_net *net, struct tp_comm *cm, void *buf, size_t len, void *mh,
		   bool *taken)
{
	void *req = NULL;
	int tag = tp_comm_tag(cm->issued), rc;

	*taken = false;
	if (cm->dir == TP_SEND)
		rc = net->ops->isend(net, cm->comm, buf, len, tag, mh, &req);
	else
		rc = net->ops->irecv(net, cm->comm, buf, len, tag, mh, &req);
	if (rc || !req)
		return rc;
	cm->slot[tp_window_slot(cm->issued)].request = req;
	cm->issued++;
	cm->handover++;
	*taken = true;
	return 0;
}

int tp__comm_test(struct tp_net *net, struct tp_comm *cm, bool *moved)
{
	struct tp_slot *sl;
	int done, size, rc;

	while (cm->win.tested != cm->issued) {
		sl = &cm->slot[tp_window_slot(cm->win.tested)];
		done = 0;
		rc = net->ops->test(net, sl->request, &done, &size);
		if (rc)
			return rc;
		if (cm->handover)
			cm->handover--;
		if (!done) {
			if (cm->handover)
				continue;
			return 0;
		}
		cm->win.tested++;
		*moved = true;
		sl->got = size;
		if (cm->dir == TP_RECV) {
			cm->sizes_seen |= size != TP_NET_SIZE_UNKNOWN;
			continue;
		}
		/* A send ends at its test: nothing to unpack or consume. */
		sl->t_done = tp__now_ns();
		cm->win.unpacked = cm->win.retired = cm->win.tested;
		if (sl->stage)
			tp__stage_give(cm, sl->stage);
	}
	return 0;
}

int tp__comm_unpacked(struct tcpx_p2p_session *s, const struct tp_slot *sl, bool device_too,
		      bool *ready)
{
	*ready = true;
	if (sl->path == TP_PATH_HOST_THREADS)
		*ready = tp__hcopy_done(&sl->hjob);
	else if (tp_path_on_device(sl->path) && device_too)
		return tp__devq_done(s, sl->launch, ready);
	return 0;
}

int tp__comm_consume(struct tp_net *net, struct tp_comm *cm)
{
	struct tp_slot *sl = &cm->slot[tp_window_slot(cm->win.retired)];
	int rc;

	rc = net->ops->irecv_consumed(net, cm->comm, sl->request);
	if (rc)
		return rc;
	if (sl->stage)
		tp__stage_give(cm, sl->stage);
	cm->win.retired++;
	return 0;
}
