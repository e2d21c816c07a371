/*
 * libtcpx_p2p — point-to-point GPU transfers over an NCCL network plugin
 * (Google's GPUDirect-TCPX plugin on GCP A3, or the bundled TCP emulator).
 *
 * Objects (all opaque):
 *   session   one process + one GPU (or host memory only); loads the plugin once
 *   server    a TCP rendezvous point that accepts connections from many peers
 *   listener  the first half of a connection made by blob exchange
 *   conn      one peer: N channels, each a plugin send comm + recv comm
 *   mr        a registered memory region, usable on every conn of its session
 *   xfer      one posted send or receive
 *
 * Glossary.  A connection is made one of two ways, and both end in the
 * same conn:
 *   rendezvous      tcpx_p2p_server_create/_accept on one side and
 *                   tcpx_p2p_dial on the other: an asymmetric TCP meeting
 *                   point (server and dialer) that exchanges the blobs
 *                   itself and keeps its socket for tcpx_p2p_conn_barrier.
 *   blob exchange   tcpx_p2p_listen and tcpx_p2p_connect, the same calls
 *                   on both sides: symmetric; the application carries each
 *                   side's listener blob to the other (no socket of the
 *                   library's own, so no barrier).  The rendezvous is built
 *                   on it.
 *   channel         one of a conn's num_channels plugin send/recv comm
 *                   pairs that carry transfer bytes; each conn has one more
 *                   plugin channel of its own, the control channel, for the
 *                   library's announcements and answers (never the
 *                   rendezvous socket).
 *   progress        one pass of the session's engine: every conn of the
 *                   session tested and advanced once.  tcpx_p2p_progress(c)
 *                   is such a pass (reporting c's own failure);
 *                   tcpx_p2p_session_progress is the same pass for a
 *                   session; test, wait and wait_any run passes too.
 *
 * Conventions: every function returning int returns 0 (TCPX_P2P_OK) or a
 * negative TCPX_P2P_E* code (tcpx_p2p_config_count, a count, is the one
 * exception); tcpx_p2p_last_error() then holds a detail string for the
 * calling thread.  Outputs are written only on success.  The library
 * never prints to stdout and never exits the process.
 *
 * Matching: sends and receives on a connection match in posting order, per
 * direction, and a matching pair must have equal total lengths (a pair that
 * differs fails with EPROTO on both sides; see docs/api.md).  One-sided
 * writes and reads take their place in the same order.
 *
 * Progress: the plugin moves bytes only while it is driven (TCPX moves a
 * request's bytes only inside its test()).  Every test, wait, wait_any and
 * progress call drives every connection of the session, so one thread
 * waiting on anything keeps all of them moving.  An application that posts
 * and returns must either call one of them regularly or set
 * progress_thread (TCPX_P2P_PROGRESS_THREAD=1): then a thread per session
 * drives the transfers and test/wait only look and sleep.  Without it (and
 * with heartbeats on, config.heartbeat_ms) a keepalive thread per session
 * drives it only when nobody has for half a heartbeat interval, so that an
 * application busy elsewhere still heartbeats.  See docs/api.md.
 *
 * Threads: every function may be called from any thread.  A session does not
 * survive fork(): a child must not use its parent's sessions.  Calls on one conn
 * (and its xfers) are serialised by a lock inside the conn; progress passes
 * skip a conn another thread is working on.  A session with a GPU makes that
 * GPU current (cudaSetDevice) on the calling thread for its plugin and CUDA
 * calls, as the plugin requires, and gives the thread its own CUDA context
 * back before returning (a thread that had none stays on the session's GPU).
 */
#ifndef TCPX_P2P_H
#define TCPX_P2P_H

#include <stddef.h>
#include <stdint.h>

#include "tcpx_p2p_version.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(TCPX_P2P_BUILDING)
#define TCPX_P2P_API __attribute__((visibility("default")))
#else
#define TCPX_P2P_API
#endif

/* ---- errors -------------------------------------------------------------- */

enum tcpx_p2p_error {
	TCPX_P2P_OK = 0,
	TCPX_P2P_EINVAL = -1,     /* bad argument or configuration value */
	TCPX_P2P_ENOMEM = -2,     /* out of host or device memory */
	TCPX_P2P_ENOTSUP = -3,    /* the plugin or build does not support this */
	TCPX_P2P_ENOPLUGIN = -4,  /* no NCCL net plugin could be loaded */
	TCPX_P2P_EPLUGIN = -5,    /* the plugin returned an error */
	TCPX_P2P_ENET = -6,       /* socket or system error */
	TCPX_P2P_ETIMEDOUT = -7,  /* the deadline passed; nothing was lost */
	TCPX_P2P_EAGAIN = -8,     /* not complete yet; call again */
	TCPX_P2P_ECUDA = -9,      /* a CUDA call failed */
	TCPX_P2P_EPROTO = -10,    /* the peer broke the protocol: another version or layout, a bound */
	TCPX_P2P_EBUSY = -11,     /* object still has transfers or users */
	TCPX_P2P_ECLOSED = -12,   /* peer closed, or the connection failed before */
	TCPX_P2P_EINTERNAL = -13, /* a bug in the library; please report */
	TCPX_P2P_ECANCELED = -14, /* (0.10) cancelled (tcpx_p2p_xfer_cancel, here or by the peer) */
	TCPX_P2P_EPEERRESTART = -15, /* (0.11) the peer restarted: a new incarnation of it
				      * connected from the same address */
};

/* Static English text for an error code; never NULL. */
TCPX_P2P_API const char *tcpx_p2p_strerror(int err);

/* Detail of the last error on the calling thread ("" when none). The string
 * stays valid until the next failing call on this thread. */
TCPX_P2P_API const char *tcpx_p2p_last_error(void);

/* Library version string, "MAJOR.MINOR.PATCH". */
TCPX_P2P_API const char *tcpx_p2p_version(void);

/* ---- logging ------------------------------------------------------------- */

enum tcpx_p2p_log_level {
	TCPX_P2P_LOG_NONE = 0,
	TCPX_P2P_LOG_WARN = 1,
	TCPX_P2P_LOG_INFO = 2,
	TCPX_P2P_LOG_DEBUG = 3,
	TCPX_P2P_LOG_TRACE = 4,
};

/* A log sink receives one formatted line (no trailing newline). */
typedef void (*tcpx_p2p_log_fn)(int level, const char *subsys, const char *msg, void *arg);

/* Replace the process-wide log sink (NULL restores the default, which writes
 * to stderr) and set the level (TCPX_P2P_LOG_LEVEL in the environment sets
 * the initial one).  Thread-safe.
 * RETURN VALUE: 0, or TCPX_P2P_EINVAL for a level out of range. */
TCPX_P2P_API int tcpx_p2p_set_log(tcpx_p2p_log_fn fn, void *arg, int level);

/* ---- configuration ------------------------------------------------------- */

enum tcpx_p2p_unpack {
	TCPX_P2P_UNPACK_KERNEL = 0, /* one CUDA kernel walks the meta ring (default) */
	TCPX_P2P_UNPACK_D2D = 1,    /* a copy per fragment (batched where possible) */
	TCPX_P2P_UNPACK_HOST = 2,   /* through host memory */
};

/* The most channels a connection may have (tcpx_p2p_config.num_channels). */
#define TCPX_P2P_MAX_CHANNELS 16

