/* Engine set-up, memory and metadata; transfers are in tcpx_xfer.cpp. */
#include "tcpx_engine.h"

#include "common/nixl_log.h"
#include "tcpx_status.h"

nixlTcpxEngine::nixlTcpxEngine(const nixlBackendInitParams *init_params)
    : nixlBackendEngine(init_params)
{
	if (tcpxParamsParse(getCustomParams(), params_) != NIXL_SUCCESS) {
		initErr = true;
		return;
	}
	net_ = std::make_unique<tcpxNet>(localAgent, params_);
	if (net_->start() != NIXL_SUCCESS)
		initErr = true;
}

nixlTcpxEngine::~nixlTcpxEngine()
{
	net_.reset(); /* closes every connection: pending transfers end */
	std::lock_guard<std::mutex> g(orphans_mu_);
	for (auto *x : orphans_) {
		int rc = tcpx_p2p_xfer_release(x);
		if (rc)
			tcpxStatus(rc, "releasing an abandoned transfer");
	}
}

nixl_mem_list_t nixlTcpxEngine::getSupportedMems() const
{
	return {DRAM_SEG, VRAM_SEG};
}

void nixlTcpxEngine::telemetry(nixl_telemetry_event_type_t type, uint64_t value) const
{
	/* addTelemetryEvent locks its own queue; only the const-ness differs */
	const_cast<nixlTcpxEngine *>(this)->addTelemetryEvent(type, value);
}

nixl_status_t nixlTcpxEngine::registerMem(const nixlBlobDesc &mem, const nixl_mem_t &nixl_mem,
					  nixlBackendMD *&out)
{
	int mem_type;
	if (nixl_mem == DRAM_SEG) {
		mem_type = TCPX_P2P_MEM_HOST;
	} else if (nixl_mem == VRAM_SEG) {
		mem_type = TCPX_P2P_MEM_CUDA;
		if (static_cast<int64_t>(mem.devId) != params_.cfg.gpu) {
			NIXL_ERROR << "TCPX: VRAM of GPU " << mem.devId << " registered on an agent "
				   << "whose session is on GPU " << params_.cfg.gpu
				   << " (backend parameter gpu)";
			return NIXL_ERR_NOT_SUPPORTED;
		}
	} else {
		NIXL_ERROR << "TCPX: memory type " << nixlEnumStrings::memTypeStr(nixl_mem)
			   << " is not supported";
		return NIXL_ERR_NOT_SUPPORTED;
	}
	auto md = std::make_unique<tcpxLocalMD>();
	md->info.base = mem.addr;
	md->info.len = mem.len;
	md->info.piece = tcpx_piece_bytes;
	md->info.mem_type = mem_type;
	if (mem.len == 0) {
		NIXL_ERROR << "TCPX: a registration of 0 bytes";
		return NIXL_ERR_INVALID_PARAM;
	}
	int rc = registerPieces(*md);
	if (rc)
		return tcpxStatus(rc, "mr_register");
	md->info.id = next_region_.fetch_add(md->info.pieceCount());
	for (uint64_t k = 0; k < md->mrs.size(); k++)
		net_->addRegion({md->info.id + k, md->mrs[k],
				 md->info.pieceEnd(k) - md->info.pieceStart(k)});
	telemetry(nixl_telemetry_event_type_t::AGENT_MEMORY_REGISTERED, mem.len);
	out = md.release();
	return NIXL_SUCCESS;
}

/* All pieces or none. */
int nixlTcpxEngine::registerPieces(tcpxLocalMD &md)
{
	const tcpxRegionInfo &r = md.info;
	for (uint64_t k = 0; k < r.pieceCount(); k++) {
		void *ptr = reinterpret_cast<void *>(r.pieceStart(k));
		size_t len = r.pieceEnd(k) - r.pieceStart(k);
		tcpx_p2p_mr *mr = nullptr;
		int rc;
		if (r.mem_type == TCPX_P2P_MEM_HOST && params_.pin_host) {
			tcpx_p2p_mr_params mp = {sizeof(mp), TCPX_P2P_MR_PIN};
			rc = tcpx_p2p_mr_register_ex(net_->session(), ptr, len, r.mem_type, &mp, &mr);
		} else {
			rc = tcpx_p2p_mr_register(net_->session(), ptr, len, r.mem_type, &mr);
		}
		if (rc) {
			std::string detail = tcpx_p2p_last_error();
			deregisterPieces(md);
			NIXL_ERROR << "TCPX: registering piece " << k << " of " << r.pieceCount()
				   << " (" << len << " bytes) failed: " << detail;
			return rc;
		}
		md.mrs.push_back(mr);
	}
	return TCPX_P2P_OK;
}

