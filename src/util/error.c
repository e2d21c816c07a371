/* Error codes, their text and the thread-local last-error detail. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "util/error.h"

#define TP_ERROR_DETAIL 1024 /* room for the list of plugin files tried */

static _Thread_local char tp_last_error[TP_ERROR_DETAIL];

static const char *const tp_error_text[] = {
	[0] = "success",
	[-TCPX_P2P_EINVAL] = "invalid argument or configuration value",
	[-TCPX_P2P_ENOMEM] = "out of memory",
	[-TCPX_P2P_ENOTSUP] = "not supported by the plugin or this build",
	[-TCPX_P2P_ENOPLUGIN] = "no NCCL net plugin could be loaded",
	[-TCPX_P2P_EPLUGIN] = "the net plugin returned an error",
	[-TCPX_P2P_ENET] = "socket or system error",
	[-TCPX_P2P_ETIMEDOUT] = "timed out",
	[-TCPX_P2P_EAGAIN] = "not complete yet, try again",
	[-TCPX_P2P_ECUDA] = "CUDA error",
	[-TCPX_P2P_EPROTO] = "the peer broke the protocol (another version or layout, or past a bound)",
	[-TCPX_P2P_EBUSY] = "object busy: transfers or users remain",
	[-TCPX_P2P_ECLOSED] = "connection closed by the peer or failed earlier",
	[-TCPX_P2P_EINTERNAL] = "internal error in libtcpx_p2p (please report)",
	[-TCPX_P2P_ECANCELED] = "cancelled",
	[-TCPX_P2P_EPEERRESTART] = "the peer restarted",
};

#define TP_NERRORS ((int)(sizeof(tp_error_text) / sizeof(tp_error_text[0])))

const char *tcpx_p2p_strerror(int err)
{
	if (err > 0 || err <= -TP_NERRORS || !tp_error_text[-err])
		return "unknown error";
	return tp_error_text[-err];
}

const char *tcpx_p2p_last_error(void)
{
	return tp_last_error;
}

int tp__error(int code, const char *fmt, ...)
{
	char buf[TP_ERROR_DETAIL];
	va_list ap;

	/* Format aside first: callers may wrap the previous detail with
	 * "%s", tcpx_p2p_last_error(), and vsnprintf must not overlap. */
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	memcpy(tp_last_error, buf, sizeof(buf));
	return code;
}
