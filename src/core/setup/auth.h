/* Optional peer authentication with a shared secret (TCPX_P2P_AUTH_TOKEN):
 * HMAC-SHA256 from OpenSSL's libcrypto, constant-time comparisons, no
 * secret on the wire.  Protocol: src/core/setup/handshake.c; docs/reliability.md
 * says what it protects. */
#ifndef TP_CORE_AUTH_H
#define TP_CORE_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TP_AUTH_NONCE 32
#define TP_AUTH_MAC 32

struct tp_auth_part {
	const void *p;
	size_t n;
};

/* n random bytes from the OS generator: 0, or ENET with a detail. */
int tp__auth_random(void *buf, size_t n);
/* HMAC-SHA256 keyed with token over the label and each part, every one
 * length-prefixed so that no two lists of parts give the same input.
 * 0, or EINTERNAL when libcrypto fails. */
int tp__auth_mac(const char *token, const char *label, const struct tp_auth_part *parts,
		 int nparts, unsigned char mac[TP_AUTH_MAC]);
/* Constant-time comparison of two MACs. */
bool tp__auth_equal(const unsigned char *a, const unsigned char *b);

#endif
