/* Page locks the library takes for host regions registered with
 * TCPX_P2P_MR_PIN.  They are counted process-wide: a region registered
 * inside one the library locked shares that lock, so that deregistering
 * either cannot unlock pages the other still hands to the GPU's kernels.
 * Locks the application took itself are left alone. */
#include <pthread.h>
#include <stdlib.h>

#include "core/mr.h"
#include "util/error.h"
#include "util/log.h"

struct tp_pin {
	char *base;
	size_t len;
	long refs;
	struct tp_pin *next;
};

static pthread_mutex_t pins_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tp_pin *pins;

static struct tp_pin *pin_around(const char *p, size_t len)
{
	for (struct tp_pin *e = pins; e; e = e->next) {
		size_t off = (size_t)(p - e->base);

		if (p >= e->base && off <= e->len && len <= e->len - off)
			return e;
	}
	return NULL;
}

int tp__pin_take(void *p, size_t len, struct tp_pin **out)
{
	struct tp_pin *e;
	int rc = 0;

	*out = NULL;
	pthread_mutex_lock(&pins_lock);
	if (tp__dev_host_mapped(p, len)) {
		/* locked already: by the library for another region (count it),
		 * or by the application (not ours to unlock) */
		e = pin_around(p, len);
		if (e) {
			e->refs++;
			*out = e;
		}
		goto out;
	}
	e = calloc(1, sizeof(*e));
	if (!e) {
		rc = tp__error(TCPX_P2P_ENOMEM, "mr_register: out of memory");
		goto out;
	}
	rc = tp__dev_host_pin(p, len);
	if (rc) {
		free(e);
		goto out;
	}
	e->base = p;
	e->len = len;
	e->refs = 1;
	e->next = pins;
	pins = e;
	*out = e;
	TP_DEBUG("mr", "page-locked [%p, +%zu)", p, len);
out:
	pthread_mutex_unlock(&pins_lock);
	return rc;
}

void tp__pin_release(struct tp_pin *pin)
{
	struct tp_pin **pp;

	if (!pin)
		return;
	pthread_mutex_lock(&pins_lock);
	if (--pin->refs == 0) {
		for (pp = &pins; *pp != pin; pp = &(*pp)->next)
			;
		*pp = pin->next;
		if (tp__dev_host_unpin(pin->base))
			TP_WARN("mr", "unlocking [%p, +%zu): %s", (void *)pin->base, pin->len,
				tcpx_p2p_last_error());
		else
			TP_DEBUG("mr", "unlocked [%p, +%zu)", (void *)pin->base, pin->len);
		free(pin);
	}
	pthread_mutex_unlock(&pins_lock);
}
