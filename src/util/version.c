/* The library's version (include/tcpx_p2p_version.h, made by CMake). */
#include "tcpx_p2p.h"

const char *tcpx_p2p_version(void)
{
	return TCPX_P2P_VERSION_STRING;
}
