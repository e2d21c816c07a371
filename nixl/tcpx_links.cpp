#include "tcpx_links.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "common/nixl_log.h"
#include "tcpx_exchange.h"
#include "tcpx_status.h"

namespace {

const int service_slice_ms = 20; /* how often the service thread looks around */
const size_t max_handshakes = 64; /* peers being set up at once */

/* The first up, non-loopback IPv4 address, else 127.0.0.1. */
std::string probeAddress()
{
	struct ifaddrs *ifs = nullptr;
	std::string found = "127.0.0.1";
	if (getifaddrs(&ifs) != 0) {
		NIXL_WARN << "TCPX: getifaddrs failed, advertising " << found;
		return found;
	}
	for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET)
			continue;
		if (!(i->ifa_flags & IFF_UP) || (i->ifa_flags & IFF_LOOPBACK))
			continue;
		char buf[INET_ADDRSTRLEN];
		const auto *sin = reinterpret_cast<const struct sockaddr_in *>(i->ifa_addr);
		if (inet_ntop(AF_INET, &sin->sin_addr, buf, sizeof(buf))) {
			found = buf;
			break;
		}
	}
	freeifaddrs(ifs);
	return found;
}

using steady = std::chrono::steady_clock;

} // namespace

tcpxNet::tcpxNet(const std::string &local_agent, tcpxParams &params)
    : local_agent_(local_agent), params_(params), poll_buf_(4096)
{
}

nixl_status_t tcpxNet::start()
{
	int rc = tcpx_p2p_session_create(&params_.cfg, &session_);
	if (rc)
		return tcpxStatus(rc, "session_create");
	uint16_t port = 0;
	std::string why;
	if (tcpxExchangeListen(params_.bind_addr, params_.port, &listen_fd_, &port, why) != 0) {
		NIXL_ERROR << "TCPX: " << why;
		return NIXL_ERR_BACKEND;
	}
	tcpxConnInfo info;
	info.host = params_.ip_addr.empty() ? probeAddress() : params_.ip_addr;
	info.port = port;
	conn_info_ = tcpxEncodeConnInfo(info);
	service_ = std::thread([this] { serviceLoop(); });
	NIXL_INFO << "TCPX: agent " << local_agent_ << " listens at " << info.host << ":" << port
		  << " (gpu " << params_.cfg.gpu << ")";
	return NIXL_SUCCESS;
}

tcpxNet::~tcpxNet()
{
	closeAll();
	if (listen_fd_ >= 0)
		close(listen_fd_);
	if (session_) {
		int rc = tcpx_p2p_session_destroy(session_);
		if (rc)
			tcpxStatus(rc, "session_destroy (regions or transfers left)");
	}
}

void tcpxNet::closeAll()
{
	if (closed_)
		return;
	closed_ = true;
	stop_ = true;
	if (service_.joinable())
		service_.join();
	std::vector<tcpxLinkPtr> all;
	{
		std::lock_guard<std::mutex> g(mu_);
		for (auto &[c, l] : links_)
			all.push_back(l);
	}
	for (auto &l : all)
		closeLink(l);
	retryRetired();
	std::lock_guard<std::mutex> g(mu_);
	if (!retired_mrs_.empty())
		NIXL_ERROR << "TCPX: " << retired_mrs_.size() << " registration piece(s) still busy "
			   << "after every connection closed";
}

void tcpxNet::retire(tcpx_p2p_mr *mr)
{
	std::lock_guard<std::mutex> g(mu_);
	retired_mrs_.push_back(mr);
}

void tcpxNet::retryRetired()
{
	std::vector<tcpx_p2p_mr *> busy;
	{
		std::lock_guard<std::mutex> g(mu_);
		busy.swap(retired_mrs_);
	}
	std::vector<tcpx_p2p_mr *> still;
	for (auto *mr : busy)
		if (tcpx_p2p_mr_deregister(mr) == TCPX_P2P_EBUSY)
			still.push_back(mr);
	std::lock_guard<std::mutex> g(mu_);
	retired_mrs_.insert(retired_mrs_.end(), still.begin(), still.end());
}

/* Accepts peers and reads notifications, so that exports and failures
 * are seen even when the application never asks for notifs. */