typedef struct tcpx_p2p_config {
	size_t struct_size;   /* sizeof(tcpx_p2p_config) as the caller compiled it */
	int gpu;              /* CUDA device of the session; -1 = host memory only */
	int net_dev;          /* plugin device index; -1 = chosen from gpu */
	int num_channels;     /* channels per connection, 1..TCPX_P2P_MAX_CHANNELS */
	size_t chunk_bytes;   /* bytes per plugin request, 1..4 MiB */
	int send_window;      /* in-flight sends per channel, 1..16 */
	int recv_window;      /* in-flight receives per channel (until consumed), 1..16 */
	int unpack;           /* enum tcpx_p2p_unpack */
	int timeout_ms;       /* set-up deadline used where TCPX_P2P_TIMEOUT_DEFAULT is passed */
	const char *plugin_path; /* NULL = search (docs/configuration.md) */
	/* Fields below were added in 0.2; struct_size tells which a caller has. */
	int progress_thread;  /* 1 = a thread per session drives every transfer */
	int mss;              /* smallest TCP MSS on the path: bounds the fragments per chunk */
	const char *nics;     /* devices to stripe channels over: NULL/"auto", "all", "eth1,eth2" */
	int handshake_ms;     /* rendezvous: a peer's deadline to authenticate and send its blob */
	const char *auth_token; /* shared secret peers must prove; NULL = none (docs/reliability.md) */
	/* Fields below were added in 0.5.  What one peer may make this side
	 * hold per connection (docs/reliability.md, "What a peer can make this
	 * side hold"); exceeding one fails that connection with EPROTO. */
	int peer_max_items;       /* announced transfers queued plus their items in flight */
	int peer_max_segments;    /* remote segments of those, queued or in flight */
	int peer_max_notifs;      /* notifications received and not yet taken by notif_poll
				   * (the peer learns it: its notify returns EAGAIN at it) */
	size_t peer_max_ctl_bytes; /* control bytes waiting to go to the peer */
	/* 1 = fail with ENOPLUGIN rather than fall back to the
	 * bundled emulator when the plugin search finds nothing. */
	int require_plugin;
	/* The 0.5 struct's tail padding, named so that it stays: struct_size
	 * then tells a 0.5 caller (which ends here) from a 0.6 one. */
	int reserved_05;
	/* Added in 0.6: how long a destroyed connection waits for the peer's
	 * answer to its close before closing its comms anyway, with requests
	 * still posted (docs/api.md, conn_destroy); 0 = do not wait. */
	int close_timeout_ms;
	/* Added in 0.7: liveness (docs/reliability.md, "Liveness").  The
	 * control channel carries a heartbeat after heartbeat_ms without a
	 * message to the peer (0 = none); a connection whose peer sent nothing
	 * (data, control or heartbeat) for dead_after_ms of this side's passes
	 * fails with ECLOSED (0 = never). */
	int heartbeat_ms;
	int dead_after_ms;
	/* Added in 0.7: the longest notification this side accepts (up to
	 * TCPX_P2P_NOTIF_LIMIT); the peer learns it from the blob and refuses
	 * longer ones at notify (EINVAL).  Each started KiB counts as one of
	 * peer_max_notifs (docs/api.md, "Notifications").  A struct_size that
	 * ends before it (a caller built against 0.6 or older, which cannot
	 * know tcpx_p2p_notif_take) gets TCPX_P2P_NOTIF_MAX unless
	 * TCPX_P2P_NOTIF_MAX_BYTES is set. */
	int notif_max_bytes;
	/* Added in 0.7: a pending transfer that has moved no chunk for this
	 * many ms is reported stalled (tcpx_p2p_xfer_query, the stats' stalls),
	 * not failed; 0 = never. */
	int stall_ms;
	/* The 0.7 struct's tail padding, named so that it stays: struct_size
	 * then tells a 0.7 caller (which ends here) from a 0.8 one. */
	int reserved_07;
	/* Added in 0.8: each channel's share of a transfer is cut into up to
	 * this many chunks, none smaller than 128 KiB (nor larger than
	 * chunk_bytes), so that a channel receives its next chunk while the
	 * last one is unpacked; 1 (default) = one share per channel.  Must
	 * match the peer. */
	int chunks_per_channel;
	int reserved_08;
	/* Added in 0.13: a connection made by tcpx_p2p_dial whose peer failed
	 * (restarted, died, or the connection broke) is re-dialled by the
	 * library for new transfers for up to this many ms (docs/reliability.md,
	 * "Re-dialling a restarted peer"; tcpx_p2p_conn_generation); 0 (default)
	 * = never, the connection stays failed. */
	int redial_ms;
	int reserved_13;
} tcpx_p2p_config;

/* Fill *cfg with the defaults, then apply the TCPX_P2P_* environment (the
 * older UCCL_TCPX_* names are accepted as aliases).  The caller may then
 * override fields.  Thread-safe.
 * RETURN VALUE: 0; TCPX_P2P_EINVAL for a NULL cfg or a malformed variable
 * (the detail names it; *cfg then holds the defaults and the valid ones). */
TCPX_P2P_API int tcpx_p2p_config_init(tcpx_p2p_config *cfg);

/* Number of settings in the configuration table, and one row of it (for
 * --dump-config style listings).  *value is the setting's text in cfg
 * (NULL: the defaults).
 * RETURN VALUE of tcpx_p2p_config_count: the number of rows (> 0), not an
 * error code.  Of tcpx_p2p_config_describe: 0; EINVAL (index outside
 * 0..count-1, value NULL with value_len > 0, value_len too small, or
 * cfg->struct_size too small). */
TCPX_P2P_API int tcpx_p2p_config_count(void);
TCPX_P2P_API int tcpx_p2p_config_describe(const tcpx_p2p_config *cfg, int index,
					  const char **env_name, const char **help,
					  char *value, size_t value_len);

/* Pass as timeout_ms to the connection set-up calls and conn_barrier to use
 * the session's configured timeout_ms (TCPX_P2P_TIMEOUT_MS). */
#define TCPX_P2P_TIMEOUT_DEFAULT (-2)

/* ---- session -------------------------------------------------------------- */

typedef struct tcpx_p2p_session tcpx_p2p_session;
typedef struct tcpx_p2p_server tcpx_p2p_server;
typedef struct tcpx_p2p_listener tcpx_p2p_listener;
typedef struct tcpx_p2p_conn tcpx_p2p_conn;
typedef struct tcpx_p2p_mr tcpx_p2p_mr;
typedef struct tcpx_p2p_xfer tcpx_p2p_xfer;

/* Create a session: validate cfg (NULL = tcpx_p2p_config_init defaults),
 * select the GPU, load and initialise the plugin, start the progress thread
 * if asked for.
 * RETURN VALUE: 0; EINVAL (bad cfg; or, with a plugin that bounces received
 * data through pages, a chunk_bytes that could need more than the 2048
 * fragments one receive may have at the configured mss; on GPUDirect-TCPX,
 * NCCL_DYNAMIC_CHUNK_SIZE unset, which also lowers chunk_bytes to it),
 * ENOPLUGIN (detail
 * lists each file tried and why), EPLUGIN, ECUDA (gpu given but unusable),
 * ENOMEM. */
TCPX_P2P_API int tcpx_p2p_session_create(const tcpx_p2p_config *cfg, tcpx_p2p_session **out);

/* Destroy a session.  All its conns, listeners, servers and mrs must be
 * destroyed first.  RETURN VALUE: 0; EBUSY (objects remain; nothing freed). */
TCPX_P2P_API int tcpx_p2p_session_destroy(tcpx_p2p_session *s);

#define TCPX_P2P_MAX_NICS 16

typedef struct tcpx_p2p_session_info {
	size_t struct_size;
	const char *plugin_path; /* file the plugin was loaded from */
	const char *plugin_name; /* the plugin's own name, e.g. "GPUDirectTCPX_v7" */
	int plugin_abi;          /* ncclNetPlugin_vN that was used */
	int net_dev;
	int gpu;
	/* enum tcpx_p2p_unpack as configured; a connection may use another
	 * (kernel needs a device bounce buffer: docs/configuration.md) */
	int unpack;
	/* Added in 0.2: the devices the channels are striped over (channel i
	 * of every conn uses nic[i % nnics]) and their names. */
	int nnics;
	int nic[TCPX_P2P_MAX_NICS];
	const char *nic_name[TCPX_P2P_MAX_NICS];
	/* Added in 0.4.1: bytes per plugin request in effect (GPUDirect-TCPX
	 * lowers chunk_bytes to NCCL_DYNAMIC_CHUNK_SIZE; docs/tcpx.md). */
	size_t chunk_bytes;
	/* Added in 0.5.  plugin_fallback: 1 when no plugin was found and the
	 * search fell back to the bundled emulator (a warning said so);
	 * plugin_tried: the files the search tried before the one used and
	 * why each was not used ("" when the first served).  send_window and
	 * recv_window: the windows in effect, configured ones lowered to the
	 * requests per comm the plugin takes (docs/configuration.md). */
	int plugin_fallback;
	const char *plugin_tried;
	int send_window;
	int recv_window;
	/* Added in 0.6.  conns_closing: destroyed connections whose close
	 * handshake with the peer still runs (session passes and
	 * session_destroy finish it); unclean_closes: connections whose comms
	 * were closed with plugin requests still posted (the connection had
	 * failed, transfers were under way, or the peer did not answer the
	 * close in time; a warning says which), since the session began. */
	int conns_closing;
	uint64_t unclean_closes;
} tcpx_p2p_session_info;

