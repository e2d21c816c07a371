/* NIXL plugin entry points (plugin API v1): backend "TCPX". */
#include <tcpx_p2p.h>

#include "backend/backend_plugin.h"
#include "tcpx_engine.h"

using tcpx_plugin_t = nixlBackendPluginCreator<nixlTcpxEngine>;

extern "C" NIXL_PLUGIN_EXPORT nixlBackendPlugin *nixl_plugin_init()
{
	return tcpx_plugin_t::create(NIXL_PLUGIN_API_VERSION, "TCPX", tcpx_p2p_version(),
				     tcpxParamDefaults(), {DRAM_SEG, VRAM_SEG});
}

extern "C" NIXL_PLUGIN_EXPORT void nixl_plugin_fini()
{
}
