#include "tcpx_exchange.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

namespace {

const char frame_magic[4] = {'T', 'X', 'N', '1'};
const uint32_t max_name = 4096;
const uint32_t max_blob = 65536;

using steady = std::chrono::steady_clock;

int msLeft(steady::time_point end)
{
	auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - steady::now());
	return left.count() < 0 ? 0 : static_cast<int>(left.count());
}

/* Moves all n bytes or fails: ETIMEDOUT at the deadline, ECLOSED when the
 * peer closed, ENET on a socket error. */
int io(int fd, void *buf, size_t n, bool out, steady::time_point end, std::string &why)
{
	auto *p = static_cast<char *>(buf);
	while (n) {
		struct pollfd pfd = {fd, static_cast<short>(out ? POLLOUT : POLLIN), 0};
		int r = poll(&pfd, 1, msLeft(end));
		if (r == 0) {
			why = "no answer in time";
			return TCPX_P2P_ETIMEDOUT;
		}
		if (r < 0 && errno != EINTR) {
			why = std::string("poll: ") + strerror(errno);
			return TCPX_P2P_ENET;
		}
		if (r < 0)
			continue;
		ssize_t k = out ? send(fd, p, n, MSG_NOSIGNAL) : recv(fd, p, n, 0);
		if (k == 0) {
			why = "the peer closed the connection";
			return TCPX_P2P_ECLOSED;
		}
		if (k < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			why = std::string(out ? "send: " : "recv: ") + strerror(errno);
			return TCPX_P2P_ENET;
		}
		p += k;
		n -= static_cast<size_t>(k);
	}
	return TCPX_P2P_OK;
}

void put32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = static_cast<unsigned char>(v >> (8 * i));
}

uint32_t get32(const unsigned char *p)
{
	return p[0] | p[1] << 8 | p[2] << 16 | static_cast<uint32_t>(p[3]) << 24;
}

int sendFrame(int fd, const std::string &name, const void *blob, size_t blob_len,
	      steady::time_point end, std::string &why)
{
	std::string f(frame_magic, sizeof(frame_magic));
	unsigned char len[8];
	put32(len, static_cast<uint32_t>(name.size()));
	put32(len + 4, static_cast<uint32_t>(blob_len));
	f.append(reinterpret_cast<const char *>(len), sizeof(len));
	f += name;
	f.append(static_cast<const char *>(blob), blob_len);
	return io(fd, f.data(), f.size(), true, end, why);
}

int recvFrame(int fd, std::string &name, std::string &blob, steady::time_point end,
	      std::string &why)
{
	unsigned char head[12];
	int rc = io(fd, head, sizeof(head), false, end, why);
	if (rc)
		return rc;
	uint32_t nlen = get32(head + 4), blen = get32(head + 8);
	if (memcmp(head, frame_magic, sizeof(frame_magic)) != 0 || nlen > max_name ||
	    blen > max_blob || blen == 0) {
		why = "not a TCPX NIXL backend peer (bad frame)";
		return TCPX_P2P_EPROTO;
	}
	name.resize(nlen);
	blob.resize(blen);
	rc = io(fd, name.data(), nlen, false, end, why);
	if (!rc)
		rc = io(fd, blob.data(), blen, false, end, why);
	return rc;
}

/* Both sides: the blobs are swapped; connect with the peer's. */
int connectWith(tcpx_p2p_listener *l, const std::string &peer_blob, steady::time_point end,
		tcpx_p2p_conn **out, std::string &why)
{
	int rc = tcpx_p2p_connect(l, peer_blob.data(), peer_blob.size(), msLeft(end) + 1, out);
	if (rc) {
		why = std::string("connect: ") + tcpx_p2p_last_error();
		tcpx_p2p_listener_destroy(l);
	}
	return rc;
}

int listenerBlob(tcpx_p2p_session *s, tcpx_p2p_listener **l, const void **blob, size_t *len,
		 std::string &why)
{
	int rc = tcpx_p2p_listen(s, l);
	if (!rc) {
		rc = tcpx_p2p_listener_blob(*l, blob, len);
		if (rc)
			tcpx_p2p_listener_destroy(*l);
	}
	if (rc)
		why = std::string("listen: ") + tcpx_p2p_last_error();
	return rc;
}

} // namespace