/* RETURN VALUE: 0; EINVAL.  Strings live as long as the session. */
TCPX_P2P_API int tcpx_p2p_session_query(const tcpx_p2p_session *s, tcpx_p2p_session_info *info);

/* (0.12) Give s a stable identity: node_id (1..31 printable ASCII bytes, no
 * space), the same for every incarnation of this session (a process that
 * restarts sets the same one), different from every other session's its
 * peers know; NULL or "" removes it (the default: none).  Each blob this
 * session makes from then on (tcpx_p2p_listen, dial, server_accept)
 * carries it beside the session's random epoch, and a peer session that
 * makes a connection to s while it holds an earlier one from a session
 * with the same node id but another epoch fails the earlier one at once
 * with EPEERRESTART, in any role: so a listener recognises a restarted
 * dialler, which has no stable address (docs/reliability.md, "Restarted
 * peers").  Two live sessions that share a node id fail each other's
 * connections at their peers.  Without a token anyone who can connect can
 * claim a node id.  Thread-safe; set it before the session connects.
 * RETURN VALUE: 0; EINVAL (NULL s, node_id of 32 bytes or more, or a byte
 * outside 0x21..0x7e). */
TCPX_P2P_API int tcpx_p2p_session_set_node_id(tcpx_p2p_session *s, const char *node_id);

/* ---- memory regions ------------------------------------------------------- */

enum tcpx_p2p_mem_type {
	TCPX_P2P_MEM_HOST = 1,
	TCPX_P2P_MEM_CUDA = 2,
};

/* Register [ptr, ptr+len) for transfers on every conn of the session.
 * Plugin registrations are made lazily per comm on first use and cached.
 * CUDA memory is registered from ptr rounded down to 4 KiB.  With plugins
 * older than ABI v8 (TCPX is v7) a region must be smaller than 2 GiB.
 * The library and the plugin work on their own CUDA streams and wait for
 * none of the caller's: work that writes or reads bytes a transfer uses
 * must have finished (its stream synchronised) before the transfer is
 * posted.  A completed transfer's bytes are visible to work queued after
 * the completion was seen.
 * RETURN VALUE: 0; EINVAL (NULL ptr, len 0, unknown type, CUDA memory on a
 * host-only session, or ptr not of the type given: device memory as HOST,
 * anything but cudaMalloc'd device memory as CUDA); ENOTSUP (the plugin
 * lacks this memory type); ENOMEM. */
TCPX_P2P_API int tcpx_p2p_mr_register(tcpx_p2p_session *s, void *ptr, size_t len, int mem_type,
				      tcpx_p2p_mr **out);

/* Options of a registration (0.4).  A caller sets struct_size to
 * sizeof(tcpx_p2p_mr_params) as it compiled it. */
typedef struct tcpx_p2p_mr_params {
	size_t struct_size;
	unsigned flags; /* TCPX_P2P_MR_* */
} tcpx_p2p_mr_params;

enum tcpx_p2p_mr_flags {
	/* Host memory on a session with a GPU: page-lock it for the GPU
	 * (cudaHostRegister, portable and mapped) unless it already is, and
	 * unlock it at deregistration.  Behind a device bounce buffer (TCPX)
	 * receives into page-locked memory are unpacked by kernel; pageable
	 * memory takes one copy per <= 4 KiB fragment (docs/api.md).  Ignored
	 * for CUDA memory and on host-only sessions. */
	TCPX_P2P_MR_PIN = 1u << 0,
};

/* tcpx_p2p_mr_register with options; params NULL = the same call.
 * RETURN VALUE: as tcpx_p2p_mr_register; EINVAL also for params
 * (struct_size, unknown flags) and, with TCPX_P2P_MR_PIN, for a range that
 * is page-locked only in part or overlaps one pinned for a registration it
 * does not lie inside; ECUDA (cudaHostRegister failed: the detail says
 * why).  Regions pinned by the library may be registered again (wholly
 * inside): the pages stay locked until the last such region is
 * deregistered.  Nothing is registered or locked on failure. */
TCPX_P2P_API int tcpx_p2p_mr_register_ex(tcpx_p2p_session *s, void *ptr, size_t len,
					 int mem_type, const tcpx_p2p_mr_params *params,
					 tcpx_p2p_mr **out);

/* RETURN VALUE: 0; EBUSY (a transfer in flight uses it, or one that failed
 * with its connection: the plugin may write into it until that connection
 * is destroyed; or (0.10) a prepared list names it until it is released:
 * tcpx_p2p_xlist_release; nothing freed). */
TCPX_P2P_API int tcpx_p2p_mr_deregister(tcpx_p2p_mr *mr);

/* tcpx_p2p_mr_deregister_ex flags (0.11). */
#define TCPX_P2P_DEREG_FAIL_INCOMING 1u

/* (0.11) tcpx_p2p_mr_deregister, with flags.  TCPX_P2P_DEREG_FAIL_INCOMING:
 * every connection on which a peer's transfer hosted here (its WRITE
 * landing in mr, its READ served from it) holds the region fails with
 * ECANCELED and is closed with its peer, whose transfers then fail at once
 * (ECLOSED) instead of after its dead_after_ms.  The region is let go
 * once the peer has answered the close and the plugin has handed back
 * every request into it (the connection's passes: the progress or
 * keepalive thread, or tcpx_p2p_progress), or when the connection is
 * destroyed: call again until it returns 0.  The caller's own transfers
 * that use mr are never failed by it (EBUSY, as without the flag).
 * Thread-safe; not from inside a completion callback.
 * RETURN VALUE: 0 (deregistered); EINVAL (NULL mr, unknown flags); EAGAIN
 * (connections holding it through a peer's transfer were failed, now or by
 * an earlier call, and have not let go yet: call again; nothing freed);
 * EBUSY (as tcpx_p2p_mr_deregister, for what the flag does not fail). */
TCPX_P2P_API int tcpx_p2p_mr_deregister_ex(tcpx_p2p_mr *mr, unsigned flags);

/* ---- connections: built-in TCP rendezvous ------------------------------- */

/* Listen for peers on bind_addr:port (NULL = all addresses; port 0 = any).
 * RETURN VALUE: 0; EINVAL; ENET (the detail names the address). */
TCPX_P2P_API int tcpx_p2p_server_create(tcpx_p2p_session *s, const char *bind_addr, uint16_t port,
					tcpx_p2p_server **out);

/* The TCP port the server listens on. */
TCPX_P2P_API int tcpx_p2p_server_port(const tcpx_p2p_server *srv, uint16_t *port);

/* Accept one peer that called tcpx_p2p_dial and build the connection.
 * timeout_ms: TCPX_P2P_TIMEOUT_DEFAULT, or -1 to wait for ever.
 * RETURN VALUE: 0; ETIMEDOUT; EPROTO (peer's version, channels, chunk size
 * or plugin differ, or its token: the detail says which); ECLOSED (the peer
 * hung up, e.g. refusing this side's token); EPLUGIN; ENET; ECUDA (the
 * session's GPU cannot be made current); ENOMEM; EINVAL (NULL argument). */
TCPX_P2P_API int tcpx_p2p_server_accept(tcpx_p2p_server *srv, int timeout_ms, tcpx_p2p_conn **out);

/* RETURN VALUE: 0.  Connections already accepted stay usable. */
TCPX_P2P_API int tcpx_p2p_server_destroy(tcpx_p2p_server *srv);

