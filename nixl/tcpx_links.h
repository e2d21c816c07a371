/* The connections of one engine (one library session).
 *
 * An agent's connection info names a TCP socket of its engine over which
 * peers make connections with it by the library's blob exchange
 * (tcpx_exchange.h); an agent that transfers to a peer dials it the first
 * time.  Each agent initiates only on connections it dialed ("outgoing");
 * on connections it accepted ("incoming") it is the target: it exports
 * every registered region to the dialer and sends the descriptors as
 * control messages, and the dialer imports them.  Two agents that both
 * initiate hold two connections, one per direction of initiative, so
 * neither waits on the other's set-up.  Notifications travel on the
 * initiator's connection, after the data of the transfers posted before
 * them (docs/nixl.md). */
#ifndef TCPX_NIXL_LINKS_H
#define TCPX_NIXL_LINKS_H

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <tcpx_p2p.h>

#include "nixl_types.h"
#include "tcpx_params.h"
#include "tcpx_wire.h"

/* One library connection with one peer agent. */
struct tcpxLink {
	/* Held shared by a call that uses conn outside mu_ (a post, a
	 * notification), alone by closeLink while it clears and destroys
	 * conn: no call uses a destroyed connection. */
	std::shared_mutex use;
	tcpx_p2p_conn *conn = nullptr; /* NULL once closed */
	std::string agent;             /* the peer */
	bool outgoing = false;         /* we dialed it: our transfers go on it */
	int error = 0;                 /* sticky: the connection failed or closed */
	bool synced = false;           /* outgoing: the peer's initial exports are here */
	std::chrono::steady_clock::time_point synced_at;
	std::unordered_map<uint64_t, tcpx_p2p_rmr *> imports; /* peer region id -> import */
	std::vector<tcpx_p2p_rmr *> retired; /* revoked imports: freed at close */
	std::unordered_map<uint64_t, tcpx_p2p_rdesc> exports; /* our region id -> export */
};
using tcpxLinkPtr = std::shared_ptr<tcpxLink>;

/* A registered region as the links need it (to export it). */
struct tcpxRegion {
	uint64_t id;
	tcpx_p2p_mr *mr;
	size_t len;
};

class tcpxNet {
public:
	tcpxNet(const std::string &local_agent, tcpxParams &params);
	~tcpxNet();
	tcpxNet(const tcpxNet &) = delete;
	tcpxNet &operator=(const tcpxNet &) = delete;

	/* Session, listening socket and service thread; NIXL_SUCCESS or the
	 * error. */
	nixl_status_t start();
	tcpx_p2p_session *session() const { return session_; }
	const tcpxParams &params() const { return params_; }
	const std::string &connInfo() const { return conn_info_; }

	/* Peers' connection info (NIXL loadRemoteConnInfo). */
	nixl_status_t addRemote(const std::string &agent, const std::string &info);
	bool knowsRemote(const std::string &agent);

	/* The connection this side initiates on, dialed on first use.  One
	 * that failed stays failed (NIXL_ERR_REMOTE_DISCONNECT, at once)
	 * until redial: connect(), or the peer's connection info loaded anew. */
	nixl_status_t outgoing(const std::string &agent, tcpxLinkPtr &out, bool redial = false);
	/* Some live connection with agent for a notification: outgoing if
	 * there is one, else one the peer dialed, else a new outgoing one. */
	nixl_status_t anyLink(const std::string &agent, tcpxLinkPtr &out);
	/* Closes this side's outgoing connection to agent (NIXL disconnect). */
	void disconnect(const std::string &agent);

	/* The import of a peer region on link, waiting for the peer's export
	 * message: up to timeout_ms for the peer's initial exports (a fresh
	 * connection), then up to export_wait_ms for one registered since
	 * (NIXL_ERR_NOT_FOUND after: stale metadata). */
	nixl_status_t import(const tcpxLinkPtr &link, uint64_t region_id, tcpx_p2p_rmr *&out);

	/* Registered regions: exported on every incoming connection. */
	void addRegion(const tcpxRegion &r);
	void removeRegion(uint64_t id);

	/* A control message on a connection, retried while the library says
	 * EAGAIN (up to timeout_ms). */
	int send(tcpx_p2p_conn *c, const std::string &msg);
	/* A notification to link's peer: send's retries, each under the
	 * link's use lock (ECLOSED once the link is closed). */
	int notify(const tcpxLinkPtr &link, const std::string &msg);

	/* Takes delivered NIXL notifications (after reading the session's). */
	void takeNotifs(std::vector<std::pair<std::string, std::string>> &out);
	/* A notification of this agent to itself (agent-local transfers). */
	void notifySelf(const std::string &msg);

	/* A registration a peer's transfer still holds: deregistered once it
	 * can be (the service thread retries; closeAll ends the holders). */
	void retire(tcpx_p2p_mr *mr);
	/* Closes every connection, then deregisters the retired regions. */
	void closeAll();

private:
	struct Handshake { /* a peer being served (tcpxExchangeServe) */
		std::thread thread;
		std::atomic<bool> done{false};
	};

	void serviceLoop();
	void serve(int fd, Handshake *h);
	void reapHandshakes(bool all);
	void adopt(tcpx_p2p_conn *c, const std::string &agent);
	void enter(const tcpxLinkPtr &link);
	void exportTo(const tcpxLinkPtr &link, const tcpxRegion &r);
	void dispatch();
	void handle(tcpx_p2p_conn *c, const unsigned char *msg, size_t len);
	void closeLink(const tcpxLinkPtr &link);
	void closeDeadIncoming();
	void retryRetired();

	const std::string local_agent_;
	tcpxParams &params_;
	std::string conn_info_;
	tcpx_p2p_session *session_ = nullptr;
	int listen_fd_ = -1;
	std::thread service_;
	std::list<Handshake> handshakes_; /* the service thread's own */
	std::atomic<bool> stop_{false};
	bool closed_ = false; /* closeAll ran */

	std::mutex mu_; /* everything below */
	std::condition_variable imported_;
	std::map<std::string, tcpxConnInfo> remotes_;
	std::map<std::string, std::shared_ptr<std::mutex>> dialing_; /* one dial per peer */
	std::map<std::string, tcpxLinkPtr> outgoing_;
	std::unordered_map<tcpx_p2p_conn *, tcpxLinkPtr> links_; /* all, by conn */
	std::unordered_map<tcpx_p2p_conn *, std::vector<std::string>> early_; /* before adopt */
	std::map<uint64_t, tcpxRegion> regions_;
	std::vector<std::pair<std::string, std::string>> notifs_;
	std::vector<tcpx_p2p_mr *> retired_mrs_;

	std::mutex poll_mu_; /* one reader of the session's notifications at a time */
	std::vector<unsigned char> poll_buf_; /* grows to the longest notification */
};

#endif