/* Deregisters from the last piece down; pieces still in use (EBUSY) stay
 * in md.mrs.  Returns the first error. */
int nixlTcpxEngine::deregisterPieces(tcpxLocalMD &md)
{
	int first = TCPX_P2P_OK;
	std::vector<tcpx_p2p_mr *> kept;
	while (!md.mrs.empty()) {
		tcpx_p2p_mr *mr = md.mrs.back();
		md.mrs.pop_back();
		int rc = tcpx_p2p_mr_deregister(mr);
		if (rc) {
			if (!first)
				first = rc;
			kept.insert(kept.begin(), mr);
		}
	}
	md.mrs = std::move(kept);
	return first;
}

nixl_status_t nixlTcpxEngine::deregisterMem(nixlBackendMD *meta)
{
	auto *md = dynamic_cast<tcpxLocalMD *>(meta);
	if (!md) {
		NIXL_ERROR << "TCPX: deregisterMem of metadata that is not a local registration";
		return NIXL_ERR_INVALID_PARAM;
	}
	for (uint64_t k = 0; k < md->info.pieceCount(); k++)
		net_->removeRegion(md->info.id + k);
	int rc = deregisterPieces(*md);
	if (rc)
		return tcpxStatus(rc, "mr_deregister (a transfer still uses the region?)");
	telemetry(nixl_telemetry_event_type_t::AGENT_MEMORY_DEREGISTERED, md->info.len);
	delete md;
	return NIXL_SUCCESS;
}

nixl_status_t nixlTcpxEngine::getPublicData(const nixlBackendMD *meta, std::string &str) const
{
	const auto *md = dynamic_cast<const tcpxLocalMD *>(meta);
	if (!md)
		return NIXL_ERR_INVALID_PARAM;
	str = tcpxEncodeRegion(md->info);
	return NIXL_SUCCESS;
}

nixl_status_t nixlTcpxEngine::loadRemoteMD(const nixlBlobDesc &input, const nixl_mem_t &nixl_mem,
					   const std::string &remote_agent,
					   nixlBackendMD *&output)
{
	tcpxRegionInfo info;
	if (!tcpxDecodeRegion(input.metaInfo, info)) {
		NIXL_ERROR << "TCPX: metadata of a region of agent " << remote_agent
			   << " is not ours (" << input.metaInfo.size() << " bytes)";
		return NIXL_ERR_INVALID_PARAM;
	}
	const int want = nixl_mem == VRAM_SEG ? TCPX_P2P_MEM_CUDA : TCPX_P2P_MEM_HOST;
	if ((nixl_mem != DRAM_SEG && nixl_mem != VRAM_SEG) || info.mem_type != want ||
	    input.addr < info.base || input.len > info.len ||
	    input.addr - info.base > info.len - input.len) {
		NIXL_ERROR << "TCPX: metadata of agent " << remote_agent
			   << " does not match its descriptor (address, length or memory type)";
		return NIXL_ERR_INVALID_PARAM;
	}
	auto md = std::make_unique<tcpxRemoteMD>();
	md->agent = remote_agent;
	md->info = info;
	output = md.release();
	return NIXL_SUCCESS;
}

nixl_status_t nixlTcpxEngine::unloadMD(nixlBackendMD *input)
{
	auto *md = dynamic_cast<tcpxRemoteMD *>(input);
	if (!md)
		return NIXL_ERR_INVALID_PARAM;
	delete md;
	return NIXL_SUCCESS;
}

nixl_status_t nixlTcpxEngine::getConnInfo(std::string &str) const
{
	str = net_->connInfo();
	return NIXL_SUCCESS;
}

nixl_status_t nixlTcpxEngine::loadRemoteConnInfo(const std::string &remote_agent,
						 const std::string &remote_conn_info)
{
	return net_->addRemote(remote_agent, remote_conn_info);
}

nixl_status_t nixlTcpxEngine::connect(const std::string &remote_agent)
{
	tcpxLinkPtr link;
	return net_->outgoing(remote_agent, link, true);
}

nixl_status_t nixlTcpxEngine::disconnect(const std::string &remote_agent)
{
	net_->disconnect(remote_agent);
	return NIXL_SUCCESS;
}
