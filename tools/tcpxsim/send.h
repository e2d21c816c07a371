/* The send path of a devmem-TCP kernel: a sendmsg naming registered GPU
 * memory by SCM_DEVMEM_OFFSET reads it and sends it; zerocopy sends get
 * completion ids, reported on the error queue (MSG_ERRQUEUE). */
#ifndef TCPXSIM_SEND_H
#define TCPXSIM_SEND_H

#include <sys/socket.h>
#include <sys/types.h>

#pragma GCC visibility push(hidden)

/* The SOL_SOCKET / SCM_DEVMEM_OFFSET control message of `m`, or NULL: a
 * plain send. */
const struct cmsghdr *sim_devmem_cmsg(const struct msghdr *m);
/* sendmsg(fd, m, flags) of the registered memory `c` names. */
ssize_t sim_devmem_send(int fd, const struct msghdr *m, const struct cmsghdr *c, int flags);
/* A plain send asked for MSG_ZEROCOPY (and sent without it): `sent` is
 * given the socket's next completion id.  Returns `sent`, errno kept. */
ssize_t sim_zc_sent(int fd, int flags, ssize_t sent);
/* setsockopt(SO_ZEROCOPY) succeeded with `on`. */
void sim_zc_enable(int fd, int on);
/* recvmsg(fd, m, MSG_ERRQUEUE): the completions due, as one range. */
ssize_t sim_errqueue(int fd, struct msghdr *m, int flags);

#pragma GCC visibility pop

#endif