/* Dial host:port (retrying until the deadline while the peer is not yet
 * listening) and build the connection.
 * RETURN VALUE: as tcpx_p2p_server_accept, and EINVAL also for a bad host
 * or port.  The server checks the dialer's settings and closes without a
 * word on a mismatch, so a peer configured differently (or requiring a
 * token this side lacks) gives ECLOSED here, EPROTO there; the detail
 * lists the settings that must match. */
TCPX_P2P_API int tcpx_p2p_dial(tcpx_p2p_session *s, const char *host, uint16_t port, int timeout_ms,
			       tcpx_p2p_conn **out);

/* ---- connections: blob exchange (application control plane) -------------- */

/* Both peers create a listener, exchange their blobs by their own means
 * (MPI, a KV store, NIXL metadata), then each calls tcpx_p2p_connect with
 * the peer's blob.  The blob is at most 4 KiB and valid as long as the
 * listener.  RETURN VALUE: 0; EINVAL (NULL argument); ENOMEM; ECUDA (the
 * session's GPU cannot be made current); the plugin's listen error: ENET
 * (a system error, e.g. the emulator cannot listen on TCPX_EMU_ADDR),
 * EPLUGIN, or another code the plugin's result maps to. */
TCPX_P2P_API int tcpx_p2p_listen(tcpx_p2p_session *s, tcpx_p2p_listener **out);
TCPX_P2P_API int tcpx_p2p_listener_blob(const tcpx_p2p_listener *l, const void **blob, size_t *len);

/* Connect to the peer whose blob is given; both sides call this
 * concurrently.  On success the listener is consumed (do not destroy it).
 * On failure it stays the caller's to destroy; a blob refused by its checks
 * (EPROTO) leaves it usable, any later failure spends it (EINVAL on reuse):
 * both sides then start again with new listeners.
 * RETURN VALUE: 0; EPROTO (malformed or mismatched blob); ETIMEDOUT; EPLUGIN;
 * EINVAL (listener spent). */
TCPX_P2P_API int tcpx_p2p_connect(tcpx_p2p_listener *l, const void *peer_blob, size_t peer_len,
				  int timeout_ms, tcpx_p2p_conn **out);
TCPX_P2P_API int tcpx_p2p_listener_destroy(tcpx_p2p_listener *l);

/* Destroy a connection.  Transfers still pending fail with ECLOSED (or the
 * error that failed the connection); every xfer of it not yet released,
 * complete or failed, stays valid for test, wait and release.  Returns once the plugin and the unpack stream no longer
 * touch any buffer of this connection: it waits (up to
 * config.close_timeout_ms, driving the session's other connections) only
 * for chunks the plugin reads or writes in the caller's memory in place;
 * the rest of the close with the peer ends in later passes of the session.
 * RETURN VALUE: 0; EINVAL. */
TCPX_P2P_API int tcpx_p2p_conn_destroy(tcpx_p2p_conn *c);

/* Wait until the peer also calls this (over the rendezvous socket).  It
 * does not drive transfers.  After ETIMEDOUT call it again to keep pairing
 * with the peer's barriers.  RETURN VALUE: 0; ETIMEDOUT; ECLOSED; EPROTO;
 * ENET (a socket error); ENOTSUP (conn made by blob exchange); EINVAL
 * (NULL c). */
TCPX_P2P_API int tcpx_p2p_conn_barrier(tcpx_p2p_conn *c, int timeout_ms);

/* (0.13) How many times c was re-established (config.redial_ms): 0 for a
 * connection that never was, or made with re-dial off.  A connection made
 * by tcpx_p2p_dial with redial_ms set whose peer failed (restarted, died,
 * or the connection broke) is dialled again by the library, from the next
 * call on c, for up to redial_ms: meanwhile every call on c that needs a
 * connection (posts, exports, imports, notify, progress, barrier) returns
 * EAGAIN; once a new connection is made the generation grows by one and c
 * uses it, with nothing of the old one: the old transfers failed with the
 * cause (EPEERRESTART, ECLOSED, ...), this side's exports on c are gone
 * (export again), and rmrs imported before fail at the post with
 * EPEERRESTART (import the peer's new descriptors).  If redial_ms passes
 * without a connection, c stays failed with its error.  Only the dialling
 * side re-dials; a server's accepted connection stays failed.
 * Thread-safe.  RETURN VALUE: 0; EINVAL (NULL argument). */
TCPX_P2P_API int tcpx_p2p_conn_generation(tcpx_p2p_conn *c, uint32_t *generation);

/* ---- transfers ------------------------------------------------------------ */

/* Post a send (recv) of len bytes at mr+offset: tcpx_p2p_sendv (recvv) of
 * one segment.  The transfer is split into chunks of chunk_bytes spread
 * over the channels; a send completes when every chunk is on the wire and
 * the receiver matched it, a receive when every chunk is in the user's
 * buffer.  len may be 0.  A pair of different lengths fails on both sides
 * with EPROTO (the transfer's result, not the post's).
 * RETURN VALUE: 0; EINVAL (range outside mr, NULL out); EAGAIN (send: as
 * tcpx_p2p_write; also while the connection is re-dialled,
 * tcpx_p2p_conn_generation); the error that failed the connection earlier
 * (ECLOSED, EPLUGIN, ...); ENOMEM. */
TCPX_P2P_API int tcpx_p2p_send(tcpx_p2p_conn *c, tcpx_p2p_mr *mr, size_t offset, size_t len,
			       tcpx_p2p_xfer **out);
TCPX_P2P_API int tcpx_p2p_recv(tcpx_p2p_conn *c, tcpx_p2p_mr *mr, size_t offset, size_t len,
			       tcpx_p2p_xfer **out);

/* Drive every connection of c's session once (one bounded pass; it waits
 * for c's lock but skips connections another thread is progressing).  It
 * does not sleep.  RETURN VALUE: 0; EINVAL (NULL c); when c has failed,
 * the code it failed with, whatever it was (ECLOSED, ENET, EPROTO, EPLUGIN,
 * ECUDA, ENOMEM, ...; every pending xfer of c then fails with it). */
TCPX_P2P_API int tcpx_p2p_progress(tcpx_p2p_conn *c);

/* Drive every connection of the session once, as tcpx_p2p_progress does.
 * Failures land on the xfers of the connection that failed.
 * RETURN VALUE: 0; EINVAL (NULL s). */
TCPX_P2P_API int tcpx_p2p_session_progress(tcpx_p2p_session *s);

/* Report whether x completed (*done = 1), driving the session once first
 * (unless a progress thread does).
 * RETURN VALUE: 0; the connection's error when x failed. */
TCPX_P2P_API int tcpx_p2p_test(tcpx_p2p_xfer *x, int *done);

/* Wait until x completes or timeout_ms passes (< 0: no limit), driving
 * every connection of the session meanwhile (or, with a progress thread,
 * sleeping until it reports a completion).  Only while every transfer
 * waits on the network does it back off: spin, yield, then sleep 1/16 of
 * the idle time so far (4 us to 1 ms).  RETURN VALUE: 0; ETIMEDOUT (x is still pending and may be
 * waited on again); the connection's error when x failed. */
TCPX_P2P_API int tcpx_p2p_wait(tcpx_p2p_xfer *x, int timeout_ms);

/* Wait until one of xfers[0..n) completes (as tcpx_p2p_wait does for one);
 * *index is then the first complete one (completed or failed: its
 * tcpx_p2p_test or tcpx_p2p_wait returns which).  All xfers must belong to
 * one session.  flags: 0 (reserved).
 * RETURN VALUE: 0; ETIMEDOUT (none completed; *index untouched); EINVAL
 * (NULL xfers or index, n <= 0, a NULL entry, flags, mixed sessions). */
TCPX_P2P_API int tcpx_p2p_wait_any(tcpx_p2p_xfer *const *xfers, int n, int timeout_ms,
				   unsigned flags, int *index);

/* (0.7) What a transfer is doing, without driving anything.  stalled: it is
 * pending and has moved no chunk (nor been matched, for a receive) for
 * config.stall_ms of its session's passes; it goes back to 0 when it
 * moves.  A stalled transfer has not failed: its peer may be slow, or not
 * posting, or not driving its session (docs/reliability.md, "Stalls").
 * Thread-safe; set info->struct_size.
 * RETURN VALUE: 0; EINVAL (NULL argument, struct_size smaller than
 * offsetof(tcpx_p2p_xfer_info, done)). */
