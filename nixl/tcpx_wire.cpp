#include "tcpx_wire.h"

#include <cstring>
#include <sstream>

namespace {

const char conn_magic[] = "TCPX1";
const char region_magic[4] = {'T', 'P', 'R', '1'};
const size_t region_size = sizeof(region_magic) + 4 * 8 + 1;

void put64(std::string &s, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t get64(const unsigned char *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

} // namespace

std::string tcpxEncodeConnInfo(const tcpxConnInfo &info)
{
	return std::string(conn_magic) + " " + info.host + " " + std::to_string(info.port);
}

bool tcpxDecodeConnInfo(const std::string &s, tcpxConnInfo &out)
{
	std::istringstream in(s);
	std::string magic, host;
	long port = -1;
	std::string rest;
	if (!(in >> magic >> host >> port) || magic != conn_magic || (in >> rest))
		return false;
	if (port <= 0 || port > 65535 || host.empty() || host.size() > 255)
		return false;
	out.host = host;
	out.port = static_cast<uint16_t>(port);
	return true;
}

std::string tcpxEncodeRegion(const tcpxRegionInfo &r)
{
	std::string s(region_magic, sizeof(region_magic));
	put64(s, r.id);
	put64(s, r.base);
	put64(s, r.len);
	put64(s, r.piece);
	s.push_back(static_cast<char>(r.mem_type));
	return s;
}

bool tcpxDecodeRegion(const std::string &s, tcpxRegionInfo &out)
{
	const auto *p = reinterpret_cast<const unsigned char *>(s.data());
	if (s.size() != region_size || memcmp(p, region_magic, sizeof(region_magic)) != 0)
		return false;
	p += sizeof(region_magic);
	tcpxRegionInfo r;
	r.id = get64(p);
	r.base = get64(p + 8);
	r.len = get64(p + 16);
	r.piece = get64(p + 24);
	r.mem_type = p[32];
	if (r.len == 0 || r.base + r.len < r.base || r.piece < 4096 || r.piece > (1ull << 30) ||
	    (r.piece & (r.piece - 1)) != 0 ||
	    (r.mem_type != TCPX_P2P_MEM_HOST && r.mem_type != TCPX_P2P_MEM_CUDA))
		return false;
	out = r;
	return true;
}

std::string tcpxEncodeMsg(tcpxMsg type, const void *body, size_t len)
{
	std::string s(1, static_cast<char>(type));
	s.append(static_cast<const char *>(body), len);
	return s;
}

std::string tcpxEncodeExported(uint64_t id, const tcpx_p2p_rdesc &desc)
{
	std::string body;
	put64(body, id);
	body.append(reinterpret_cast<const char *>(desc.bytes), sizeof(desc.bytes));
	return tcpxEncodeMsg(tcpxMsg::exported, body.data(), body.size());
}

std::string tcpxEncodeRevoked(uint64_t id)
{
	std::string body;
	put64(body, id);
	return tcpxEncodeMsg(tcpxMsg::revoked, body.data(), body.size());
}

bool tcpxDecodeExported(const unsigned char *body, size_t len, uint64_t &id,
			tcpx_p2p_rdesc &desc)
{
	if (len != 8 + sizeof(desc.bytes))
		return false;
	id = get64(body);
	memcpy(desc.bytes, body + 8, sizeof(desc.bytes));
	return true;
}

bool tcpxDecodeRevoked(const unsigned char *body, size_t len, uint64_t &id)
{
	if (len != 8)
		return false;
	id = get64(body);
	return true;
}
