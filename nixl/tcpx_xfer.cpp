/* Transfers: a NIXL descriptor-list pair becomes a prepared list of the
 * library (local[i] <-> remote[i]) on this agent's connection to the
 * target, posted as one vectored one-sided WRITE or READ each time NIXL
 * posts the request; notifications ride on the same connection.  A
 * request to this agent's own memory is a list of copies. */
#include <algorithm>
#include <chrono>
#include <thread>

#include "common/nixl_log.h"
#include "tcpx_engine.h"
#include "tcpx_status.h"

namespace {

using steady = std::chrono::steady_clock;

nixl_status_t userMsg(const std::string &msg, std::string &out)
{
	/* The peer's config.notif_max_bytes (64 KiB by default) is the real
	 * bound: the library refuses a longer one when it is sent. */
	if (msg.size() + 1 > TCPX_P2P_NOTIF_LIMIT) {
		NIXL_ERROR << "TCPX: a notification of " << msg.size() << " bytes; at most "
			   << TCPX_P2P_NOTIF_LIMIT - 1 << " are carried";
		return NIXL_ERR_INVALID_PARAM;
	}
	out = tcpxEncodeMsg(tcpxMsg::user, msg.data(), msg.size());
	return NIXL_SUCCESS;
}

} // namespace

nixl_status_t nixlTcpxEngine::prepXfer(const nixl_xfer_op_t &operation,
				       const nixl_meta_dlist_t &local,
				       const nixl_meta_dlist_t &remote,
				       const std::string &remote_agent, nixlBackendReqH *&handle,
				       const nixl_opt_b_args_t *opt_args) const
{
	if (operation != NIXL_WRITE && operation != NIXL_READ) {
		NIXL_ERROR << "TCPX: only READ and WRITE transfers";
		return NIXL_ERR_NOT_SUPPORTED;
	}
	const int n = local.descCount();
	if (n != remote.descCount() || n == 0) {
		NIXL_ERROR << "TCPX: " << n << " local and " << remote.descCount()
			   << " remote descriptors; they pair one to one";
		return NIXL_ERR_INVALID_PARAM;
	}
	auto h = std::make_unique<tcpxReqH>();
	h->op = operation;
	nixl_status_t st;
	if (remote_agent == localAgent) {
		st = prepLocal(*h, local, remote);
		if (st != NIXL_SUCCESS)
			return st;
		std::lock_guard<std::mutex> g(reqs_mu_);
		reqs_.insert(h.get());
		handle = h.release();
		return NIXL_SUCCESS;
	}
	st = net_->outgoing(remote_agent, h->link);
	if (st != NIXL_SUCCESS)
		return st;
	std::vector<tcpx_p2p_seg> lsegs;
	std::vector<tcpx_p2p_rseg> rsegs;
	lsegs.reserve(n);
	rsegs.reserve(n);
	const tcpxRemoteMD *last_md = nullptr;
	uint64_t last_piece = 0;
	tcpx_p2p_rmr *last_rmr = nullptr;
	for (int i = 0; i < n; i++) {
		const auto &l = local[i];
		const auto &r = remote[i];
		const auto *lmd = dynamic_cast<const tcpxLocalMD *>(l.metadataP);
		const auto *rmd = dynamic_cast<const tcpxRemoteMD *>(r.metadataP);
		if (!lmd || !rmd || rmd->agent != remote_agent || l.len != r.len ||
		    lmd->mrs.size() != lmd->info.pieceCount() || l.addr < lmd->info.base ||
		    l.addr - lmd->info.base + l.len > lmd->info.len || r.addr < rmd->info.base ||
		    r.addr - rmd->info.base + r.len > rmd->info.len) {
			NIXL_ERROR << "TCPX: descriptor " << i << " (" << l.len << " -> " << r.len
				   << " bytes) lies outside its registrations or differs in length";
			return NIXL_ERR_INVALID_PARAM;
		}
		if (h->mds.empty() || h->mds.back() != lmd)
			h->mds.push_back(lmd);
		/* The two lists are packed independently (only their totals must
		 * match), so each is cut at its own pieces' ends. */
		for (uint64_t a = l.addr, end = l.addr + l.len; a < end;) {
			uint64_t k = lmd->info.pieceOf(a);
			uint64_t stop = std::min(end, lmd->info.pieceEnd(k));
			lsegs.push_back({lmd->mrs[k], a - lmd->info.pieceStart(k), stop - a});
			a = stop;
		}
		for (uint64_t a = r.addr, end = r.addr + r.len; a < end;) {
			uint64_t k = rmd->info.pieceOf(a);
			uint64_t stop = std::min(end, rmd->info.pieceEnd(k));
			if (rmd != last_md || k != last_piece || !last_rmr) {
				st = net_->import(h->link, rmd->info.id + k, last_rmr);
				if (st != NIXL_SUCCESS)
					return st;
				last_md = rmd;
				last_piece = k;
			}
			rsegs.push_back({last_rmr, a - rmd->info.pieceStart(k), stop - a});
			a = stop;
		}
		h->bytes += l.len;
	}
	std::sort(h->mds.begin(), h->mds.end());
	h->mds.erase(std::unique(h->mds.begin(), h->mds.end()), h->mds.end());
	/* Checked and encoded once here: each post of the request (NIXL's
	 * reposts included) does no per-descriptor work. */
	int rc;
	{
		std::shared_lock<std::shared_mutex> u(h->link->use);
		tcpx_p2p_conn *c = h->link->conn;
		if (!c)
			return NIXL_ERR_REMOTE_DISCONNECT;
		rc = tcpx_p2p_xlist_prepare(
		    c, operation == NIXL_WRITE ? TCPX_P2P_XLIST_WRITE : TCPX_P2P_XLIST_READ,
		    lsegs.data(), lsegs.size(), rsegs.data(), rsegs.size(), 0, &h->list);
	}
	if (rc)
		return tcpxStatus(rc, "preparing a transfer (xlist_prepare)");
	std::lock_guard<std::mutex> g(reqs_mu_);
	reqs_.insert(h.get());
	handle = h.release();
	return NIXL_SUCCESS;
}

