/* Engine set-up, memory and metadata; transfers are in tcpx_xfer.cpp. */
#include "tcpx_engine.h"

#include <algorithm>

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
	if (!net_)
		return;
	/* Connections first (transfers still pending on them end), then what
	 * NIXL never released, then registrations a transfer kept busy, then
	 * the session: teardown in any order leaves nothing behind. */
	net_->closeAll();
	std::lock_guard<std::mutex> g(reqs_mu_);
	for (auto *h : reqs_) {
		endPending(h, true);
		if (h->list)
			tcpx_p2p_xlist_release(h->list);
		h->list = nullptr;
		h->dropped = NIXL_ERR_BACKEND;
	}
	reqs_.clear();
	for (auto *x : orphans_) {
		int rc = tcpx_p2p_xfer_release(x);
		if (rc)
			tcpxStatus(rc, "releasing an abandoned transfer");
	}
	orphans_.clear();
	net_.reset();
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

/* Requests naming md lose their prepared lists (which hold its regions),
 * and their pending transfers are cancelled and ended: after a
 * deregistration nothing of this agent touches the memory.  Returns how
 * many transfers were pending. */
size_t nixlTcpxEngine::dropRequestsOn(const tcpxLocalMD *md)
{
	size_t pending = 0;
	std::lock_guard<std::mutex> g(reqs_mu_);
	for (auto *h : reqs_) {
		if (!std::binary_search(h->mds.begin(), h->mds.end(), md))
			continue;
		int done = 1;
		if (h->x && tcpx_p2p_test(h->x, &done) == TCPX_P2P_OK && !done)
			pending++;
		endPending(h, true);
		if (h->list) {
			int rc = tcpx_p2p_xlist_release(h->list);
			if (rc)
				tcpxStatus(rc, "xlist_release");
			h->list = nullptr;
		}
		h->dropped = NIXL_ERR_CANCELED;
	}
	return pending;
}

/* Always completes (NIXL 1.4 ignores a failure here and frees the
 * registration's bookkeeping anyway): transfers of this agent that use the
 * memory are cancelled (logged at ERROR: the caller freed memory a
 * transfer was using; the transfer reports NIXL_ERR_CANCELED), and pieces
 * a peer's transfer still holds (a WRITE into this target in flight) are
 * deregistered as soon as it ends or its connection closes. */
nixl_status_t nixlTcpxEngine::deregisterMem(nixlBackendMD *meta)
{
	auto *md = dynamic_cast<tcpxLocalMD *>(meta);
	if (!md) {
		NIXL_ERROR << "TCPX: deregisterMem of metadata that is not a local registration";
		return NIXL_ERR_INVALID_PARAM;
	}
	for (uint64_t k = 0; k < md->info.pieceCount(); k++)
		net_->removeRegion(md->info.id + k);
	size_t pending = dropRequestsOn(md);
	if (pending)
		NIXL_ERROR << "TCPX: memory deregistered while " << pending << " transfer(s) of "
			   << "this agent used it: they are cancelled (NIXL_ERR_CANCELED); "
			   << "wait for transfers, or release them, before deregistering";
	int rc = deregisterPieces(*md);
	if (rc == TCPX_P2P_EBUSY) {
		NIXL_INFO << "TCPX: a peer's transfer still uses memory being deregistered ("
			  << md->mrs.size() << " piece(s)); it is released when that transfer "
			  << "ends or its connection closes";
		for (auto *mr : md->mrs)
			net_->retire(mr);
		md->mrs.clear();
	} else if (rc) {
		tcpxStatus(rc, "mr_deregister");
	}
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
	if (!net_->knowsRemote(remote_agent)) {
		/* checkRemoteMD would call such a peer's memory valid: refuse it
		 * here, not at the first transfer (at INFO: the caller's status
		 * says it, and NIXL logs that) */
		NIXL_INFO << "TCPX: metadata of a region of agent " << remote_agent
			  << ", whose connection info was never loaded";
		return NIXL_ERR_NOT_FOUND;
	}
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

nixl_status_t nixlTcpxEngine::loadLocalMD(nixlBackendMD *input, nixlBackendMD *&output)
{
	const auto *lmd = dynamic_cast<const tcpxLocalMD *>(input);
	if (!lmd)
		return NIXL_ERR_INVALID_PARAM;
	auto md = std::make_unique<tcpxRemoteMD>();
	md->agent = localAgent;
	md->info = lmd->info;
	md->local = lmd;
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
	if (remote_agent == localAgent)
		return NIXL_SUCCESS; /* agent-local transfers are copies */
	tcpxLinkPtr link;
	return net_->outgoing(remote_agent, link, true);
}

nixl_status_t nixlTcpxEngine::disconnect(const std::string &remote_agent)
{
	net_->disconnect(remote_agent);
	return NIXL_SUCCESS;
}
