/* The library's one intrusive list: doubly linked and NULL-ended, with a
 * head and a tail.  An entry embeds one link (TP_LINK) per list it can be
 * on, so walking a list is plain pointer chasing, without container_of,
 * and an entry may be on several lists at once.  A list is any struct with
 * head and tail members of the entry's pointer type (TP_LIST).  O(1)
 * insertion at either end and removal; the arguments are evaluated once. */
#ifndef TP_UTIL_LIST_H
#define TP_UTIL_LIST_H

#include <stddef.h>

#define TP_LIST(type) struct { type *head, *tail; }
#define TP_LINK(type) struct { type *prev, *next; }

#define tp_list_append(l, x, link)                                   \
	do {                                                          \
		__typeof__(l) tp__l = (l);                            \
		__typeof__(x) tp__x = (x);                            \
		tp__x->link.prev = tp__l->tail;                       \
		tp__x->link.next = NULL;                              \
		if (tp__l->tail)                                      \
			tp__l->tail->link.next = tp__x;               \
		else                                                  \
			tp__l->head = tp__x;                          \
		tp__l->tail = tp__x;                                  \
	} while (0)

#define tp_list_prepend(l, x, link)                                  \
	do {                                                          \
		__typeof__(l) tp__l = (l);                            \
		__typeof__(x) tp__x = (x);                            \
		tp__x->link.prev = NULL;                              \
		tp__x->link.next = tp__l->head;                       \
		if (tp__l->head)                                      \
			tp__l->head->link.prev = tp__x;               \
		else                                                  \
			tp__l->tail = tp__x;                          \
		tp__l->head = tp__x;                                  \
	} while (0)

/* x must be on l; its link is cleared. */
#define tp_list_remove(l, x, link)                                   \
	do {                                                          \
		__typeof__(l) tp__l = (l);                            \
		__typeof__(x) tp__x = (x);                            \
		if (tp__x->link.prev)                                 \
			tp__x->link.prev->link.next = tp__x->link.next; \
		else                                                  \
			tp__l->head = tp__x->link.next;               \
		if (tp__x->link.next)                                 \
			tp__x->link.next->link.prev = tp__x->link.prev; \
		else                                                  \
			tp__l->tail = tp__x->link.prev;               \
		tp__x->link.prev = tp__x->link.next = NULL;           \
	} while (0)

#endif