typedef struct tcpx_p2p_xfer_info {
	size_t struct_size;  /* sizeof(tcpx_p2p_xfer_info) as the caller compiled it */
	int done;            /* ended: completed or failed */
	int err;             /* once done: 0 or the error it failed with */
	int stalled;         /* pending and stalled (above) */
	uint64_t chunks;     /* its chunks (plugin requests) */
	uint64_t chunks_done; /* ... of them retired */
} tcpx_p2p_xfer_info;
TCPX_P2P_API int tcpx_p2p_xfer_query(tcpx_p2p_xfer *x, tcpx_p2p_xfer_info *info);

/* (0.7) Give x a deadline timeout_ms from now (a later call replaces it).
 * If x is still pending then, it fails with ETIMEDOUT, and so does its
 * connection: the connection is closed with the peer (the close
 * handshake), which completes every chunk in flight into throw-away
 * buffers, since chunks and answers are matched with the peer by position
 * and id and no one transfer can leave them while the connection goes on
 * (docs/reliability.md, "Stalls").  For a bound on waiting that leaves the
 * connection alone, pass a timeout to tcpx_p2p_wait.  x already ended:
 * nothing happens.  Checked in the session's passes.  Thread-safe.
 * RETURN VALUE: 0; EINVAL (NULL x, timeout_ms <= 0). */
TCPX_P2P_API int tcpx_p2p_xfer_deadline(tcpx_p2p_xfer *x, int timeout_ms);

/* (0.11) A deadline on what c's peer makes this side host: each of the
 * peer's transfers accepted here (its WRITE landing in an export, its READ
 * served from one), those under way now and those accepted later, must
 * complete within timeout_ms of its acceptance (of this call, for those
 * under way).  Past it, the connection fails with ETIMEDOUT and is closed
 * with the peer, as for tcpx_p2p_xfer_deadline: the peer's transfers fail
 * at once (ECLOSED), and the regions the stalled transfer held are let go
 * once the peer has answered the close (tcpx_p2p_mr_deregister_ex).
 * timeout_ms 0 removes the deadline, from those under way too (the
 * default: none; config.stall_ms still reports them, the stats'
 * in_stalls).
 * Checked in the session's passes.  Thread-safe.
 * RETURN VALUE: 0; EINVAL (NULL c, timeout_ms < 0); ECLOSED (c failed
 * earlier). */
TCPX_P2P_API int tcpx_p2p_conn_in_deadline(tcpx_p2p_conn *c, int timeout_ms);

/* (0.12) A transfer of c's peer that this side hosts (tcpx_p2p_conn_hosted). */
#define TCPX_P2P_HOSTED_WRITE 1 /* the peer's WRITE, landing in an export here */
#define TCPX_P2P_HOSTED_READ 2  /* the peer's READ, served from an export here */
#define TCPX_P2P_HOSTED_REGIONS 4
typedef struct tcpx_p2p_hosted {
	uint64_t id;         /* the peer's number for it (the id its announcement carried) */
	int op;              /* TCPX_P2P_HOSTED_WRITE or TCPX_P2P_HOSTED_READ */
	int stalled;         /* it has moved no chunk for config.stall_ms (counted in
			      * the stats' in_stalls); 0 again once it moves */
	size_t len;          /* its bytes in all */
	size_t done;         /* bytes landed here (a write) or sent (a read) so far */
	int64_t idle_ms;     /* since it last moved: its acceptance, or a chunk's end */
	int64_t age_ms;      /* since it was accepted here */
	int nregions;        /* regions of this side's it holds (every one: may exceed
			      * TCPX_P2P_HOSTED_REGIONS) */
	tcpx_p2p_mr *region[TCPX_P2P_HOSTED_REGIONS]; /* the first nregions of them, at most
						       * TCPX_P2P_HOSTED_REGIONS; NULL past */
} tcpx_p2p_hosted;

/* (0.12) List what c's peer makes this side host: its WRITEs landing in
 * exports here and its READs served from them, accepted and not yet ended
 * (writes first, then reads, each in the order accepted).  Up to max go to
 * out; *n is how many there are in all, so *n > max says the list was cut
 * (call again with room for *n: the list may have changed meanwhile).
 * Drives nothing: what the connection's last pass left, except that a
 * transfer's bytes landed since then count as movement (idle_ms is read
 * now).  A region named stays registered while the transfer holds it; to
 * end one, tcpx_p2p_mr_deregister_ex or tcpx_p2p_conn_in_deadline.  A
 * failed connection lists what it still holds until its close let go of
 * it.  Thread-safe.
 * RETURN VALUE: 0 (all of them are in out); EAGAIN (more than max: out
 * holds the first max); EINVAL (NULL c or n, max < 0, NULL out with
 * max > 0). */
TCPX_P2P_API int tcpx_p2p_conn_hosted(tcpx_p2p_conn *c, tcpx_p2p_hosted *out, int max, int *n);

/* (0.8) Make the CUDA stream `stream` (a cudaStream_t of the session's GPU,
 * made with cudaStreamNonBlocking) wait until x has ended: work queued on
 * it after this call starts once every byte of x is written and visible
 * (a receive or read: in its buffer; a send or write: its buffer may be
 * reused).  The call does not block: a small kernel holds the stream and,
 * while any stream is held, performs the session's own device work (the
 * unpacks of received chunks, copies of vectored transfers), so that what
 * the held stream waits for never queues behind it on the GPU.  Work with
 * host bounce pages still runs on the session's stream; a held stream
 * sharing its hardware queue delays it (docs/api.md, "Stream waits").  If
 * x fails, the stream is released all the same: test/wait report the
 * failure, and what the stream runs next must check it.  The stream is
 * held until x ends, however long: a transfer that may never end wants a
 * deadline (tcpx_p2p_xfer_deadline).  x must stay unreleased until it
 * ended, as always; one stream per transfer.  Thread-safe.
 * RETURN VALUE: 0 (held, or x had already succeeded: nothing to wait for);
 * x's error if it had already failed (also whatever the stream, once x's
 * connection is destroyed); EINVAL (NULL x; a default stream — NULL,
 * cudaStreamLegacy, cudaStreamPerThread — whatever x's state; a
 * blocking stream, one of another GPU, or one being captured into a graph;
 * x in pageable memory); EBUSY (x holds a stream already); EAGAIN (64
 * streams of the session held); ENOTSUP (a session without a GPU or with
 * unpack = host, a build without CUDA); ECUDA. */
TCPX_P2P_API int tcpx_p2p_stream_wait(tcpx_p2p_xfer *x, void *stream);

/* Free a completed or failed xfer.  RETURN VALUE: 0; EBUSY (still pending). */
TCPX_P2P_API int tcpx_p2p_xfer_release(tcpx_p2p_xfer *x);

/* (0.10) Ask that x stop: it then ends with ECANCELED, unless it ended
 * first — or had every chunk prepared for a plugin request already (handed
 * to the plugin, or bound to a receive posted ahead), which is too late (it
 * then ends with its own result).  Never blocks; x must still be waited
 * for (or taken from tcpx_p2p_completions) and released as ever, since
 * chunks already in the plugin's hands finish first (their bytes may still
 * move).  The connection and its other transfers are untouched.  What each
 * kind does:
 *   posted on an event not yet complete (params.event): a write or read
 *                ends at once, never announced; a send keeps its place
 *                among the sends and goes out empty in its turn.
 *   send, write  the chunks not yet prepared go out empty: the receiver's
 *                matching receive ends ECANCELED; a write's target drops
 *                its notification and answers nothing more to it.
 *   recv         not yet matched: the peer's send that would have matched it
 *                is received into nothing and ends ECANCELED on the peer
 *                (later receives still match later sends, in order);
 *                matched: its chunks not yet posted are received into
 *                nothing (the peer's send completes normally).
 *   read         the target is told and stops sending what it has not yet
 *                prepared; the rest is received into nothing.
 * The bytes of a cancelled transfer's destination (a receive's, a read's
 * local segments, a write's remote range at the target) are unspecified
 * afterwards: any of them may or may not have been written; nothing outside
 * the range is.  A transfer of 0 bytes has nothing to cancel.
 * RETURN VALUE: 0 (also for a transfer that has ended, or whose connection
 * is gone: nothing changes); EINVAL (NULL x); for a read, whose target is
 * told: EPROTO (the peer reads none of this side's answers:
 * peer_max_ctl_bytes) or ENOMEM, and the read was not cancelled. */
