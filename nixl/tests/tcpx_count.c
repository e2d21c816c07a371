/* LD_PRELOADed into nixl.backend: counts the library calls the backend
 * makes (tp_count_get), forwarding each to libtcpx_p2p.  The test checks
 * with them how the backend drives the library: a NIXL request is
 * prepared once and posted as a prepared list, a released pending one is
 * cancelled; and it makes chosen threads' posts meet EAGAIN. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>

#include <tcpx_p2p.h>

enum { TP_XLIST_PREPARE, TP_XLIST_POST, TP_WRITE, TP_READ, TP_CANCEL, TP_CANCELED, TP_EAGAIN,
       TP_DEAD_POST, TP_UNTRACKED, TP_N };
static atomic_long counts[TP_N];
/* While hold is set, list posts of the threads that called
 * tp_count_held_here() get EAGAIN (counted), as when the control bytes
 * waiting for the peer are at their bound. */
static atomic_int hold;
static _Thread_local int held_here;

/* The connection of each prepared list, and the connections destroyed
 * since: a post of a list whose connection was destroyed (which the
 * library forbids) is counted and refused here (ECLOSED) instead of
 * reaching the library. */
enum { TP_LISTS = 256 };
static pthread_mutex_t lists_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
	tcpx_p2p_xlist *list;
	tcpx_p2p_conn *conn;
	int dead;
} lists[TP_LISTS];

long tp_count_get(int what);
void tp_count_hold(int on);
void tp_count_held_here(void);

__attribute__((visibility("default"))) long tp_count_get(int what)
{
	return what >= 0 && what < TP_N ? atomic_load(&counts[what]) : -1;
}

__attribute__((visibility("default"))) void tp_count_hold(int on)
{
	atomic_store(&hold, on);
}

__attribute__((visibility("default"))) void tp_count_held_here(void)
{
	held_here = 1;
}

/* The library as the plugin loaded it (NIXL opens plugins RTLD_LOCAL, so
 * RTLD_NEXT would not see it). */
static void *lib(void)
{
	static void *h;
	if (!h)
		h = dlopen("libtcpx_p2p.so.0", RTLD_NOW | RTLD_NOLOAD);
	if (!h)
		h = dlopen("libtcpx_p2p.so.0", RTLD_NOW);
	return h;
}

#define NEXT(ver, name, type)                                                                  \
	static type next;                                                                      \
	if (!next)                                                                             \
		next = (type)dlvsym(lib(), name, ver)

__attribute__((visibility("default"))) int
tcpx_p2p_xlist_prepare(tcpx_p2p_conn *c, int op, const tcpx_p2p_seg *local, size_t nlocal,
		       const tcpx_p2p_rseg *remote, size_t nremote, unsigned flags,
		       tcpx_p2p_xlist **out)
{
	typedef int (*fn)(tcpx_p2p_conn *, int, const tcpx_p2p_seg *, size_t,
			  const tcpx_p2p_rseg *, size_t, unsigned, tcpx_p2p_xlist **);
	NEXT("TCPX_P2P_0.10", "tcpx_p2p_xlist_prepare", fn);
	atomic_fetch_add(&counts[TP_XLIST_PREPARE], 1);
	int rc = next(c, op, local, nlocal, remote, nremote, flags, out);
	if (rc == 0) {
		pthread_mutex_lock(&lists_mu);
		for (int i = 0; i < TP_LISTS; i++)
			if (lists[i].conn == c) /* alive: an address used again */
				lists[i].dead = 0;
		int i = 0;

		while (i < TP_LISTS && lists[i].list && lists[i].list != *out)
			i++;
		if (i < TP_LISTS) {
			lists[i].list = *out;
			lists[i].conn = c;
			lists[i].dead = 0;
		} else /* not watched: a test that relies on the table fails on this */
			atomic_fetch_add(&counts[TP_UNTRACKED], 1);
		pthread_mutex_unlock(&lists_mu);
	}
	return rc;
}

__attribute__((visibility("default"))) int tcpx_p2p_conn_destroy(tcpx_p2p_conn *c)
{
	typedef int (*fn)(tcpx_p2p_conn *);
	NEXT("TCPX_P2P_0.1", "tcpx_p2p_conn_destroy", fn);
	pthread_mutex_lock(&lists_mu);
	for (int i = 0; i < TP_LISTS; i++)
		if (lists[i].list && lists[i].conn == c)
			lists[i].dead = 1;
	pthread_mutex_unlock(&lists_mu);
	return next(c);
}

