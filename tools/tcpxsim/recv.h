/* The receive path of a devmem-TCP kernel: a MSG_SOCK_DEVMEM receive lays
 * the socket's bytes out in bounce-buffer pages as the NIC would and
 * answers with one control message per fragment, each with a token;
 * SO_DEVMEM_DONTNEED gives the tokens back; a plain read of a steered flow
 * is refused. */
#ifndef TCPXSIM_RECV_H
#define TCPXSIM_RECV_H

#include <sys/socket.h>
#include <sys/types.h>

#pragma GCC visibility push(hidden)

/* recvmsg(fd, m, flags | MSG_SOCK_DEVMEM). */
ssize_t sim_devmem_recv(int fd, struct msghdr *m, int flags);
/* setsockopt(fd, SOL_SOCKET, SO_DEVMEM_DONTNEED, val, len). */
int sim_dontneed(int fd, const void *val, socklen_t len);
/* A plain receive on a steered flow: 1 (errno EFAULT) when it must fail. */
int sim_plain_read_refused(int fd);

#pragma GCC visibility pop

#endif
