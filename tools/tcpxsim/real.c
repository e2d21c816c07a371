/* The libc (and CUDA) calls underneath the simulator, reached past its
 * own (real.h). */
#define _GNU_SOURCE
#include "real.h"

#include <dlfcn.h>

struct sim_real sim_real = {.once = PTHREAD_ONCE_INIT};

void sim_real_resolve(void)
{
	*(void **)&sim_real.recvmsg = dlsym(RTLD_NEXT, "recvmsg");
	*(void **)&sim_real.sendmsg = dlsym(RTLD_NEXT, "sendmsg");
	*(void **)&sim_real.send = dlsym(RTLD_NEXT, "send");
	*(void **)&sim_real.recv = dlsym(RTLD_NEXT, "recv");
	*(void **)&sim_real.setsockopt = dlsym(RTLD_NEXT, "setsockopt");
	*(void **)&sim_real.ioctl = dlsym(RTLD_NEXT, "ioctl");
	*(void **)&sim_real.close = dlsym(RTLD_NEXT, "close");
	*(void **)&sim_real.realpath = dlsym(RTLD_NEXT, "realpath");
	*(void **)&sim_real.mem_handle = dlsym(RTLD_NEXT, "cuMemGetHandleForAddressRange");
}
