/* nixlTcpxEngine: NIXL's backend engine over libtcpx_p2p (docs/nixl.md). */
#ifndef TCPX_NIXL_ENGINE_H
#define TCPX_NIXL_ENGINE_H

#include <atomic>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "backend/backend_engine.h"
#include "tcpx_links.h"
#include "tcpx_params.h"

/* A local registration (registerMem). */
struct tcpxLocalMD : public nixlBackendMD {
	tcpxLocalMD() : nixlBackendMD(true) {}
	std::vector<tcpx_p2p_mr *> mrs; /* one per piece (tcpx_wire.h) */
	tcpxRegionInfo info;
};

/* A peer's registration, from its public data (loadRemoteMD), or this
 * agent's own as a target of agent-local transfers (loadLocalMD: local
 * then names it). */
struct tcpxRemoteMD : public nixlBackendMD {
	tcpxRemoteMD() : nixlBackendMD(false) {}
	std::string agent;
	tcpxRegionInfo info;
	const tcpxLocalMD *local = nullptr;
};

/* A transfer request (prepXfer): a prepared list of the library, posted
 * by postXfer as often as NIXL reposts it.  An agent-local one (to this
 * agent's own memory) is a list of copies instead. */
struct tcpxReqH : public nixlBackendReqH {
	tcpxLinkPtr link; /* NULL for an agent-local request */
	nixl_xfer_op_t op = NIXL_WRITE;
	tcpx_p2p_xlist *list = nullptr;
	std::vector<const tcpxLocalMD *> mds; /* local registrations it names */
	size_t bytes = 0;
	tcpx_p2p_xfer *x = nullptr; /* the latest post */
	std::string read_notif;     /* a READ's, sent once the data is here */
	bool read_notif_due = false;
	/* Set when the memory it names was deregistered under it: every
	 * later call on it fails with this status. */
	nixl_status_t dropped = NIXL_SUCCESS;
	bool posting = false; /* a post waits for room, without reqs_mu_ */
	struct Copy {
		void *dst;
		const void *src;
		size_t len;
	};
	std::vector<Copy> copies; /* an agent-local request's */
	bool vram = false;
};

class nixlTcpxEngine : public nixlBackendEngine {
public:
	explicit nixlTcpxEngine(const nixlBackendInitParams *init_params);
	~nixlTcpxEngine() override;

	bool supportsRemote() const override { return true; }
	/* Transfers within one agent are copies (no connection). */
	bool supportsLocal() const override { return true; }
	bool supportsNotif() const override { return true; }
	nixl_mem_list_t getSupportedMems() const override;

	nixl_status_t registerMem(const nixlBlobDesc &mem, const nixl_mem_t &nixl_mem,
				  nixlBackendMD *&out) override;
	nixl_status_t deregisterMem(nixlBackendMD *meta) override;
	nixl_status_t getPublicData(const nixlBackendMD *meta, std::string &str) const override;
	nixl_status_t loadRemoteMD(const nixlBlobDesc &input, const nixl_mem_t &nixl_mem,
				   const std::string &remote_agent, nixlBackendMD *&output) override;
	nixl_status_t loadLocalMD(nixlBackendMD *input, nixlBackendMD *&output) override;
	nixl_status_t unloadMD(nixlBackendMD *input) override;

	nixl_status_t getConnInfo(std::string &str) const override;
	nixl_status_t loadRemoteConnInfo(const std::string &remote_agent,
					 const std::string &remote_conn_info) override;
	nixl_status_t connect(const std::string &remote_agent) override;
	nixl_status_t disconnect(const std::string &remote_agent) override;

	nixl_status_t prepXfer(const nixl_xfer_op_t &operation, const nixl_meta_dlist_t &local,
			       const nixl_meta_dlist_t &remote, const std::string &remote_agent,
			       nixlBackendReqH *&handle,
			       const nixl_opt_b_args_t *opt_args = nullptr) const override;
	nixl_status_t postXfer(const nixl_xfer_op_t &operation, const nixl_meta_dlist_t &local,
			       const nixl_meta_dlist_t &remote, const std::string &remote_agent,
			       nixlBackendReqH *&handle,
			       const nixl_opt_b_args_t *opt_args = nullptr) const override;
	nixl_status_t checkXfer(nixlBackendReqH *handle) const override;
	nixl_status_t releaseReqH(nixlBackendReqH *handle) const override;

	nixl_status_t getNotifs(notif_list_t &notif_list) override;
	nixl_status_t genNotif(const std::string &remote_agent, const std::string &msg) const override;

private:
	int registerPieces(tcpxLocalMD &md);
	int deregisterPieces(tcpxLocalMD &md);
	size_t dropRequestsOn(const tcpxLocalMD *md);
	void endPending(tcpxReqH *h, bool cancel) const;
	nixl_status_t prepLocal(tcpxReqH &h, const nixl_meta_dlist_t &local,
				const nixl_meta_dlist_t &remote) const;
	nixl_status_t postLocal(tcpxReqH &h, const nixl_opt_b_args_t *opt_args) const;
	void telemetry(nixl_telemetry_event_type_t type, uint64_t value) const;

	tcpxParams params_;
	/* The connections: mutable state behind NIXL's const transfer calls. */
	std::unique_ptr<tcpxNet> net_;
	std::atomic<uint64_t> next_region_{1};
	/* The live requests (a deregistration drops those naming its memory;
	 * destruction frees what NIXL never released), and transfers still
	 * pending after a cancel and timeout_ms (freed at destruction, after
	 * the connections closed).  reqs_mu_ also serialises the calls on one
	 * request against a deregistration dropping it; a post waiting for
	 * room in the control stream lets go of it between tries. */
	mutable std::mutex reqs_mu_;
	mutable std::set<tcpxReqH *> reqs_;
	mutable std::vector<tcpx_p2p_xfer *> orphans_;
	friend struct tcpxXferOps;
};

#endif