TCPX_P2P_API int tcpx_p2p_xfer_cancel(tcpx_p2p_xfer *x);

/* ---- vectored transfers (0.3) -------------------------------------------- */

/* One piece of a vectored transfer: len bytes at mr + offset. */
typedef struct tcpx_p2p_seg {
	tcpx_p2p_mr *mr;
	size_t offset;
	size_t len;
} tcpx_p2p_seg;

/* Longest notification message (tcpx_p2p_notify, xfer_params.notif). */
#define TCPX_P2P_NOTIF_MAX 1024
/* (0.7) The largest config.notif_max_bytes: notifications longer than
 * TCPX_P2P_NOTIF_MAX up to the peer's notif_max_bytes go out with
 * tcpx_p2p_notify and a write's params alike, and are taken with
 * tcpx_p2p_notif_take. */
#define TCPX_P2P_NOTIF_LIMIT (16 << 20)

/* Options of one transfer call.  NULL = the defaults; a caller sets
 * struct_size to sizeof(tcpx_p2p_xfer_params) as it compiled it, so that
 * fields added later keep their defaults for it. */
typedef struct tcpx_p2p_xfer_params {
	size_t struct_size;
	unsigned flags;     /* 0 (reserved) */
	const void *notif;  /* write: message delivered to the target once the data is
			     * there (tcpx_p2p_notif_poll); NULL = none */
	size_t notif_len;   /* 1..the peer's notif_max_bytes when notif is set */
	uint64_t user_data; /* (0.10) any value, handed back with the transfer's
			     * completion (tcpx_p2p_completions) */
	/* (0.10) A cudaEvent_t of the session's GPU, or NULL: the transfer
	 * (sendv, write, read; not recvv) is queued at once and starts only
	 * once the event has completed.  The event is queried (never waited
	 * on) by whatever drives the connection's progress: a progress thread,
	 * or the caller's test/wait/progress calls.  A transfer posted after a
	 * gated one on the same connection, gated or not, and a notify, wait
	 * their turn behind it: announcements keep posting order.  What the
	 * post can refuse (EAGAIN, EINVAL) it refuses at once; an event that
	 * failed (an error on its stream, an invalid handle) fails that
	 * transfer alone with ECUDA (a send still goes out in its turn, every
	 * chunk empty: the peer's receive it meets ends ECANCELED).  The event
	 * is not retained: it must stay
	 * valid until the transfer has started or ended (docs/api.md, "Posting
	 * on a GPU event"). */
	void *event;
} tcpx_p2p_xfer_params;

/* Two-sided transfer of a list of segments, any count, any sizes (0-byte
 * segments allowed).  The segments are packed back to back into the
 * connection's chunk stream, so a transfer costs about total / chunk_bytes
 * plugin requests whatever its segment count.  All segments of one call
 * must be of one memory type; they may not overlap (receives).  The two
 * sides' lists may differ; their totals must match: a sendv/recvv (or
 * send/recv) pair of different totals fails with EPROTO on both sides and
 * writes nothing into the receiver's segments, and the connection stays
 * usable.  A send completes when its bytes are on the wire and the
 * receiver matched it; a receive when every byte is in its segments.
 * With params->event (0.10; sendv only) the send is queued at once and
 * starts once the event completed (tcpx_p2p_xfer_params).
 * RETURN VALUE: 0; EINVAL (NULL argument with nsegs > 0, a segment outside
 * its mr, mrs of another session or of mixed memory types, params, an event
 * on recvv); EAGAIN (sendv: as tcpx_p2p_write); ENOTSUP (an event on a
 * session without a GPU); the connection's error; ENOMEM. */
TCPX_P2P_API int tcpx_p2p_sendv(tcpx_p2p_conn *c, const tcpx_p2p_seg *segs, size_t nsegs,
				const tcpx_p2p_xfer_params *params, tcpx_p2p_xfer **out);
TCPX_P2P_API int tcpx_p2p_recvv(tcpx_p2p_conn *c, const tcpx_p2p_seg *segs, size_t nsegs,
				const tcpx_p2p_xfer_params *params, tcpx_p2p_xfer **out);

/* ---- remote memory and one-sided transfers (0.3) ------------------------ */

/* A region (or part of one) exported to one peer: an opaque, fixed-size
 * descriptor the application carries to that peer by its own means. */
#define TCPX_P2P_RDESC_SIZE 64
typedef struct tcpx_p2p_rdesc {
	unsigned char bytes[TCPX_P2P_RDESC_SIZE];
} tcpx_p2p_rdesc;

enum tcpx_p2p_access {
	TCPX_P2P_ACCESS_WRITE = 1, /* the peer may tcpx_p2p_write into it */
	TCPX_P2P_ACCESS_READ = 2,  /* the peer may tcpx_p2p_read from it */
};

/* Export [mr + offset, + len) to the peer of c with the given access
 * (TCPX_P2P_ACCESS_* bits).  The peer's one-sided transfers are checked
 * against it on this side: a segment outside it, of another access, or
 * after tcpx_p2p_mr_deregister (which revokes every export of the region)
 * is refused with nothing written.
 * RETURN VALUE: 0; EINVAL (NULL argument, range outside mr, access 0 or
 * unknown bits, mr of another session); ENOMEM; the connection's error. */
TCPX_P2P_API int tcpx_p2p_mr_export(tcpx_p2p_conn *c, tcpx_p2p_mr *mr, size_t offset, size_t len,
				    unsigned access, tcpx_p2p_rdesc *out);

/* Revoke one export of c (desc as tcpx_p2p_mr_export gave it) at once: a
 * peer's transfer that names it and is not yet under way here is refused
 * (EINVAL at the peer, nothing written or read); one already under way (its
 * data moving, the region held) finishes.  Again on a revoked export: 0.
 * The region stays registered and its other exports stay valid.
 * RETURN VALUE: 0; EINVAL (NULL argument, not an export of c) (0.5). */
TCPX_P2P_API int tcpx_p2p_mr_unexport(tcpx_p2p_conn *c, const tcpx_p2p_rdesc *desc);

/* A peer's exported region, imported on the connection to that peer. */
typedef struct tcpx_p2p_rmr tcpx_p2p_rmr;

/* Import a descriptor the peer of c exported to this side.  Only its form
 * is checked here; the exporter checks every transfer against its exports
 * to this connection (a descriptor exported on another one is refused
 * there, EINVAL).  RETURN VALUE: 0; EPROTO (not a region descriptor of this
 * version); EINVAL (NULL argument); ENOMEM. */
TCPX_P2P_API int tcpx_p2p_rmr_import(tcpx_p2p_conn *c, const tcpx_p2p_rdesc *desc,
				     tcpx_p2p_rmr **out);
/* Length, memory type and access of an imported region (any may be NULL). */
TCPX_P2P_API int tcpx_p2p_rmr_query(const tcpx_p2p_rmr *r, size_t *len, int *mem_type,
				    unsigned *access);
/* RETURN VALUE: 0.  Transfers already posted with it are unaffected. */
TCPX_P2P_API int tcpx_p2p_rmr_release(tcpx_p2p_rmr *r);

/* One piece of a peer's memory: len bytes at rmr + offset. */
typedef struct tcpx_p2p_rseg {
	const tcpx_p2p_rmr *rmr;
	size_t offset;
	size_t len;
} tcpx_p2p_rseg;