void tcpxNet::serviceLoop()
{
	while (!stop_) {
		struct pollfd pfd = {listen_fd_, POLLIN, 0};
		if (poll(&pfd, 1, service_slice_ms) > 0) {
			int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
			if (fd >= 0 && handshakes_.size() >= max_handshakes) {
				close(fd); /* a flood of silent peers: they time out */
			} else if (fd >= 0) {
				Handshake &h = handshakes_.emplace_back();
				h.thread = std::thread([this, fd, &h] { serve(fd, &h); });
			} else if (errno != EAGAIN && errno != EINTR) {
				NIXL_WARN << "TCPX: accept: " << strerror(errno);
			}
		}
		dispatch();
		closeDeadIncoming();
		retryRetired();
		reapHandshakes(false);
	}
	reapHandshakes(true);
}

/* One peer's set-up, in a thread of its own: a slow or silent peer holds
 * up no other (each is bounded by timeout_ms). */
void tcpxNet::serve(int fd, Handshake *h)
{
	std::string agent, why;
	tcpx_p2p_conn *c = nullptr;
	int rc = tcpxExchangeServe(session_, fd, params_.cfg.timeout_ms, agent, &c, why);
	if (rc)
		NIXL_WARN << "TCPX: agent " << (agent.empty() ? "(unknown)" : agent)
			  << " could not connect: " << tcpx_p2p_strerror(rc) << " (" << why << ")";
	else
		adopt(c, agent);
	h->done = true;
}

void tcpxNet::reapHandshakes(bool all)
{
	for (auto it = handshakes_.begin(); it != handshakes_.end();) {
		if (all || it->done) {
			it->thread.join();
			it = handshakes_.erase(it);
		} else {
			++it;
		}
	}
}

void tcpxNet::adopt(tcpx_p2p_conn *c, const std::string &agent)
{
	auto link = std::make_shared<tcpxLink>();
	link->conn = c;
	link->agent = agent;
	std::lock_guard<std::mutex> pg(poll_mu_);
	std::lock_guard<std::mutex> g(mu_);
	for (auto &[id, r] : regions_)
		exportTo(link, r);
	/* After them: the dialer then knows a region not exported yet is
	 * stale (or registered just now) */
	if (!link->error) {
		int rc = send(c, tcpxEncodeMsg(tcpxMsg::synced, nullptr, 0));
		if (rc)
			link->error = rc;
	}
	enter(link);
}

/* poll_mu_ and mu_ held: link becomes known to dispatch, after what a
 * dispatch took for its connection before (kept in order in early_). */
void tcpxNet::enter(const tcpxLinkPtr &link)
{
	tcpx_p2p_conn *c = link->conn;
	links_[c] = link;
	if (link->outgoing)
		outgoing_[link->agent] = link;
	auto e = early_.find(c);
	if (e == early_.end())
		return;
	for (auto &m : e->second)
		handle(c, reinterpret_cast<const unsigned char *>(m.data()), m.size());
	early_.erase(e);
}

/* mu_ held.  Full access: NIXL checks descriptors against registrations on
 * the initiator; the library checks every transfer against this export. */
void tcpxNet::exportTo(const tcpxLinkPtr &link, const tcpxRegion &r)
{
	if (!link->conn || link->error || link->outgoing)
		return;
	tcpx_p2p_rdesc desc;
	int rc = tcpx_p2p_mr_export(link->conn, r.mr, 0, r.len,
				    TCPX_P2P_ACCESS_READ | TCPX_P2P_ACCESS_WRITE, &desc);
	if (rc == TCPX_P2P_OK)
		rc = send(link->conn, tcpxEncodeExported(r.id, desc));
	if (rc) {
		tcpxStatus(rc, "exporting a region to a peer");
		link->error = rc;
		return;
	}
	link->exports[r.id] = desc;
}

void tcpxNet::addRegion(const tcpxRegion &r)
{
	std::lock_guard<std::mutex> g(mu_);
	regions_[r.id] = r;
	for (auto &[c, l] : links_)
		exportTo(l, r);
}

/* Before the region is deregistered (which revokes its exports): peers
 * drop their imports of it. */
