/* The session's completions and their file descriptor (api.h: no lock
 * held on entry; the queue and its fd are cq.c's). */
#include "core/api/api.h"
#include "core/cq.h"
#include "core/engine.h"
#include "core/pass.h"
#include "core/session.h"
#include "util/error.h"

int tcpx_p2p_session_fd(tcpx_p2p_session *s, int *fd)
{
	if (!s || !fd)
		return tp__error(TCPX_P2P_EINVAL, "session_fd: NULL argument");
	return tp__cq_fd(&s->cq, fd);
}

int tcpx_p2p_completions(tcpx_p2p_session *s, tcpx_p2p_completion *out, int max, int *n)
{
	struct tp_pass_result st;

	if (!s || !n || max < 0 || (max && !out))
		return tp__error(TCPX_P2P_EINVAL, "completions: NULL argument or max %d", max);
	/* Cleared first: what this call's own pass finds (a notification,
	 * which it does not take) signals the fd again (cq.c says why the
	 * order matters). */
	tp__cq_clear(&s->cq);
	/* Without a progress thread the caller's calls are what drive. */
	if (!tp__engine_threaded(s))
		tp__engine_pass(s, NULL, &st);
	*n = tp__cq_take(&s->cq, out, max);
	return 0;
}