/* One-sided WRITE: the local segments' bytes, packed, land in the remote
 * segments (their totals must be equal).  The peer's progress engine (its
 * test/wait/progress calls or its progress thread) receives them; the
 * peer's application posts nothing.  The transfer completes when the
 * target reported every byte in place (and delivered params->notif after
 * them).  The rmrs must belong to c.  Transfers on a connection are taken
 * in posting order, one-sided and two-sided alike (a WRITE posted after a
 * send waits until the peer posted the matching receive; a READ sees every
 * WRITE posted before it), but the bytes of two transfers in flight at once
 * may land in either order: wait for the first (or its notification)
 * before writing the same remote bytes again.
 * RETURN VALUE: 0; EINVAL (arguments, totals, a remote segment outside its
 * rmr or lacking the access, more than config.peer_max_segments remote
 * segments, an announcement over half of config.peer_max_ctl_bytes); EAGAIN
 * (its announcement would take the control bytes waiting for the peer past
 * half of config.peer_max_ctl_bytes, or, with params->notif, the peer holds
 * its peer_max_notifs notifications of c not yet taken: drive progress,
 * post again; (0.13) c is being re-dialled: tcpx_p2p_conn_generation);
 * EPEERRESTART (0.13: an rmr imported before c was re-established);
 * ENOTSUP (params->event on a session without a GPU); the connection's
 * error; ENOMEM.  With params->event (0.10) the transfer is
 * queued at once and starts once the event completed; an event that fails
 * fails it later with ECUDA (tcpx_p2p_xfer_params).  The target's refusal
 * (a segment it does not export, a revoked export, a deregistered region, a
 * write that arrived short) fails the transfer with EINVAL, and then
 * nothing of it was written. */
TCPX_P2P_API int tcpx_p2p_write(tcpx_p2p_conn *c, const tcpx_p2p_seg *local, size_t nlocal,
				const tcpx_p2p_rseg *remote, size_t nremote,
				const tcpx_p2p_xfer_params *params, tcpx_p2p_xfer **out);
/* One-sided READ: the remote segments' bytes land, packed, in the local
 * segments.  Completes when every byte is in local memory.  params->notif
 * must be NULL.  Errors as tcpx_p2p_write. */
TCPX_P2P_API int tcpx_p2p_read(tcpx_p2p_conn *c, const tcpx_p2p_seg *local, size_t nlocal,
			       const tcpx_p2p_rseg *remote, size_t nremote,
			       const tcpx_p2p_xfer_params *params, tcpx_p2p_xfer **out);

/* ---- prepared transfer lists (0.10) --------------------------------------- */

/* A WRITE or READ prepared once and posted many times: the segment lists
 * checked against their regions and imports and the request encoded at
 * prepare, so that a post does no per-segment work of its own. */
typedef struct tcpx_p2p_xlist tcpx_p2p_xlist;

enum tcpx_p2p_xlist_op {
	TCPX_P2P_XLIST_WRITE = 1, /* each post is a tcpx_p2p_write of the lists */
	TCPX_P2P_XLIST_READ = 2,  /* each post is a tcpx_p2p_read of the lists */
};

/* count blocks of len bytes, block i at base + i * stride of a region (an
 * mr, or a peer's export): a block table's layer, a strided descriptor. */
typedef struct tcpx_p2p_strided {
	size_t base;
	size_t stride; /* at least len when count > 1: blocks never overlap */
	size_t count;  /* 1.. */
	size_t len;    /* 1.. */
} tcpx_p2p_strided;

/* Prepare a WRITE or READ (op: TCPX_P2P_XLIST_*) of these local and remote
 * segments on c, checked as tcpx_p2p_write checks them and more: the
 * remote segments must also be of one memory type.  The lists are copied;
 * the caller's arrays and rmrs may go once this returns.  The list holds
 * every region its local segments name: tcpx_p2p_mr_deregister of one is
 * EBUSY until tcpx_p2p_xlist_release.  The peer checks every post against
 * its exports as it checks any write or read, so an export withdrawn
 * (tcpx_p2p_mr_unexport) or a region the peer deregistered after prepare
 * fails that post with EINVAL and nothing written or read.  flags: 0.
 * Thread rules: as tcpx_p2p_write.
 * RETURN VALUE: 0; EINVAL (op, flags, arguments, totals, a segment outside
 * its mr or export, mrs of another session, rmrs of another connection,
 * lacking the access, host and CUDA memory on one side, more than
 * config.peer_max_segments remote segments); the connection's error;
 * ENOMEM.  Nothing is held on failure. */
TCPX_P2P_API int tcpx_p2p_xlist_prepare(tcpx_p2p_conn *c, int op, const tcpx_p2p_seg *local,
					size_t nlocal, const tcpx_p2p_rseg *remote,
					size_t nremote, unsigned flags, tcpx_p2p_xlist **out);

/* The same of a strided block list on each side: local blocks of mr,
 * remote blocks of rmr, their totals (count x len) equal.  RETURN VALUE: as
 * tcpx_p2p_xlist_prepare; EINVAL also for count or len 0, a stride below
 * len with count > 1, and base + stride x (count - 1) + len overflowing or
 * past the end of the mr or export. */
TCPX_P2P_API int tcpx_p2p_xlist_prepare_strided(tcpx_p2p_conn *c, int op, tcpx_p2p_mr *mr,
						const tcpx_p2p_strided *local,
						const tcpx_p2p_rmr *rmr,
						const tcpx_p2p_strided *remote, unsigned flags,
						tcpx_p2p_xlist **out);

/* Post the prepared transfer: one tcpx_p2p_write or tcpx_p2p_read of its
 * lists, with these params (a WRITE's notification; NULL = none), and an
 * xfer of its own to test, wait and release.  A list may be posted again
 * while earlier posts are in flight (their bytes may land in either order,
 * as for any two writes).  Thread rules: as tcpx_p2p_write; one list may be
 * posted from several threads, never while it is being released.
 * RETURN VALUE: as tcpx_p2p_write (EINVAL also for a NULL list). */
TCPX_P2P_API int tcpx_p2p_xlist_post(tcpx_p2p_xlist *l, const tcpx_p2p_xfer_params *params,
				     tcpx_p2p_xfer **out);

/* Release a prepared list and its hold on its regions.  Transfers posted
 * from it are its own and finish unaffected (they hold the regions they
 * use until they end).  A list outlives its connection only to be released
 * (before tcpx_p2p_session_destroy): never post it after
 * tcpx_p2p_conn_destroy.  RETURN VALUE: 0; EINVAL (NULL). */
TCPX_P2P_API int tcpx_p2p_xlist_release(tcpx_p2p_xlist *l);

/* ---- notifications (0.3) -------------------------------------------------- */

/* Send a message of 1..TCPX_P2P_NOTIF_MAX bytes to the peer's session, or
 * (0.7) up to the peer's config.notif_max_bytes (64 KiB by default; the
 * peer takes one over TCPX_P2P_NOTIF_MAX with tcpx_p2p_notif_take).  It
 * is delivered after the data of every transfer posted before it on c in
 * this direction (two-sided or WRITE) is in place at the peer.  Each
 * started KiB counts as one of the peer's peer_max_notifs.
 * RETURN VALUE: 0; EINVAL (NULL, len 0, longer than the peer's
 * notif_max_bytes, or counting more KiB than its peer_max_notifs); EAGAIN
 * (as tcpx_p2p_write: control bytes waiting, or the peer's peer_max_notifs
 * not yet taken there; nothing was sent: drive progress and post again);
 * the connection's error; ENOMEM. */
TCPX_P2P_API int tcpx_p2p_notify(tcpx_p2p_conn *c, const void *msg, size_t len);

typedef struct tcpx_p2p_notif {
	tcpx_p2p_conn *conn; /* the connection it came on (valid while it lives) */
	size_t len;
	unsigned char msg[TCPX_P2P_NOTIF_MAX];
} tcpx_p2p_notif;

/* Take up to max delivered notifications of the session, oldest first
 * (per connection in the peer's posting order); *n is how many.  Drives
 * the session once first (unless a progress thread does).  Never blocks.
 * One of len 0 is the library's own (0.5): its conn failed, after what it
 * delivered before; tcpx_p2p_progress(conn) gives the error.  A conn holds
 * at most config.peer_max_notifs (KiB, 0.7) not yet taken: the peer's notify returns
 * EAGAIN until this side has taken some; a peer that sends one more all
 * the same fails the conn (EPROTO).
 * (0.10) A notification longer than TCPX_P2P_NOTIF_MAX is left for
 * tcpx_p2p_notif_take, and with it the later ones of its connection (so
 * that each connection's order holds); other connections' notifications
 * are taken past it.  The return value counts the connections that wait
 * so (among the notifications looked at before max was reached).
 * RETURN VALUE: 0, or (0.10) the number of connections whose next
 * notification waits for tcpx_p2p_notif_take; EINVAL.  (A binary built
 * against 0.3 to 0.8 gets 0 there, and the same skipping.) */
