/* The backend's table of library errors to NIXL statuses (tcpx_status.cpp),
 * every code of the library's API: a peer gone or restarted is the
 * caller's NIXL_ERR_REMOTE_DISCONNECT (NIXL then drops its metadata), the
 * peer's differing settings a mismatch, a cancel a cancel.
 * Exit 0 pass, 1 fail. */
#include <cstdio>

#include <tcpx_p2p.h>

#include "tcpx_status.h"

int main()
{
	const struct {
		int rc;
		nixl_status_t want;
	} table[] = {
		{TCPX_P2P_OK, NIXL_SUCCESS},
		{TCPX_P2P_EINVAL, NIXL_ERR_INVALID_PARAM},
		{TCPX_P2P_ENOMEM, NIXL_ERR_BACKEND},
		{TCPX_P2P_ENOTSUP, NIXL_ERR_NOT_SUPPORTED},
		{TCPX_P2P_ENOPLUGIN, NIXL_ERR_BACKEND},
		{TCPX_P2P_EPLUGIN, NIXL_ERR_BACKEND},
		{TCPX_P2P_ENET, NIXL_ERR_BACKEND},
		{TCPX_P2P_ETIMEDOUT, NIXL_ERR_BACKEND},
		{TCPX_P2P_EAGAIN, NIXL_ERR_BACKEND},
		{TCPX_P2P_ECUDA, NIXL_ERR_BACKEND},
		{TCPX_P2P_EPROTO, NIXL_ERR_MISMATCH},
		{TCPX_P2P_EBUSY, NIXL_ERR_NOT_ALLOWED},
		{TCPX_P2P_ECLOSED, NIXL_ERR_REMOTE_DISCONNECT},
		{TCPX_P2P_EINTERNAL, NIXL_ERR_UNKNOWN},
		{TCPX_P2P_ECANCELED, NIXL_ERR_CANCELED},
		{TCPX_P2P_EPEERRESTART, NIXL_ERR_REMOTE_DISCONNECT},
	};
	int failures = 0;
	for (const auto &e : table) {
		nixl_status_t quiet = tcpxStatusQuiet(e.rc);
		nixl_status_t logged = tcpxStatus(e.rc, "test");
		if (quiet != e.want || logged != e.want) {
			fprintf(stderr, "FAIL: %s (%d) -> %d and %d, want %d\n", tcpx_p2p_strerror(e.rc),
				e.rc, quiet, logged, e.want);
			failures++;
		}
	}
	printf("%s\n", failures ? "FAILED" : "passed");
	return failures ? 1 : 0;
}
