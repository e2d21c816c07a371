/* The side channel of the library's blob exchange (tcpx_p2p_listen /
 * tcpx_p2p_connect) between two NIXL agents.
 *
 * NIXL publishes one connection info per agent for all its peers, while a
 * listener blob serves exactly one peer; so the info names a TCP socket of
 * the engine, and a connection is made over it: the dialing agent sends
 * its name and a fresh listener's blob, the other answers with its own,
 * and both call tcpx_p2p_connect at once.  A frame is "TXN1", the name's
 * and the blob's lengths (32-bit little endian), the name, the blob. */
#ifndef TCPX_NIXL_EXCHANGE_H
#define TCPX_NIXL_EXCHANGE_H

#include <cstdint>
#include <string>

#include <tcpx_p2p.h>

/* A listening TCP socket on bind_addr (empty: all) and port (0: any).
 * 0 and *fd, *bound_port; else -1 with the reason in `why`. */
int tcpxExchangeListen(const std::string &bind_addr, uint16_t port, int *fd,
		       uint16_t *bound_port, std::string &why);

/* The dialing side: a connection to the agent serving host:port.
 * 0 or a TCPX_P2P_E* code, with the reason in `why`. */
int tcpxExchangeDial(tcpx_p2p_session *s, const std::string &host, uint16_t port,
		     const std::string &local_agent, int timeout_ms, tcpx_p2p_conn **out,
		     std::string &why);

/* The serving side, on a socket accepted from the listening one (closed
 * here): the dialer's name and the connection. */
int tcpxExchangeServe(tcpx_p2p_session *s, int fd, int timeout_ms, std::string &peer_agent,
		      tcpx_p2p_conn **out, std::string &why);

#endif