void tcpxNet::removeRegion(uint64_t id)
{
	std::lock_guard<std::mutex> g(mu_);
	regions_.erase(id);
	for (auto &[c, l] : links_) {
		if (l->outgoing || !l->conn || l->error || !l->exports.erase(id))
			continue;
		int rc = send(l->conn, tcpxEncodeRevoked(id));
		/* Nothing is lost: the deregistration revokes the export in the
		 * library, which refuses the peer's transfers into it; a peer
		 * closing (at teardown) is no error at all. */
		if (rc == TCPX_P2P_ECLOSED)
			l->error = rc;
		else if (rc)
			NIXL_WARN << "TCPX: telling agent " << l->agent << " of a deregistration: "
				  << tcpx_p2p_strerror(rc) << " (" << tcpx_p2p_last_error() << ")";
	}
}

int tcpxNet::notify(const tcpxLinkPtr &link, const std::string &msg)
{
	auto deadline = steady::now() + std::chrono::milliseconds(params_.cfg.timeout_ms);
	for (;;) {
		int rc;
		{
			/* Per try: a close waits for no more than one notify. */
			std::shared_lock<std::shared_mutex> u(link->use);
			if (!link->conn)
				return TCPX_P2P_ECLOSED;
			rc = tcpx_p2p_notify(link->conn, msg.data(), msg.size());
		}
		if (rc != TCPX_P2P_EAGAIN || steady::now() > deadline)
			return rc;
		std::this_thread::sleep_for(std::chrono::microseconds(100));
	}
}

int tcpxNet::send(tcpx_p2p_conn *c, const std::string &msg)
{
	auto deadline = steady::now() + std::chrono::milliseconds(params_.cfg.timeout_ms);
	for (;;) {
		int rc = tcpx_p2p_notify(c, msg.data(), msg.size());
		if (rc != TCPX_P2P_EAGAIN || steady::now() > deadline)
			return rc;
		std::this_thread::sleep_for(std::chrono::microseconds(100));
	}
}

nixl_status_t tcpxNet::addRemote(const std::string &agent, const std::string &info)
{
	tcpxConnInfo ci;
	if (!tcpxDecodeConnInfo(info, ci)) {
		NIXL_ERROR << "TCPX: connection info of agent " << agent << " is not ours ("
			   << info.size() << " bytes)";
		return NIXL_ERR_INVALID_PARAM;
	}
	tcpxLinkPtr stale; /* a connection to an earlier peer of that name */
	{
		std::lock_guard<std::mutex> g(mu_);
		remotes_[agent] = ci;
		dialing_.try_emplace(agent, std::make_shared<std::mutex>());
		auto o = outgoing_.find(agent);
		if (o != outgoing_.end())
			stale = o->second;
	}
	if (stale)
		closeLink(stale);
	return NIXL_SUCCESS;
}

bool tcpxNet::knowsRemote(const std::string &agent)
{
	std::lock_guard<std::mutex> g(mu_);
	return remotes_.count(agent) != 0;
}

nixl_status_t tcpxNet::outgoing(const std::string &agent, tcpxLinkPtr &out, bool redial)
{
	std::shared_ptr<std::mutex> dial_mu;
	tcpxConnInfo ci;
	tcpxLinkPtr old;
	{
		std::lock_guard<std::mutex> g(mu_);
		auto o = outgoing_.find(agent);
		if (o != outgoing_.end() && !o->second->error && o->second->conn) {
			out = o->second;
			return NIXL_SUCCESS;
		}
		if (o != outgoing_.end() && !redial) {
			/* the caller's NIXL_ERR_REMOTE_DISCONNECT says it */
			NIXL_INFO << "TCPX: connection to agent " << agent << " failed ("
				  << tcpx_p2p_strerror(o->second->error)
				  << "); makeConnection or reload its metadata to dial again";
			return NIXL_ERR_REMOTE_DISCONNECT;
		}
		auto r = remotes_.find(agent);
		if (r == remotes_.end()) {
			NIXL_ERROR << "TCPX: no connection info of agent " << agent;
			return NIXL_ERR_NOT_FOUND;
		}
		dial_mu = dialing_[agent];
	}
	std::lock_guard<std::mutex> dg(*dial_mu);
	{
		std::lock_guard<std::mutex> g(mu_);
		auto o = outgoing_.find(agent);
		if (o != outgoing_.end()) {
			if (!o->second->error && o->second->conn) {
				out = o->second; /* another thread dialed meanwhile */
				return NIXL_SUCCESS;
			}
			old = o->second;
		}
		ci = remotes_[agent];
	}
	if (old)
		closeLink(old); /* a failed one: start again */
	tcpx_p2p_conn *c = nullptr;
	std::string why;
	int rc = tcpxExchangeDial(session_, ci.host, ci.port, local_agent_, params_.cfg.timeout_ms,
				  &c, why);
	if (rc) {
		NIXL_ERROR << "TCPX: connecting to agent " << agent << " at " << ci.host << ":"
			   << ci.port << ": " << tcpx_p2p_strerror(rc) << " (" << why << ")";
		return tcpxStatusQuiet(rc);
	}
	auto link = std::make_shared<tcpxLink>();
	link->conn = c;
	link->agent = agent;
	link->outgoing = true;
	{
		std::lock_guard<std::mutex> pg(poll_mu_);
		std::lock_guard<std::mutex> g(mu_);
		enter(link);
	}
	out = link;
	return NIXL_SUCCESS;
}