/* An agent-local request: remote is this agent's own memory (loadLocalMD);
 * both must lie inside registrations of this engine. */
nixl_status_t nixlTcpxEngine::prepLocal(tcpxReqH &h, const nixl_meta_dlist_t &local,
					const nixl_meta_dlist_t &remote) const
{
	const int n = local.descCount();
	h.vram = local.getType() == VRAM_SEG || remote.getType() == VRAM_SEG;
	for (int i = 0; i < n; i++) {
		const auto &l = local[i];
		const auto &r = remote[i];
		const auto *lmd = dynamic_cast<const tcpxLocalMD *>(l.metadataP);
		const auto *rmd = dynamic_cast<const tcpxRemoteMD *>(r.metadataP);
		if (!lmd || !rmd || !rmd->local || l.len != r.len || l.addr < lmd->info.base ||
		    l.addr - lmd->info.base + l.len > lmd->info.len || r.addr < rmd->info.base ||
		    r.addr - rmd->info.base + r.len > rmd->info.len) {
			NIXL_ERROR << "TCPX: agent-local descriptor " << i << " (" << l.len << " -> "
				   << r.len << " bytes) lies outside its registrations or differs "
				   << "in length";
			return NIXL_ERR_INVALID_PARAM;
		}
		h.mds.push_back(lmd);
		h.mds.push_back(rmd->local);
		void *lp = reinterpret_cast<void *>(l.addr);
		void *rp = reinterpret_cast<void *>(r.addr);
		if (h.op == NIXL_WRITE)
			h.copies.push_back({rp, lp, l.len});
		else
			h.copies.push_back({lp, rp, l.len});
		h.bytes += l.len;
	}
	std::sort(h.mds.begin(), h.mds.end());
	h.mds.erase(std::unique(h.mds.begin(), h.mds.end()), h.mds.end());
	return NIXL_SUCCESS;
}

/* An agent-local post: the copies, then the notification to this agent;
 * complete when it returns. */
nixl_status_t nixlTcpxEngine::postLocal(tcpxReqH &h, const nixl_opt_b_args_t *opt_args) const
{
	for (const auto &c : h.copies) {
		int rc = tcpxCopy(c.dst, c.src, c.len, h.vram);
		if (rc) {
			NIXL_ERROR << "TCPX: agent-local copy of " << c.len << " bytes failed";
			return NIXL_ERR_BACKEND;
		}
	}
	if (opt_args && opt_args->hasNotif)
		net_->notifySelf(opt_args->notifMsg);
	return NIXL_SUCCESS;
}

