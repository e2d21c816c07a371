/* Deregistering a region that the peer's transfers hosted here may hold
 * (api.h: no lock held on entry): it fails them on every conn, drives
 * their closes, then deregisters (mr.c; registration and plain
 * deregistration stay there: the library registers its own buffers too). */
#include "core/api/api.h"
#include "core/engine.h"
#include "core/items/items.h"
#include "core/mr.h"
#include "core/session.h"
#include "util/error.h"

int tcpx_p2p_mr_deregister_ex(tcpx_p2p_mr *mr, unsigned flags)
{
	struct tp_hosted_fail f = { .mr = mr };
	int rc;

	if (!mr)
		return tp__error(TCPX_P2P_EINVAL, "mr_deregister_ex: NULL mr");
	if (flags & ~TCPX_P2P_DEREG_FAIL_INCOMING)
		return tp__error(TCPX_P2P_EINVAL, "mr_deregister_ex: unknown flags 0x%x", flags);
	if (flags & TCPX_P2P_DEREG_FAIL_INCOMING) {
		/* The conns' locks come before the session's: none is held here. */
		tp__engine_each(mr->s, tp__items_hosted_fail, &f);
		tp__engine_notify(mr->s, f.completed);
		if (f.failed)
			tp__engine_kick(mr->s); /* their CLOSEs go out */
	}
	rc = tcpx_p2p_mr_deregister(mr);
	if (rc == TCPX_P2P_EBUSY && f.holding)
		rc = tp__error(TCPX_P2P_EAGAIN, "mr_deregister_ex: %u connection(s) held it through "
			       "the peer's transfers (%u failed by this call): it is let go once "
			       "their peers answer the close, or they are destroyed; call again",
			       f.holding, f.failed);
	return rc;
}