nixl_status_t tcpxNet::anyLink(const std::string &agent, tcpxLinkPtr &out)
{
	{
		std::lock_guard<std::mutex> g(mu_);
		auto o = outgoing_.find(agent);
		if (o != outgoing_.end() && !o->second->error && o->second->conn) {
			out = o->second;
			return NIXL_SUCCESS;
		}
		for (auto &[c, l] : links_)
			if (!l->outgoing && l->agent == agent && !l->error && l->conn) {
				out = l;
				return NIXL_SUCCESS;
			}
	}
	return outgoing(agent, out);
}

void tcpxNet::disconnect(const std::string &agent)
{
	tcpxLinkPtr link;
	{
		std::lock_guard<std::mutex> g(mu_);
		auto o = outgoing_.find(agent);
		if (o == outgoing_.end())
			return;
		link = o->second;
	}
	closeLink(link);
}

/* Removes link from the tables once no call uses it (link->use), then
 * frees its imports and destroys the connection (which waits for the
 * peer's close answer, so under neither lock: a call that meets the link
 * from now on sees conn == NULL and uses nothing of it).  Transfers still
 * pending on it fail; their handles see conn == NULL. */
void tcpxNet::closeLink(const tcpxLinkPtr &link)
{
	tcpx_p2p_conn *c;
	std::vector<tcpx_p2p_rmr *> rmrs;
	std::unique_lock<std::shared_mutex> u(link->use);
	{
		std::lock_guard<std::mutex> g(mu_);
		c = link->conn;
		if (!c)
			return;
		link->conn = nullptr;
		if (!link->error)
			link->error = TCPX_P2P_ECLOSED;
		links_.erase(c);
		auto o = outgoing_.find(link->agent);
		if (link->outgoing && o != outgoing_.end() && o->second == link)
			outgoing_.erase(o);
		for (auto &[id, r] : link->imports)
			rmrs.push_back(r);
		link->imports.clear();
		rmrs.insert(rmrs.end(), link->retired.begin(), link->retired.end());
		link->retired.clear();
		imported_.notify_all();
	}
	u.unlock();
	for (auto *r : rmrs)
		tcpx_p2p_rmr_release(r);
	int rc = tcpx_p2p_conn_destroy(c);
	if (rc)
		tcpxStatus(rc, "conn_destroy");
}

/* Connections peers dialed and then closed (or lost): free them. */
void tcpxNet::closeDeadIncoming()
{
	std::vector<tcpxLinkPtr> dead;
	{
		std::lock_guard<std::mutex> g(mu_);
		for (auto &[c, l] : links_)
			if (!l->outgoing && l->error)
				dead.push_back(l);
	}
	for (auto &l : dead)
		closeLink(l);
}

void tcpxNet::dispatch()
{
	std::lock_guard<std::mutex> pg(poll_mu_);
	for (;;) {
		/* One at a time, of any length the session takes
		 * (config.notif_max_bytes): the buffer grows to a longer one. */
		tcpx_p2p_notif_buf nb = {};
		int got = 0;
		nb.struct_size = sizeof(nb);
		nb.buf = poll_buf_.data();
		nb.cap = poll_buf_.size();
		int rc = tcpx_p2p_notif_take(session_, &nb, &got);
		if (rc == TCPX_P2P_EINVAL && nb.len > nb.cap) {
			poll_buf_.resize(nb.len);
			continue;
		}
		if (rc) {
			tcpxStatus(rc, "notif_take");
			return;
		}
		if (!got)
			return;
		std::lock_guard<std::mutex> g(mu_);
		handle(nb.conn, poll_buf_.data(), nb.len);
	}
}

