/* What the plugin puts into NIXL's metadata and sends on its connections.
 *
 * Connection info (getConnInfo): where this agent's connection set-up socket
 * listens, "TCPX1 <host> <port>".  Public data of a registration
 * (getPublicData): the region's number, base, length and memory type.
 * Control messages ride on the connections as notifications of the
 * library; their first byte says what they are (tcpxMsg). */
#ifndef TCPX_NIXL_WIRE_H
#define TCPX_NIXL_WIRE_H

#include <cstddef>
#include <cstdint>
#include <string>

#include <tcpx_p2p.h>

struct tcpxConnInfo {
	std::string host;
	uint16_t port = 0;
};

/* A NIXL registration.  It is registered with the library, exported and
 * imported as pieces cut at the multiples of `piece` bytes (absolute
 * addresses), piece k numbered id + k: ABI v7 plugins (TCPX) register
 * less than 2 GiB at a time, and NIXL users register whole KV caches. */
struct tcpxRegionInfo {
	uint64_t id = 0;    /* the registering engine's number for its piece 0 */
	uint64_t base = 0;  /* its address in the owner's process */
	uint64_t len = 0;
	uint64_t piece = 0; /* a power of two, 4 KiB .. 1 GiB */
	int mem_type = 0;   /* TCPX_P2P_MEM_* */

	uint64_t pieceCount() const { return (base + len - 1) / piece - base / piece + 1; }
	uint64_t pieceOf(uint64_t addr) const { return addr / piece - base / piece; }
	uint64_t pieceStart(uint64_t k) const
	{
		uint64_t a = (base / piece + k) * piece;
		return a < base ? base : a;
	}
	uint64_t pieceEnd(uint64_t k) const
	{
		uint64_t a = (base / piece + k + 1) * piece;
		return a > base + len ? base + len : a;
	}
};

const uint64_t tcpx_piece_bytes = 1ull << 30;

enum class tcpxMsg : unsigned char {
	exported = 'E', /* acceptor -> dialer: region id + export descriptor */
	revoked = 'R',  /* acceptor -> dialer: region id, deregistered */
	user = 'U',     /* a NIXL notification */
	synced = 'S',   /* acceptor -> dialer: every region registered when it
			 * accepted has been exported (later ones follow) */
};

std::string tcpxEncodeConnInfo(const tcpxConnInfo &info);
bool tcpxDecodeConnInfo(const std::string &s, tcpxConnInfo &out);

std::string tcpxEncodeRegion(const tcpxRegionInfo &r);
bool tcpxDecodeRegion(const std::string &s, tcpxRegionInfo &out);

/* A control message: its type byte, then body. */
std::string tcpxEncodeMsg(tcpxMsg type, const void *body, size_t len);
std::string tcpxEncodeExported(uint64_t id, const tcpx_p2p_rdesc &desc);
std::string tcpxEncodeRevoked(uint64_t id);
bool tcpxDecodeExported(const unsigned char *body, size_t len, uint64_t &id,
			tcpx_p2p_rdesc &desc);
bool tcpxDecodeRevoked(const unsigned char *body, size_t len, uint64_t &id);

#endif
