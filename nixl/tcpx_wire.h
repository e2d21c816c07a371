/* What the plugin puts into NIXL's metadata and sends on its connections.
 *
 * Connection info (getConnInfo): where this agent's rendezvous server
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

struct tcpxRegionInfo {
	uint64_t id = 0;   /* the registering engine's number for it */
	uint64_t base = 0; /* its address in the owner's process */
	uint64_t len = 0;
	int mem_type = 0;  /* TCPX_P2P_MEM_* */
};

enum class tcpxMsg : unsigned char {
	hello = 'H',    /* dialer -> acceptor: the dialer's agent name */
	exported = 'E', /* acceptor -> dialer: region id + export descriptor */
	revoked = 'R',  /* acceptor -> dialer: region id, deregistered */
	user = 'U',     /* a NIXL notification */
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