/* mu_ held. */
void tcpxNet::handle(tcpx_p2p_conn *c, const unsigned char *msg, size_t msg_len)
{
	auto it = links_.find(c);
	if (it == links_.end()) {
		/* accepted, not adopted yet: keep for adopt() */
		early_[c].emplace_back(reinterpret_cast<const char *>(msg), msg_len);
		return;
	}
	tcpxLink &l = *it->second;
	if (msg_len == 0) { /* the library's own: the connection failed */
		int rc = tcpx_p2p_progress(c);
		l.error = rc ? rc : TCPX_P2P_ECLOSED;
		NIXL_INFO << "TCPX: connection with agent " << l.agent
			  << " ended: " << tcpx_p2p_strerror(l.error);
		imported_.notify_all();
		return;
	}
	const auto type = static_cast<tcpxMsg>(msg[0]);
	const unsigned char *body = msg + 1;
	const size_t len = msg_len - 1;
	uint64_t id;
	tcpx_p2p_rdesc desc;
	tcpx_p2p_rmr *rmr;
	switch (type) {
	case tcpxMsg::exported:
		if (l.outgoing && tcpxDecodeExported(body, len, id, desc)) {
			int rc = tcpx_p2p_rmr_import(c, &desc, &rmr);
			if (rc) {
				l.error = rc;
				tcpxStatus(rc, "importing a peer's region");
			} else {
				auto old = l.imports.find(id);
				if (old != l.imports.end())
					l.retired.push_back(old->second);
				l.imports[id] = rmr;
			}
			imported_.notify_all();
			return;
		}
		break;
	case tcpxMsg::revoked:
		if (l.outgoing && tcpxDecodeRevoked(body, len, id)) {
			/* transfers being prepared may hold it: freed at close */
			auto old = l.imports.find(id);
			if (old != l.imports.end()) {
				l.retired.push_back(old->second);
				l.imports.erase(old);
			}
			return;
		}
		break;
	case tcpxMsg::synced:
		if (l.outgoing && len == 0) {
			l.synced = true;
			l.synced_at = steady::now();
			imported_.notify_all();
			return;
		}
		break;
	case tcpxMsg::user:
		notifs_.emplace_back(l.agent, std::string(reinterpret_cast<const char *>(body), len));
		return;
	}
	NIXL_WARN << "TCPX: dropped a control message of type " << static_cast<int>(msg[0])
		  << " (" << msg_len << " bytes) from agent " << l.agent;
}

nixl_status_t tcpxNet::import(const tcpxLinkPtr &link, uint64_t region_id, tcpx_p2p_rmr *&out)
{
	const auto start = steady::now();
	const auto deadline = start + std::chrono::milliseconds(params_.cfg.timeout_ms);
	for (;;) {
		{
			std::unique_lock<std::mutex> g(mu_);
			auto it = link->imports.find(region_id);
			if (it != link->imports.end()) {
				out = it->second;
				return NIXL_SUCCESS;
			}
			if (link->error || !link->conn) {
				NIXL_INFO << "TCPX: connection to agent " << link->agent
					  << " failed: " << tcpx_p2p_strerror(link->error);
				return tcpxStatusQuiet(link->error ? link->error : TCPX_P2P_ECLOSED);
			}
			auto now = steady::now();
			/* once synced, a region not exported is stale metadata, or
			 * one registered a moment ago whose export is on its way */
			bool stale = link->synced &&
				     now > std::max(start, link->synced_at) +
						   std::chrono::milliseconds(params_.export_wait_ms);
			if (stale || now > deadline) {
				NIXL_ERROR << "TCPX: agent " << link->agent << " has not exported region "
					   << region_id << " to this agent (deregistered there: "
					   << "stale metadata; load its metadata anew)";
				return NIXL_ERR_NOT_FOUND;
			}
			imported_.wait_for(g, std::chrono::microseconds(200));
		}
		dispatch();
	}
}

void tcpxNet::notifySelf(const std::string &msg)
{
	std::lock_guard<std::mutex> g(mu_);
	notifs_.emplace_back(local_agent_, msg);
}

void tcpxNet::takeNotifs(std::vector<std::pair<std::string, std::string>> &out)
{
	dispatch();
	std::lock_guard<std::mutex> g(mu_);
	for (auto &n : notifs_)
		out.push_back(std::move(n));
	notifs_.clear();
}
