/* Transfers: a NIXL descriptor-list pair becomes one vectored one-sided
 * WRITE or READ of the library (local[i] <-> remote[i]), on this agent's
 * connection to the target; notifications ride on the same connection. */
#include <algorithm>
#include <chrono>
#include <thread>

#include "common/nixl_log.h"
#include "tcpx_engine.h"
#include "tcpx_status.h"

namespace {

struct tcpxReqH : public nixlBackendReqH {
	tcpxLinkPtr link;
	nixl_xfer_op_t op = NIXL_WRITE;
	std::vector<tcpx_p2p_seg> local;
	std::vector<tcpx_p2p_rseg> remote;
	size_t bytes = 0;
	tcpx_p2p_xfer *x = nullptr;
	std::string read_notif; /* a READ's, sent once the data is here */
	bool read_notif_due = false;
};

using steady = std::chrono::steady_clock;

/* The library's EAGAIN on a post: control bytes waiting for the peer are
 * at their bound; the progress thread drains them, so post again soon. */
template <typename Post> int postRetrying(int timeout_ms, Post post)
{
	auto deadline = steady::now() + std::chrono::milliseconds(timeout_ms);
	for (;;) {
		int rc = post();
		if (rc != TCPX_P2P_EAGAIN || steady::now() > deadline)
			return rc;
		std::this_thread::sleep_for(std::chrono::microseconds(50));
	}
}

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
	nixl_status_t st = net_->outgoing(remote_agent, h->link);
	if (st != NIXL_SUCCESS)
		return st;
	h->local.reserve(n);
	h->remote.reserve(n);
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
		/* The two lists are packed independently (only their totals must
		 * match), so each is cut at its own pieces' ends. */
		for (uint64_t a = l.addr, end = l.addr + l.len; a < end;) {
			uint64_t k = lmd->info.pieceOf(a);
			uint64_t stop = std::min(end, lmd->info.pieceEnd(k));
			h->local.push_back({lmd->mrs[k], a - lmd->info.pieceStart(k), stop - a});
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
			h->remote.push_back({last_rmr, a - rmd->info.pieceStart(k), stop - a});
			a = stop;
		}
		h->bytes += l.len;
	}
	handle = h.release();
	return NIXL_SUCCESS;
}

nixl_status_t nixlTcpxEngine::postXfer(const nixl_xfer_op_t &operation,
				       const nixl_meta_dlist_t &local,
				       const nixl_meta_dlist_t &remote,
				       const std::string &remote_agent, nixlBackendReqH *&handle,
				       const nixl_opt_b_args_t *opt_args) const
{
	auto *h = static_cast<tcpxReqH *>(handle);
	if (h->x) { /* a repost of a finished request */
		int done = 0;
		int rc = tcpx_p2p_test(h->x, &done);
		if (rc == TCPX_P2P_OK && !done)
			return NIXL_ERR_REPOST_ACTIVE;
		tcpx_p2p_xfer_release(h->x);
		h->x = nullptr;
	}
	std::string msg;
	if (opt_args && opt_args->hasNotif) {
		nixl_status_t st = userMsg(opt_args->notifMsg, msg);
		if (st != NIXL_SUCCESS)
			return st;
	}
	tcpx_p2p_conn *c = h->link->conn;
	if (!c || h->link->error) {
		NIXL_ERROR << "TCPX: connection to agent " << remote_agent
			   << " is gone; prepare the transfer again";
		return NIXL_ERR_REMOTE_DISCONNECT;
	}
	const size_t nl = h->local.size(), nr = h->remote.size(); /* cut apart */
	int rc;
	if (h->op == NIXL_WRITE) {
		tcpx_p2p_xfer_params p = {};
		p.struct_size = sizeof(p);
		if (!msg.empty()) {
			p.notif = msg.data();
			p.notif_len = msg.size();
		}
		rc = postRetrying(params_.cfg.timeout_ms, [&] {
			return tcpx_p2p_write(c, h->local.data(), nl, h->remote.data(), nr, &p, &h->x);
		});
		telemetry(nixl_telemetry_event_type_t::AGENT_TX_BYTES, h->bytes);
		telemetry(nixl_telemetry_event_type_t::AGENT_TX_REQUESTS_NUM, 1);
	} else {
		rc = postRetrying(params_.cfg.timeout_ms, [&] {
			return tcpx_p2p_read(c, h->local.data(), nl, h->remote.data(), nr, nullptr,
					     &h->x);
		});
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
	if (!h->x)
		return NIXL_ERR_NOT_POSTED;
	int done = 0;
	int rc = tcpx_p2p_test(h->x, &done);
	if (rc)
		return tcpxStatus(rc, h->op == NIXL_WRITE ? "write" : "read");
	if (!done) {
		/* Callers poll in a loop; the session's progress thread moves
		 * the bytes: leave it the CPU where cores are few. */
		std::this_thread::yield();
		return NIXL_IN_PROG;
	}
	if (h->read_notif_due) {
		/* The library carries notifications on WRITEs only; a READ's
		 * follows it once every byte is here (the target may then
		 * reuse what was read). */
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

nixl_status_t nixlTcpxEngine::releaseReqH(nixlBackendReqH *handle) const
{
	auto *h = static_cast<tcpxReqH *>(handle);
	nixl_status_t st = NIXL_SUCCESS;
	if (h->x) {
		/* The library cannot cancel one transfer (only its connection):
		 * wait for it, since the caller may free the memory next. */
		int rc = tcpx_p2p_wait(h->x, params_.cfg.timeout_ms);
		if (rc == TCPX_P2P_ETIMEDOUT) {
			NIXL_ERROR << "TCPX: released a transfer still pending after "
				   << params_.cfg.timeout_ms << " ms; it is freed when the "
				   << "connection closes, and its memory is in use until then";
			std::lock_guard<std::mutex> g(orphans_mu_);
			orphans_.push_back(h->x);
			h->x = nullptr;
			st = NIXL_ERR_BACKEND;
		} else {
			tcpx_p2p_xfer_release(h->x);
		}
	}
	delete h;
	return st;
}

nixl_status_t nixlTcpxEngine::genNotif(const std::string &remote_agent,
				       const std::string &msg) const
{
	std::string m;
	nixl_status_t st = userMsg(msg, m);
	if (st != NIXL_SUCCESS)
		return st;
	tcpxLinkPtr link;
	st = net_->anyLink(remote_agent, link);
	if (st != NIXL_SUCCESS)
		return st;
	tcpx_p2p_conn *c = link->conn;
	if (!c)
		return NIXL_ERR_REMOTE_DISCONNECT;
	return tcpxStatus(net_->send(c, m), "notify");
}

nixl_status_t nixlTcpxEngine::getNotifs(notif_list_t &notif_list)
{
	if (!notif_list.empty())
		return NIXL_ERR_INVALID_PARAM;
	net_->takeNotifs(notif_list);
	return NIXL_SUCCESS;
}