__attribute__((visibility("default"))) int tcpx_p2p_xlist_release(tcpx_p2p_xlist *l)
{
	typedef int (*fn)(tcpx_p2p_xlist *);
	NEXT("TCPX_P2P_0.10", "tcpx_p2p_xlist_release", fn);
	pthread_mutex_lock(&lists_mu);
	for (int i = 0; i < TP_LISTS; i++)
		if (lists[i].list == l)
			lists[i].list = NULL;
	pthread_mutex_unlock(&lists_mu);
	return next(l);
}

__attribute__((visibility("default"))) int
tcpx_p2p_xlist_post(tcpx_p2p_xlist *l, const tcpx_p2p_xfer_params *params, tcpx_p2p_xfer **out)
{
	typedef int (*fn)(tcpx_p2p_xlist *, const tcpx_p2p_xfer_params *, tcpx_p2p_xfer **);
	NEXT("TCPX_P2P_0.10", "tcpx_p2p_xlist_post", fn);
	if (held_here && atomic_load(&hold)) {
		atomic_fetch_add(&counts[TP_EAGAIN], 1);
		return TCPX_P2P_EAGAIN;
	}
	int dead = 0;
	pthread_mutex_lock(&lists_mu);
	for (int i = 0; i < TP_LISTS; i++)
		if (lists[i].list == l)
			dead = lists[i].dead;
	pthread_mutex_unlock(&lists_mu);
	if (dead) {
		atomic_fetch_add(&counts[TP_DEAD_POST], 1);
		return TCPX_P2P_ECLOSED;
	}
	atomic_fetch_add(&counts[TP_XLIST_POST], 1);
	return next(l, params, out);
}

__attribute__((visibility("default"))) int
tcpx_p2p_write(tcpx_p2p_conn *c, const tcpx_p2p_seg *local, size_t nlocal,
	       const tcpx_p2p_rseg *remote, size_t nremote, const tcpx_p2p_xfer_params *params,
	       tcpx_p2p_xfer **out)
{
	typedef int (*fn)(tcpx_p2p_conn *, const tcpx_p2p_seg *, size_t, const tcpx_p2p_rseg *,
			  size_t, const tcpx_p2p_xfer_params *, tcpx_p2p_xfer **);
	NEXT("TCPX_P2P_0.3", "tcpx_p2p_write", fn);
	atomic_fetch_add(&counts[TP_WRITE], 1);
	return next(c, local, nlocal, remote, nremote, params, out);
}

__attribute__((visibility("default"))) int
tcpx_p2p_read(tcpx_p2p_conn *c, const tcpx_p2p_seg *local, size_t nlocal,
	      const tcpx_p2p_rseg *remote, size_t nremote, const tcpx_p2p_xfer_params *params,
	      tcpx_p2p_xfer **out)
{
	typedef int (*fn)(tcpx_p2p_conn *, const tcpx_p2p_seg *, size_t, const tcpx_p2p_rseg *,
			  size_t, const tcpx_p2p_xfer_params *, tcpx_p2p_xfer **);
	NEXT("TCPX_P2P_0.3", "tcpx_p2p_read", fn);
	atomic_fetch_add(&counts[TP_READ], 1);
	return next(c, local, nlocal, remote, nremote, params, out);
}

__attribute__((visibility("default"))) int tcpx_p2p_xfer_cancel(tcpx_p2p_xfer *x)
{
	typedef int (*fn)(tcpx_p2p_xfer *);
	NEXT("TCPX_P2P_0.10", "tcpx_p2p_xfer_cancel", fn);
	atomic_fetch_add(&counts[TP_CANCEL], 1);
	return next(x);
}

__attribute__((visibility("default"))) int tcpx_p2p_wait(tcpx_p2p_xfer *x, int timeout_ms)
{
	typedef int (*fn)(tcpx_p2p_xfer *, int);
	NEXT("TCPX_P2P_0.1", "tcpx_p2p_wait", fn);
	int rc = next(x, timeout_ms);
	if (rc == TCPX_P2P_ECANCELED)
		atomic_fetch_add(&counts[TP_CANCELED], 1);
	return rc;
}
