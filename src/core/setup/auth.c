/* HMAC-SHA256 and randomness for peer authentication, from libcrypto:
 * nothing hand-written. */
#include <arpa/inet.h>
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/rand.h>

#include "core/setup/auth.h"
#include "tcpx_p2p.h"
#include "util/error.h"

int tp__auth_random(void *buf, size_t n)
{
	if (RAND_bytes(buf, (int)n) != 1)
		return tp__error(TCPX_P2P_ENET, "auth: no random bytes from libcrypto");
	return 0;
}

static int mac_update(EVP_MAC_CTX *ctx, const void *p, size_t n)
{
	uint32_t len = htonl((uint32_t)n);

	return EVP_MAC_update(ctx, (const unsigned char *)&len, sizeof(len)) == 1 &&
	       (n == 0 || EVP_MAC_update(ctx, p, n) == 1);
}

int tp__auth_mac(const char *token, const char *label, const struct tp_auth_part *parts,
		 int nparts, unsigned char mac[TP_AUTH_MAC])
{
	char digest[] = "SHA256";
	OSSL_PARAM params[] = {
		OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
		OSSL_PARAM_construct_end(),
	};
	EVP_MAC *alg;
	EVP_MAC_CTX *ctx = NULL;
	size_t out = 0;
	int i, ok;

	alg = EVP_MAC_fetch(NULL, "HMAC", NULL);
	if (alg)
		ctx = EVP_MAC_CTX_new(alg);
	ok = ctx && EVP_MAC_init(ctx, (const unsigned char *)token, strlen(token), params) == 1 &&
	     mac_update(ctx, label, strlen(label));
	for (i = 0; ok && i < nparts; i++)
		ok = mac_update(ctx, parts[i].p, parts[i].n);
	ok = ok && EVP_MAC_final(ctx, mac, &out, TP_AUTH_MAC) == 1 && out == TP_AUTH_MAC;
	EVP_MAC_CTX_free(ctx);
	EVP_MAC_free(alg);
	if (!ok)
		return tp__error(TCPX_P2P_EINTERNAL, "auth: HMAC-SHA256 failed in libcrypto");
	return 0;
}

bool tp__auth_equal(const unsigned char *a, const unsigned char *b)
{
	return CRYPTO_memcmp(a, b, TP_AUTH_MAC) == 0;
}
