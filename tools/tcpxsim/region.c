/* The senders' registrations: dma-bufs and their pages files (region.h). */
#include "region.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/eventfd.h>

#include "real.h"

/* `lock` guards the list: nothing on the data path but a devmem send's
 * look-up, which only reads it (so sends of many sockets look up at once). */
static struct {
	pthread_rwlock_t lock;
	struct region *list;
} G = {.lock = PTHREAD_RWLOCK_INITIALIZER};

/* Called with G.lock held. */
static struct region *region_find(int fd)
{
	for (struct region *r = G.list; r; r = r->next)
		if (r->fd == fd)
			return r;
	return NULL;
}

/* Called with G.lock held. */
static int region_add(int pages, uint64_t base, size_t size)
{
	struct region *r = calloc(1, sizeof(*r));
	int fd = eventfd(0, EFD_CLOEXEC);
	if (!r || fd < 0) {
		free(r);
		if (fd >= 0)
			REAL(close)(fd);
		errno = ENOMEM;
		return -1;
	}
	*r = (struct region){.fd = fd, .pages = pages, .base = base, .size = size, .next = G.list};
	G.list = r;
	return fd;
}

int sim_region_dmabuf(uint64_t base, size_t size)
{
	pthread_rwlock_wrlock(&G.lock);
	int fd = region_add(0, base, size);
	pthread_rwlock_unlock(&G.lock);
	return fd;
}

int sim_region_create_pages(int fd)
{
	pthread_rwlock_wrlock(&G.lock);
	struct region *r = region_find(fd);
	int rc = r && !r->pages ? region_add(1, r->base, r->size) : -2;
	pthread_rwlock_unlock(&G.lock);
	return rc;
}

int sim_region_find(int fd, struct region *out)
{
	pthread_rwlock_rdlock(&G.lock);
	struct region *r = region_find(fd);
	if (r)
		*out = *r;
	pthread_rwlock_unlock(&G.lock);
	return r ? 0 : -1;
}

void sim_region_forget(int fd)
{
	pthread_rwlock_wrlock(&G.lock);
	for (struct region **p = &G.list; *p; p = &(*p)->next)
		if ((*p)->fd == fd) {
			struct region *r = *p;
			*p = r->next;
			free(r);
			break;
		}
	pthread_rwlock_unlock(&G.lock);
}
