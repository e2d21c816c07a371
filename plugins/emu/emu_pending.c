/*
 * Connects in progress live here, not in the caller's handle: the handle
 * holds only a slot index and a random key, both checked on every call, so
 * handle bytes from a peer can name no memory (docs/tcpx.md, plugin contract
 * rule 14).  Because the table owns the half-built comms, it can also
 * release the ones a caller abandoned: NCCL's API has no call that cancels
 * a pending connect (closeSend takes a comm, and a pending connect has none
 * yet), so an entry nobody has advanced for TCPX_EMU_CONNECT_ABANDON_MS is
 * freed by the next listen or connect of the process.
 */
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <sys/random.h>

#include "emu.h"

struct emu_pending {
	struct emu_comm *c; /* NULL: free slot */
	uint64_t key;
	int64_t touched_ms;
	int busy;           /* a connect call is advancing it now */
};

static struct emu_pending tab[EMU_MAX_PENDING];
static int nused;
static pthread_mutex_t tab_lock = PTHREAD_MUTEX_INITIALIZER;

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

uint64_t tp__emu_nonce(void)
{
	static uint64_t counter;
	uint64_t v = 0;
	struct timespec ts;

	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) == (ssize_t)sizeof(v) && v)
		return v;
	clock_gettime(CLOCK_REALTIME, &ts);
	v = ((uint64_t)ts.tv_sec << 32) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 16) ^
	    __atomic_add_fetch(&counter, 0x9e3779b97f4a7c15ull, __ATOMIC_RELAXED);
	return v ? v : 1;
}

int tp__emu_pending_add(struct emu_comm *c, uint32_t *slot, uint64_t *key)
{
	int rc = -1;

	pthread_mutex_lock(&tab_lock);
	for (uint32_t i = 0; i < EMU_MAX_PENDING; i++) {
		if (tab[i].c)
			continue;
		tab[i].c = c;
		tab[i].key = tp__emu_nonce();
		tab[i].touched_ms = now_ms();
		tab[i].busy = 1;
		nused++;
		*slot = i;
		*key = tab[i].key;
		rc = 0;
		break;
	}
	pthread_mutex_unlock(&tab_lock);
	return rc;
}

int tp__emu_pending_take(uint32_t slot, uint64_t key, struct emu_comm **c)
{
	int rc = EMU_PENDING_UNKNOWN;

	pthread_mutex_lock(&tab_lock);
	if (slot < EMU_MAX_PENDING && tab[slot].c && tab[slot].key == key) {
		if (tab[slot].busy) {
			rc = EMU_PENDING_BUSY;
		} else {
			tab[slot].busy = 1;
			*c = tab[slot].c;
			rc = 0;
		}
	}
	pthread_mutex_unlock(&tab_lock);
	return rc;
}

void tp__emu_pending_put(uint32_t slot)
{
	pthread_mutex_lock(&tab_lock);
	tab[slot].busy = 0;
	tab[slot].touched_ms = now_ms();
	pthread_mutex_unlock(&tab_lock);
}

void tp__emu_pending_remove(uint32_t slot)
{
	pthread_mutex_lock(&tab_lock);
	tab[slot].c = NULL;
	tab[slot].key = 0;
	tab[slot].busy = 0;
	nused--;
	pthread_mutex_unlock(&tab_lock);
}

void tp__emu_pending_reap(int64_t abandon_ms)
{
	struct emu_comm *dead[64];
	int n, total = 0;
	int64_t now = now_ms();

	do {
		n = 0;
		pthread_mutex_lock(&tab_lock);
		for (uint32_t i = 0; nused && i < EMU_MAX_PENDING && n < 64; i++) {
			if (!tab[i].c || tab[i].busy || now - tab[i].touched_ms < abandon_ms)
				continue;
			dead[n++] = tab[i].c;
			tab[i].c = NULL;
			tab[i].key = 0;
			nused--;
		}
		pthread_mutex_unlock(&tab_lock);
		for (int i = 0; i < n; i++)
			tp__emu_comm_free(dead[i]);
		total += n;
	} while (n == 64);
	if (total)
		EMU_INFO("released %d connect(s) abandoned for over %lld ms", total,
			 (long long)abandon_ms);
}
