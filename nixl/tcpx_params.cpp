#include "tcpx_params.h"

#include <cerrno>
#include <climits>
#include <cstdlib>

#include "common/nixl_log.h"

namespace {

bool parseLong(const std::string &v, long lo, long hi, long &out)
{
	char *end = nullptr;
	errno = 0;
	long x = strtol(v.c_str(), &end, 0);
	if (v.empty() || errno != 0 || *end != '\0' || x < lo || x > hi)
		return false;
	out = x;
	return true;
}

bool setGpu(tcpxParams &p, const std::string &v)
{
	long x;
	if (v == "auto") {
		/* TCPX_P2P_GPU wins; else the caller's current device, if any */
		if (p.cfg.gpu < 0)
			p.cfg.gpu = tcpxCurrentGpu();
		return true;
	}
	if (!parseLong(v, -1, INT_MAX, x))
		return false;
	p.cfg.gpu = static_cast<int>(x);
	return true;
}

bool setInt(int &field, const std::string &v, long lo, long hi)
{
	long x;
	if (!parseLong(v, lo, hi, x))
		return false;
	field = static_cast<int>(x);
	return true;
}

struct tcpxParam {
	const char *name;
	const char *def; /* "" = the library's default (or TCPX_P2P_* variable) */
	const char *help;
	bool (*apply)(tcpxParams &p, const std::string &v);
};

/* Out-of-range numbers are left to session_create, which names the field. */
const tcpxParam params_table[] = {
	{"gpu", "auto", "CUDA device of the session (VRAM); -1 = host memory only; auto = "
	 "TCPX_P2P_GPU, else the current device",
	 setGpu},
	{"num_channels", "", "channels per connection (both agents alike)",
	 [](tcpxParams &p, const std::string &v) {
		 return setInt(p.cfg.num_channels, v, 1, INT_MAX);
	 }},
	{"chunk_bytes", "", "bytes per plugin request (both agents alike)",
	 [](tcpxParams &p, const std::string &v) {
		 long x;
		 if (!parseLong(v, 1, LONG_MAX, x))
			 return false;
		 p.cfg.chunk_bytes = static_cast<size_t>(x);
		 return true;
	 }},
	{"nics", "", "devices the channels are striped over: auto, all, or eth1,eth2",
	 [](tcpxParams &p, const std::string &v) {
		 p.nics = v;
		 return true;
	 }},
	{"net_dev", "", "one plugin device for every channel (-1 = nics decides)",
	 [](tcpxParams &p, const std::string &v) { return setInt(p.cfg.net_dev, v, -1, INT_MAX); }},
	{"plugin_path", "", "NCCL net plugin file (empty = the library's search)",
	 [](tcpxParams &p, const std::string &v) {
		 p.plugin_path = v;
		 return true;
	 }},
	{"timeout_ms", "", "set-up deadline: dial, waiting for a peer's exports, a release",
	 [](tcpxParams &p, const std::string &v) {
		 return setInt(p.cfg.timeout_ms, v, 1, INT_MAX);
	 }},
	{"export_wait_ms", "200", "how long a transfer's set-up waits for a region the peer has "
	 "not exported (stale metadata) once the peer's initial exports arrived",
	 [](tcpxParams &p, const std::string &v) {
		 return setInt(p.export_wait_ms, v, 0, INT_MAX);
	 }},
	{"auth_token", "", "shared secret both agents must hold (MAC on the listener blobs)",
	 [](tcpxParams &p, const std::string &v) {
		 p.auth_token = v;
		 return true;
	 }},
	{"ip_addr", "", "address advertised to peers (empty = first non-loopback IPv4, "
	 "else 127.0.0.1)",
	 [](tcpxParams &p, const std::string &v) {
		 p.ip_addr = v;
		 return true;
	 }},
	{"bind_addr", "", "IPv4 address the connection set-up socket binds (empty = all)",
	 [](tcpxParams &p, const std::string &v) {
		 p.bind_addr = v;
		 return true;
	 }},
	{"port", "0", "connection set-up socket port (0 = any free port)",
	 [](tcpxParams &p, const std::string &v) {
		 long x;
		 if (!parseLong(v, 0, 65535, x))
			 return false;
		 p.port = static_cast<uint16_t>(x);
		 return true;
	 }},
	{"pin_host", "1", "1: page-lock DRAM registrations for the GPU (TCPX_P2P_MR_PIN)",
	 [](tcpxParams &p, const std::string &v) {
		 if (v != "0" && v != "1")
			 return false;
		 p.pin_host = v == "1";
		 return true;
	 }},
};

const tcpxParam *findParam(const std::string &name)
{
	for (const auto &e : params_table)
		if (name == e.name)
			return &e;
	return nullptr;
}

/* Parameters of NIXL 1.4's UCX backend (the one callers and NIXL's tests
 * configure alongside). */
bool otherBackendParam(const std::string &k)
{
	static const char *const ucx[] = {"engine_config", "num_workers", "num_threads",
					  "split_batch_size", "ucx_error_handling_mode",
					  "ucx_devices", "device_list"};
	for (const char *u : ucx)
		if (k == u)
			return true;
	return false;
}

} // namespace

nixl_b_params_t tcpxParamDefaults()
{
	nixl_b_params_t out;
	for (const auto &e : params_table)
		out[e.name] = e.def;
	return out;
}

nixl_status_t tcpxParamsParse(const nixl_b_params_t &params, tcpxParams &p)
{
	int rc = tcpx_p2p_config_init(&p.cfg);
	if (rc != TCPX_P2P_OK) {
		NIXL_ERROR << "TCPX: environment: " << tcpx_p2p_last_error();
		return NIXL_ERR_INVALID_PARAM;
	}
	/* Defaults first (so that gpu=auto applies when not given), then the
	 * caller's values; an empty value keeps the library's setting. */
	nixl_b_params_t all = tcpxParamDefaults();
	for (const auto &[k, v] : params)
		all[k] = v;
	for (const auto &[k, v] : all) {
		const tcpxParam *e = findParam(k);
		if (!e) {
			/* Callers (NIXL's own tests among them) hand one parameter
			 * set to every backend: another backend's key is ignored,
			 * quietly when it is one of NIXL's other backends'. */
			if (otherBackendParam(k))
				NIXL_INFO << "TCPX: backend parameter '" << k << "' is another "
					  << "backend's; ignored";
			else
				NIXL_WARN << "TCPX: unknown backend parameter '" << k << "' ignored";
			continue;
		}
		if (v.empty())
			continue;
		if (!e->apply(p, v)) {
			NIXL_ERROR << "TCPX: backend parameter " << k << "='" << v
				   << "' is not valid (" << e->help << ")";
			return NIXL_ERR_INVALID_PARAM;
		}
	}
	if (!p.nics.empty())
		p.cfg.nics = p.nics.c_str();
	if (!p.plugin_path.empty())
		p.cfg.plugin_path = p.plugin_path.c_str();
	if (!p.auth_token.empty())
		p.cfg.auth_token = p.auth_token.c_str();
	/* Targets post nothing: their session must move data on its own. */
	p.cfg.progress_thread = 1;
	return NIXL_SUCCESS;
}