nixl_status_t nixlTcpxEngine::postXfer(const nixl_xfer_op_t &operation,
				       const nixl_meta_dlist_t &local,
				       const nixl_meta_dlist_t &remote,
				       const std::string &remote_agent, nixlBackendReqH *&handle,
				       const nixl_opt_b_args_t *opt_args) const
{
	auto *h = static_cast<tcpxReqH *>(handle);
	std::unique_lock<std::mutex> g(reqs_mu_);
	if (h->dropped != NIXL_SUCCESS) {
		NIXL_ERROR << "TCPX: a request whose memory was deregistered is posted";
		return h->dropped;
	}
	if (h->posting) /* another thread's post of it waits for room */
		return NIXL_ERR_REPOST_ACTIVE;
	if (h->x) { /* a repost of a finished request */
		int done = 0;
		int rc = tcpx_p2p_test(h->x, &done);
		if (rc == TCPX_P2P_OK && !done)
			return NIXL_ERR_REPOST_ACTIVE;
		tcpx_p2p_xfer_release(h->x);
		h->x = nullptr;
	}
	if (!h->link)
		return postLocal(*h, opt_args);
	std::string msg;
	if (opt_args && opt_args->hasNotif) {
		nixl_status_t st = userMsg(opt_args->notifMsg, msg);
		if (st != NIXL_SUCCESS)
			return st;
	}
	if (!h->link->conn || h->link->error) {
		NIXL_INFO << "TCPX: connection to agent " << remote_agent
			  << " is gone; prepare the transfer again";
		return NIXL_ERR_REMOTE_DISCONNECT;
	}
	tcpx_p2p_xfer_params p = {};
	p.struct_size = sizeof(p);
	if (h->op == NIXL_WRITE && !msg.empty()) {
		p.notif = msg.data();
		p.notif_len = msg.size();
	}
	/* The library's EAGAIN: control bytes waiting for the peer are at
	 * their bound; the progress thread drains them, so post again soon
	 * (up to timeout_ms).  Without reqs_mu_ meanwhile: other threads'
	 * posts and checks of other requests go on, and a deregistration
	 * may drop this one (seen when the lock is back). */
	auto postOnce = [&] {
		std::shared_lock<std::shared_mutex> u(h->link->use);
		if (!h->link->conn) /* closed by another thread meanwhile */
			return static_cast<int>(TCPX_P2P_ECLOSED);
		return tcpx_p2p_xlist_post(h->list, &p, &h->x);
	};
	const auto deadline = steady::now() + std::chrono::milliseconds(params_.cfg.timeout_ms);
	int rc;
	while ((rc = postOnce()) == TCPX_P2P_EAGAIN && steady::now() <= deadline) {
		h->posting = true;
		g.unlock();
		std::this_thread::sleep_for(std::chrono::microseconds(50));
		g.lock();
		h->posting = false;
		if (h->dropped != NIXL_SUCCESS)
			return h->dropped;
	}
	if (h->op == NIXL_WRITE) {
		telemetry(nixl_telemetry_event_type_t::AGENT_TX_BYTES, h->bytes);
		telemetry(nixl_telemetry_event_type_t::AGENT_TX_REQUESTS_NUM, 1);
	} else {
		h->read_notif = std::move(msg);
		h->read_notif_due = !h->read_notif.empty();
		telemetry(nixl_telemetry_event_type_t::AGENT_RX_BYTES, h->bytes);
		telemetry(nixl_telemetry_event_type_t::AGENT_RX_REQUESTS_NUM, 1);
	}
	if (rc)
		return tcpxStatus(rc, h->op == NIXL_WRITE ? "write" : "read");
	return NIXL_IN_PROG;
}

