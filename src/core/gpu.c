/* The session's GPU, made current on the calling thread before a plugin or
 * CUDA call that picks its device with cudaGetDevice.  Here, not in
 * session.c, because every layer below the session calls it. */
#include "core/session.h"

/* Asks CUDA every time rather than caching per thread: the application may
 * switch the thread's device between our calls. */
int tp__session_use_gpu(struct tcpx_p2p_session *s)
{
	return s->cfg.gpu < 0 ? 0 : tp__dev_set(s->cfg.gpu);
}
