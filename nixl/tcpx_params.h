/* NIXL backend parameters (nixl_b_params_t) -> the library's settings.
 * One table (tcpx_params.cpp) feeds both the defaults NIXL lists for the
 * plugin (get_backend_options) and the parsing at engine creation. */
#ifndef TCPX_NIXL_PARAMS_H
#define TCPX_NIXL_PARAMS_H

#include <cstdint>
#include <string>

#include <tcpx_p2p.h>

#include "nixl_types.h"

struct tcpxParams {
	tcpx_p2p_config cfg;    /* defaults, TCPX_P2P_* environment, then params */
	std::string nics;       /* storage for cfg.nics and the other strings */
	std::string plugin_path;
	std::string auth_token;
	std::string ip_addr;    /* advertised in the connection info; "" = probe */
	std::string bind_addr;  /* the set-up socket's; "" = all addresses */
	uint16_t port = 0;      /* the set-up socket's; 0 = any free port */
	bool pin_host = true;   /* TCPX_P2P_MR_PIN on DRAM registrations */
	int export_wait_ms = 200; /* a region not exported once the peer synced */
};

/* Every parameter with its default, as NIXL's getPluginParams shows them. */
nixl_b_params_t tcpxParamDefaults();

/* Fills p from the environment and params; a bad value is logged and
 * gives NIXL_ERR_INVALID_PARAM, an unknown name is a warning. */
nixl_status_t tcpxParamsParse(const nixl_b_params_t &params, tcpxParams &p);

/* The CUDA device current on the calling thread, or -1 without a usable
 * GPU (tcpx_gpu_cuda.cpp / tcpx_gpu_none.cpp). */
int tcpxCurrentGpu();

/* An agent-local copy (memcpy; cudaMemcpy where vram): 0 or -1. */
int tcpxCopy(void *dst, const void *src, size_t len, bool vram);

#endif