TCPX_P2P_API int tcpx_p2p_notif_poll(tcpx_p2p_session *s, tcpx_p2p_notif *out, int max, int *n);

/* (0.7) A notification of any length, into the caller's buffer. */
typedef struct tcpx_p2p_notif_buf {
	size_t struct_size;   /* sizeof(tcpx_p2p_notif_buf) as the caller compiled it */
	void *buf;            /* in: where the message goes */
	size_t cap;           /* in: bytes at buf */
	tcpx_p2p_conn *conn;  /* out: the connection it came on (valid while it lives) */
	size_t len;           /* out: its length (0: the library's own, conn failed) */
} tcpx_p2p_notif_buf;

/* Take the oldest delivered notification of the session, of any length up
 * to this side's config.notif_max_bytes, into nb->buf: *got = 1, nb->conn
 * and nb->len set; *got = 0 when none waits.  Drives the session once
 * first (unless a progress thread does); never blocks.  tcpx_p2p_notif_poll
 * leaves a notification longer than TCPX_P2P_NOTIF_MAX (and its
 * connection's later ones) for this call; the two may be mixed, and take
 * from the same queue.
 * RETURN VALUE: 0; EINVAL (NULL s, nb or got, struct_size too small, NULL
 * buf with cap > 0; or cap smaller than the oldest notification: nb->len
 * is then its length, and nothing was taken). */
TCPX_P2P_API int tcpx_p2p_notif_take(tcpx_p2p_session *s, tcpx_p2p_notif_buf *nb, int *got);

/* ---- completions for event loops (0.10) ---------------------------------- */

/* A transfer of the application's that has ended (tcpx_p2p_completions). */
typedef struct tcpx_p2p_completion {
	tcpx_p2p_xfer *xfer; /* still the caller's: release it as ever */
	uint64_t user_data;  /* its params.user_data (0 for send and recv) */
	int status;          /* 0, or the error tcpx_p2p_wait would return (the
			      * detail: tcpx_p2p_wait(xfer, 0)) */
} tcpx_p2p_completion;

/* A file descriptor of the session (an eventfd) that becomes readable when
 * a transfer of the session ends (completes or fails, whatever ends it:
 * its last chunk, its connection's failure or destruction) or a
 * notification arrives; tcpx_p2p_completions clears it.  For epoll, poll,
 * asyncio's add_reader, libuv's uv_poll: wait for readable, then call
 * tcpx_p2p_completions until it returns fewer than max, and take
 * notifications (tcpx_p2p_notif_poll / _take) if you use them: the fd says
 * "something happened since the last clear", not what.  It reports what the
 * session's passes find: with config.progress_thread they run by
 * themselves; without it, drive the session (any wait, test, progress or
 * tcpx_p2p_completions call) whenever transfers are pending, or only the
 * keepalive thread's occasional passes will find their ends.  The fd is
 * the session's: never read, write or close it; it is closed by
 * tcpx_p2p_session_destroy.  The same fd on every call.
 * RETURN VALUE: 0; EINVAL (NULL argument); ENET (eventfd failed). */
TCPX_P2P_API int tcpx_p2p_session_fd(tcpx_p2p_session *s, int *fd);

/* Take up to max ended transfers of the session, in the order they ended,
 * into out; *n is how many (fewer than max: none is left).  Every transfer
 * of the application's is queued when it ends, whether or not anybody
 * takes completions, and leaves the queue when taken here or released
 * (tcpx_p2p_xfer_release), whichever comes first: test and wait still
 * work, and a caller that never calls this pays one list insertion per
 * transfer.  Clears the session fd; drives the session once first (unless
 * a progress thread does).  Never blocks.  Thread-safe: each ended
 * transfer is returned to exactly one caller.
 * RETURN VALUE: 0; EINVAL (NULL s or n, max < 0, NULL out with max > 0). */
TCPX_P2P_API int tcpx_p2p_completions(tcpx_p2p_session *s, tcpx_p2p_completion *out, int max,
				      int *n);

/* ---- statistics (0.7) ---------------------------------------------------- */

/* Failures are counted by error code: failed_by[-code], codes down to
 * -(TCPX_P2P_STATS_NERR - 1); [0] counts any other. */
#define TCPX_P2P_STATS_NERR 16

/* Counters of a connection, or of a session (its connections, live and
 * destroyed, added up), since they began.  "out" is towards the peer (a
 * send, a WRITE, the bytes a peer READs from here), "in" from it (a
 * receive, a READ, a peer's WRITE landing here).  Latencies are the upper
 * bounds of a log-scale histogram's buckets (within 25 %), 0 while there
 * is no sample.  New fields are appended: set struct_size. */
typedef struct tcpx_p2p_stats {
	size_t struct_size;       /* sizeof(tcpx_p2p_stats) as the caller compiled it */
	int conns;                /* connections counted (1 for a connection) */
	uint64_t xfers_out, xfers_in;   /* transfers completed, the library's own
					 * (a peer's WRITE or READ served here) included */
	uint64_t bytes_out, bytes_in;   /* their bytes */
	uint64_t chunks_out, chunks_in; /* their plugin requests (chunks) */
	uint64_t notifs_out, notifs_in; /* notifications sent; delivered here */
	uint64_t failed;                /* transfers that failed */
	uint64_t failed_by[TCPX_P2P_STATS_NERR];
	uint64_t stalls;                /* transfers found stalled (config.stall_ms), each
					 * time it happened */
	uint64_t heartbeats_sent, heartbeats_recv;
	uint64_t heartbeats_missed;     /* heartbeat_ms intervals of silence past the
					 * first, counted once each (see "Liveness") */
	uint64_t windows_full;          /* passes that found a chunk ready and its
					 * channel's window full */
	uint64_t req_samples;           /* data send requests timed: isend to test() done */
	uint64_t req_ns_p50, req_ns_p90, req_ns_p99;
	uint64_t xfer_samples;          /* transfers timed: post to completion */
	uint64_t xfer_ns_p50, xfer_ns_p90, xfer_ns_p99;
	/* Added in 0.9: chunks_out and chunks_in by the channel that carried
	 * them (index i: data channel i; a session adds its conns' up). */
	uint64_t chunks_out_by_channel[TCPX_P2P_MAX_CHANNELS];
	uint64_t chunks_in_by_channel[TCPX_P2P_MAX_CHANNELS];
	/* Added in 0.10: the peer's notifications that were never delivered
	 * here because the connection failed or closed before the transfers
	 * announced ahead of them landed (docs/api.md, "Notifications"). */
	uint64_t notifs_dropped;
	/* Added in 0.10: received chunks that landed in a receive posted
	 * before their transfer's announcement was matched on this side (a
	 * plugin that receives into bounce pages; docs/api.md, "Statistics"). */
	uint64_t chunks_in_ahead;
	/* Added in 0.11: the peer's transfers hosted here (its WRITE landing
	 * here, its READ served from here) found stalled (config.stall_ms),
	 * each time it happened; stalls counts this side's own transfers
	 * (docs/reliability.md, "Stalled incoming transfers"). */
	uint64_t in_stalls;
} tcpx_p2p_stats;

/* Fill *out (its struct_size bytes at most, set by the caller; struct_size
 * is then what was written) with c's counters, or those of every
 * connection s has had.  Thread-safe; takes each connection's lock
 * briefly, so it never runs inside a pass.
 * RETURN VALUE: 0; EINVAL (NULL argument, struct_size smaller than
 * offsetof(tcpx_p2p_stats, xfers_out)). */
TCPX_P2P_API int tcpx_p2p_conn_stats(tcpx_p2p_conn *c, tcpx_p2p_stats *out);
TCPX_P2P_API int tcpx_p2p_session_stats(tcpx_p2p_session *s, tcpx_p2p_stats *out);

#ifdef __cplusplus
}
#endif

#endif
