#include "tcpx_status.h"

#include <tcpx_p2p.h>

#include "common/nixl_log.h"

nixl_status_t tcpxStatusQuiet(int rc)
{
	switch (rc) {
	case TCPX_P2P_OK:
		return NIXL_SUCCESS;
	case TCPX_P2P_EINVAL:
		return NIXL_ERR_INVALID_PARAM;
	case TCPX_P2P_ENOTSUP:
		return NIXL_ERR_NOT_SUPPORTED;
	case TCPX_P2P_EPROTO: /* the peer differs: settings, version, token */
		return NIXL_ERR_MISMATCH;
	case TCPX_P2P_EBUSY:
		return NIXL_ERR_NOT_ALLOWED;
	case TCPX_P2P_ECLOSED: /* peer gone, or the connection failed before */
	case TCPX_P2P_EPEERRESTART: /* the peer is a new incarnation: the old is gone */
		return NIXL_ERR_REMOTE_DISCONNECT;
	case TCPX_P2P_EINTERNAL:
		return NIXL_ERR_UNKNOWN;
	case TCPX_P2P_ECANCELED: /* released while pending, or by the peer */
		return NIXL_ERR_CANCELED;
	default: /* ENOMEM, ENOPLUGIN, EPLUGIN, ENET, ETIMEDOUT, EAGAIN, ECUDA */
		return NIXL_ERR_BACKEND;
	}
}

nixl_status_t tcpxStatus(int rc, const char *what)
{
	/* A peer gone (or restarted) is the caller's NIXL_ERR_REMOTE_DISCONNECT
	 * (NIXL logs it as it sees fit), not an error of this backend. */
	if (rc == TCPX_P2P_ECLOSED || rc == TCPX_P2P_EPEERRESTART)
		NIXL_INFO << "TCPX: " << what << ": " << tcpx_p2p_strerror(rc) << " ("
			  << tcpx_p2p_last_error() << ")";
	else if (rc != TCPX_P2P_OK)
		NIXL_ERROR << "TCPX: " << what << ": " << tcpx_p2p_strerror(rc) << " ("
			   << tcpx_p2p_last_error() << ")";
	return tcpxStatusQuiet(rc);
}