int tcpxExchangeListen(const std::string &bind_addr, uint16_t port, int *fd,
		       uint16_t *bound_port, std::string &why)
{
	struct sockaddr_in a = {};
	a.sin_family = AF_INET;
	a.sin_port = htons(port);
	a.sin_addr.s_addr = htonl(INADDR_ANY);
	if (!bind_addr.empty() && inet_pton(AF_INET, bind_addr.c_str(), &a.sin_addr) != 1) {
		why = "bind_addr " + bind_addr + " is not an IPv4 address";
		return -1;
	}
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	int one = 1;
	socklen_t alen = sizeof(a);
	if (s < 0 || setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
	    bind(s, reinterpret_cast<struct sockaddr *>(&a), sizeof(a)) != 0 ||
	    listen(s, 128) != 0 ||
	    getsockname(s, reinterpret_cast<struct sockaddr *>(&a), &alen) != 0) {
		why = std::string("listening socket on ") +
		      (bind_addr.empty() ? "*" : bind_addr) + ":" + std::to_string(port) + ": " +
		      strerror(errno);
		if (s >= 0)
			close(s);
		return -1;
	}
	*fd = s;
	*bound_port = ntohs(a.sin_port);
	return 0;
}

int tcpxExchangeDial(tcpx_p2p_session *s, const std::string &host, uint16_t port,
		     const std::string &local_agent, int timeout_ms, tcpx_p2p_conn **out,
		     std::string &why)
{
	auto end = steady::now() + std::chrono::milliseconds(timeout_ms);
	struct addrinfo hints = {}, *ai = nullptr;
	hints.ai_family = AF_INET;
	hints.ai_socktype = SOCK_STREAM;
	int g = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &ai);
	if (g != 0) {
		why = "resolving " + host + ": " + gai_strerror(g);
		return TCPX_P2P_EINVAL;
	}
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	int rc = TCPX_P2P_OK;
	if (fd < 0 || (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS)) {
		why = std::string("connect: ") + strerror(errno);
		rc = TCPX_P2P_ENET;
	}
	freeaddrinfo(ai);
	if (!rc) {
		struct pollfd pfd = {fd, POLLOUT, 0};
		int err = 0;
		socklen_t elen = sizeof(err);
		if (poll(&pfd, 1, msLeft(end)) != 1 ||
		    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) != 0 || err != 0) {
			why = std::string("connect: ") + (err ? strerror(err) : "no answer in time");
			rc = err ? TCPX_P2P_ENET : TCPX_P2P_ETIMEDOUT;
		}
	}
	tcpx_p2p_listener *l = nullptr;
	const void *blob;
	size_t blob_len;
	std::string peer_name, peer_blob;
	if (!rc)
		rc = listenerBlob(s, &l, &blob, &blob_len, why);
	if (!rc) {
		rc = sendFrame(fd, local_agent, blob, blob_len, end, why);
		if (!rc)
			rc = recvFrame(fd, peer_name, peer_blob, end, why);
		if (rc)
			tcpx_p2p_listener_destroy(l);
		else
			rc = connectWith(l, peer_blob, end, out, why);
	}
	if (fd >= 0)
		close(fd);
	return rc;
}

int tcpxExchangeServe(tcpx_p2p_session *s, int fd, int timeout_ms, std::string &peer_agent,
		      tcpx_p2p_conn **out, std::string &why)
{
	auto end = steady::now() + std::chrono::milliseconds(timeout_ms);
	std::string name, peer_blob;
	tcpx_p2p_listener *l = nullptr;
	const void *blob;
	size_t blob_len;
	int rc = recvFrame(fd, name, peer_blob, end, why);
	if (!rc)
		rc = listenerBlob(s, &l, &blob, &blob_len, why);
	if (!rc) {
		rc = sendFrame(fd, "", blob, blob_len, end, why);
		if (rc)
			tcpx_p2p_listener_destroy(l);
		else
			rc = connectWith(l, peer_blob, end, out, why);
	}
	close(fd);
	if (!rc)
		peer_agent = name;
	return rc;
}
