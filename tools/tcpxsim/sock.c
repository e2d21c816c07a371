/* The simulator's state of each socket, by descriptor number (sock.h). */
#include "sock.h"

#include <stdlib.h>
#include <sys/socket.h>

#include "real.h"
#include "report.h"

#define SOCK_CHUNK 1024 /* the socket table: fds below SOCK_CHUNK^2 */

/* The table grows under `lock`; lookups read it without. */
static struct {
	pthread_mutex_t lock;
	struct sock **table[SOCK_CHUNK];
	uint64_t starved_said;   /* when the last starvation report was */
} T = {.lock = PTHREAD_MUTEX_INITIALIZER};

struct sock *sim_sock_slot(int fd, int create)
{
	if (fd < 0 || fd >= SOCK_CHUNK * SOCK_CHUNK)
		return NULL;
	struct sock **chunk = __atomic_load_n(&T.table[fd / SOCK_CHUNK], __ATOMIC_ACQUIRE);
	struct sock *s = chunk ? __atomic_load_n(&chunk[fd % SOCK_CHUNK], __ATOMIC_ACQUIRE) : NULL;
	if (s || !create)
		return s;
	pthread_mutex_lock(&T.lock);
	if (!(chunk = T.table[fd / SOCK_CHUNK]) && (chunk = calloc(SOCK_CHUNK, sizeof(*chunk))))
		__atomic_store_n(&T.table[fd / SOCK_CHUNK], chunk, __ATOMIC_RELEASE);
	if (chunk && !(s = chunk[fd % SOCK_CHUNK]) && (s = calloc(1, sizeof(*s)))) {
		pthread_mutex_init(&s->rx, NULL);
		pthread_mutex_init(&s->lock, NULL);
		__atomic_store_n(&chunk[fd % SOCK_CHUNK], s, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&T.lock);
	return s;
}

/* Set up on first use since the descriptor was opened.  Called with
 * s->lock held. */
static void sock_live(int fd, struct sock *s)
{
	struct sockaddr_storage a;
	socklen_t len = sizeof(a);
	if (s->live)
		return;
	s->family = getsockname(fd, (struct sockaddr *)&a, &len) == 0 ? a.ss_family : AF_INET;
	__atomic_store_n(&s->live, 1, __ATOMIC_RELEASE);
}

struct sock *sim_sock_get(int fd)
{
	struct sock *s = sim_sock_slot(fd, 1);
	if (s) {
		pthread_mutex_lock(&s->lock);
		sock_live(fd, s);
		pthread_mutex_unlock(&s->lock);
	}
	return s;
}

void sim_sock_forget(int fd)
{
	struct sock *s = sim_sock_slot(fd, 0);
	if (!s || !__atomic_load_n(&s->live, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&s->rx);
	pthread_mutex_lock(&s->lock);
	if (s->b) {
		STAT_SUB(tokens_held, s->tokens.held);
		pthread_mutex_lock(&s->b->lock);
		sim_tokens_drop_all(&s->tokens, &s->b->pool);
		if (s->cut.page_left)
			sim_pool_put(&s->b->pool, s->cut.page);
		pthread_mutex_unlock(&s->b->lock);
		sim_tokens_fini(&s->tokens);
	}
	free(s->zc);
	s->b = NULL;
	s->cut = (struct sim_cut){0};
	s->rules_seen = 0;
	s->zerocopy = 0;
	s->zc_next = 0;
	s->zc = NULL;
	s->zc_head = s->zc_len = s->zc_cap = 0;
	__atomic_store_n(&s->live, 0, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&s->lock);
	pthread_mutex_unlock(&s->rx);
}

void sim_socks_report_starved(const struct sim_bounce *b, struct sock *me)
{
	uint64_t now = sim_now_ns(), held = 0;
	uint64_t last = __atomic_load_n(&T.starved_said, __ATOMIC_RELAXED);
	int socks = 0, open = 0, busy = 0;
	if (now - last < 5000000000ull ||
	    !__atomic_compare_exchange_n(&T.starved_said, &last, now, 0, __ATOMIC_RELAXED,
					 __ATOMIC_RELAXED))
		return;
	for (int c = 0; c < SOCK_CHUNK; c++) {
		struct sock **chunk = __atomic_load_n(&T.table[c], __ATOMIC_ACQUIRE);
		for (int i = 0; chunk && i < SOCK_CHUNK; i++) {
			struct sock *s = __atomic_load_n(&chunk[i], __ATOMIC_ACQUIRE);
			int mine = s == me;
			if (!s || (!mine && pthread_mutex_trylock(&s->rx))) {
				busy += s != NULL;
				continue;
			}
			pthread_mutex_lock(&s->lock);
			if (s->live && s->b == b) {
				socks++;
				held += s->tokens.held;
				open += s->cut.page_left != 0;
			}
			pthread_mutex_unlock(&s->lock);
			if (!mine)
				pthread_mutex_unlock(&s->rx);
		}
	}
	pthread_mutex_lock((pthread_mutex_t *)&b->lock);
	uint32_t nfree = b->pool.nfree, npages = b->pool.npages;
	pthread_mutex_unlock((pthread_mutex_t *)&b->lock);
	sim_say("tcpxsim: bounce buffer of %s starved: %u of %u pages free, %llu tokens held and %d "
		"pages open over %d sockets (%d busy in a receive, not counted: its pages are taken "
		"up front)", b->gpu, nfree, npages,
		(unsigned long long)held, open, socks, busy);
}
