/* Registering and deregistering regions (api.h: no lock held on entry):
 * the caller's arguments checked here, the work done by core/mr.c, which
 * the library also registers its own buffers with.  Deregistering a region
 * that the peer's transfers hosted here may hold fails them on every conn
 * and drives their closes first. */
#include <stddef.h>
#include <stdint.h>

#include "core/api/api.h"
#include "core/engine.h"
#include "core/items/items.h"
#include "core/mr.h"
#include "core/session.h"
#include "util/error.h"

static int params_check(const tcpx_p2p_mr_params *p)
{
	if (!p)
		return 0;
	if (p->struct_size < offsetof(tcpx_p2p_mr_params, flags) + sizeof(p->flags))
		return tp__error(TCPX_P2P_EINVAL, "mr_register: params.struct_size %zu (set it "
				 "to sizeof(tcpx_p2p_mr_params))", p->struct_size);
	if (p->flags & ~(unsigned)TCPX_P2P_MR_PIN)
		return tp__error(TCPX_P2P_EINVAL, "mr_register: unknown flags 0x%x",
				 p->flags & ~(unsigned)TCPX_P2P_MR_PIN);
	return 0;
}

int tcpx_p2p_mr_register_ex(tcpx_p2p_session *s, void *ptr, size_t len, int mem_type,
			    const tcpx_p2p_mr_params *params, tcpx_p2p_mr **out)
{
	int rc;

	if (!s || !ptr || !len || !out)
		return tp__error(TCPX_P2P_EINVAL, "mr_register: NULL argument or zero length");
	rc = params_check(params);
	if (rc)
		return rc;
	if ((uintptr_t)ptr + len < (uintptr_t)ptr)
		return tp__error(TCPX_P2P_EINVAL, "mr_register: range wraps around");
	return tp__mr_register(s, ptr, len, mem_type, params ? params->flags : 0, out);
}

int tcpx_p2p_mr_register(tcpx_p2p_session *s, void *ptr, size_t len, int mem_type,
			 tcpx_p2p_mr **out)
{
	return tcpx_p2p_mr_register_ex(s, ptr, len, mem_type, NULL, out);
}

int tcpx_p2p_mr_deregister(tcpx_p2p_mr *mr)
{
	if (!mr)
		return tp__error(TCPX_P2P_EINVAL, "mr_deregister: NULL mr");
	return tp__mr_deregister(mr);
}

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
	rc = tp__mr_deregister(mr);
	if (rc == TCPX_P2P_EBUSY && f.holding)
		rc = tp__error(TCPX_P2P_EAGAIN, "mr_deregister_ex: %u connection(s) held it through "
			       "the peer's transfers (%u failed by this call): it is let go once "
			       "their peers answer the close, or they are destroyed; call again",
			       f.holding, f.failed);
	return rc;
}
