/* nixlTcpxEngine: NIXL's backend engine over libtcpx_p2p (docs/nixl.md). */
#ifndef TCPX_NIXL_ENGINE_H
#define TCPX_NIXL_ENGINE_H

#include <atomic>
#include <memory>
#include <mutex>
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

/* A peer's registration, from its public data (loadRemoteMD). */
struct tcpxRemoteMD : public nixlBackendMD {
	tcpxRemoteMD() : nixlBackendMD(false) {}
	std::string agent;
	tcpxRegionInfo info;
};

class nixlTcpxEngine : public nixlBackendEngine {
public:
	explicit nixlTcpxEngine(const nixlBackendInitParams *init_params);
	~nixlTcpxEngine() override;

	bool supportsRemote() const override { return true; }
	/* Transfers within one agent would need a connection of the session
	 * with itself, which the library does not make. */
	bool supportsLocal() const override { return false; }
	bool supportsNotif() const override { return true; }
	nixl_mem_list_t getSupportedMems() const override;

	nixl_status_t registerMem(const nixlBlobDesc &mem, const nixl_mem_t &nixl_mem,
				  nixlBackendMD *&out) override;
	nixl_status_t deregisterMem(nixlBackendMD *meta) override;
	nixl_status_t getPublicData(const nixlBackendMD *meta, std::string &str) const override;
	nixl_status_t loadRemoteMD(const nixlBlobDesc &input, const nixl_mem_t &nixl_mem,
				   const std::string &remote_agent, nixlBackendMD *&output) override;
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
	void telemetry(nixl_telemetry_event_type_t type, uint64_t value) const;

	tcpxParams params_;
	/* The connections: mutable state behind NIXL's const transfer calls. */
	std::unique_ptr<tcpxNet> net_;
	std::atomic<uint64_t> next_region_{1};
	/* Transfers still pending when their handle was released (timeout_ms
	 * passed): freed once done, at the latest at destruction. */
	mutable std::mutex orphans_mu_;
	mutable std::vector<tcpx_p2p_xfer *> orphans_;
	friend struct tcpxXferOps;
};

#endif