nixl_status_t nixlTcpxEngine::checkXfer(nixlBackendReqH *handle) const
{
	auto *h = static_cast<tcpxReqH *>(handle);
	std::unique_lock<std::mutex> g(reqs_mu_);
	if (h->dropped != NIXL_SUCCESS)
		return h->dropped;
	if (!h->link)
		return NIXL_SUCCESS; /* agent-local: done at post */
	if (!h->x)
		return NIXL_ERR_NOT_POSTED;
	int done = 0;
	int rc = tcpx_p2p_test(h->x, &done);
	if (rc == TCPX_P2P_EINVAL) {
		/* A posted transfer ends EINVAL only when the target refused
		 * it: the region it names was deregistered there since the
		 * request was made (a target being torn down deregisters
		 * before it closes), so this agent's metadata of the target
		 * is stale.  UCX fails such an access as a broken endpoint;
		 * NIXL then drops the agent's metadata, to be loaded anew. */
		NIXL_INFO << "TCPX: agent " << h->link->agent << " refused a "
			  << (h->op == NIXL_WRITE ? "write" : "read") << " ("
			  << tcpx_p2p_last_error() << "): its metadata here is stale";
		return NIXL_ERR_REMOTE_DISCONNECT;
	}
	if (rc)
		return tcpxStatus(rc, h->op == NIXL_WRITE ? "write" : "read");
	if (!done) {
		/* Callers poll in a loop; the session's progress thread moves
		 * the bytes: leave it the CPU where cores are few. */
		g.unlock();
		std::this_thread::yield();
		return NIXL_IN_PROG;
	}
	if (h->read_notif_due) {
		/* The library carries notifications on WRITEs only; a READ's
		 * follows it once every byte is here (the target may then
		 * reuse what was read). */
		std::shared_lock<std::shared_mutex> u(h->link->use);
		tcpx_p2p_conn *c = h->link->conn;
		if (!c)
			return NIXL_ERR_REMOTE_DISCONNECT;
		rc = tcpx_p2p_notify(c, h->read_notif.data(), h->read_notif.size());
		if (rc == TCPX_P2P_EAGAIN)
			return NIXL_IN_PROG;
		if (rc)
			return tcpxStatus(rc, "notification after a read");
		h->read_notif_due = false;
	}
	return NIXL_SUCCESS;
}

/* reqs_mu_ held.  Ends h's latest transfer: cancelled first if asked (it
 * then ends with ECANCELED within the library's bound: chunks not yet
 * handed to the plugin are never posted), waited for up to timeout_ms and
 * freed; one still pending then is kept until the connections close. */
void nixlTcpxEngine::endPending(tcpxReqH *h, bool cancel) const
{
	if (!h->x)
		return;
	int done = 0;
	if (tcpx_p2p_test(h->x, &done) == TCPX_P2P_OK && !done) {
		if (cancel) {
			int rc = tcpx_p2p_xfer_cancel(h->x);
			if (rc)
				tcpxStatus(rc, "cancelling a transfer");
		}
		if (tcpx_p2p_wait(h->x, params_.cfg.timeout_ms) == TCPX_P2P_ETIMEDOUT) {
			NIXL_ERROR << "TCPX: a transfer still pending " << params_.cfg.timeout_ms
				   << " ms after it was cancelled; it is freed when its "
				   << "connection closes, and its memory is in use until then";
			orphans_.push_back(h->x);
			h->x = nullptr;
			return;
		}
	}
	tcpx_p2p_xfer_release(h->x);
	h->x = nullptr;
}

nixl_status_t nixlTcpxEngine::releaseReqH(nixlBackendReqH *handle) const
{
	auto *h = static_cast<tcpxReqH *>(handle);
	{
		/* A pending transfer is cancelled, not waited for: NIXL's release
		 * of a request is how an aborted request drops its transfer (the
		 * peer is told; a cancelled WRITE's notification never comes). */
		std::lock_guard<std::mutex> g(reqs_mu_);
		/* Another thread's post of it waits for room without the lock
		 * and uses h when it wakes: release it once that post returned. */
		if (h->posting)
			return NIXL_ERR_REPOST_ACTIVE;
		reqs_.erase(h);
		endPending(h, true);
		if (h->list) {
			int rc = tcpx_p2p_xlist_release(h->list);
			if (rc)
				tcpxStatus(rc, "xlist_release");
		}
	}
	delete h;
	return NIXL_SUCCESS;
}

nixl_status_t nixlTcpxEngine::genNotif(const std::string &remote_agent,
				       const std::string &msg) const
{
	std::string m;
	nixl_status_t st = userMsg(msg, m);
	if (st != NIXL_SUCCESS)
		return st;
	if (remote_agent == localAgent) {
		net_->notifySelf(msg);
		return NIXL_SUCCESS;
	}
	tcpxLinkPtr link;
	st = net_->anyLink(remote_agent, link);
	if (st != NIXL_SUCCESS)
		return st;
	return tcpxStatus(net_->notify(link, m), "notify");
}

nixl_status_t nixlTcpxEngine::getNotifs(notif_list_t &notif_list)
{
	if (!notif_list.empty())
		return NIXL_ERR_INVALID_PARAM;
	net_->takeNotifs(notif_list);
	return NIXL_SUCCESS;
}
