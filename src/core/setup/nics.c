/* TCPX_P2P_NICS: the devices a session's channels are striped over.
 * Channel i of every connection of the session uses device i % n. */
#include "core/setup/nics.h"
#include "tcpx_p2p.h"
#include "util/error.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>


static bool add(int *out, int *n, int dev)
{
	int i;

	for (i = 0; i < *n; i++)
		if (out[i] == dev)
			return true;
	if (*n == TP_MAX_NICS)
		return false;
	out[(*n)++] = dev;
	return true;
}

/* Device named by one list entry: an index or a device name; -1 if none. */
static int lookup(const char *tok, size_t len, const char *const *names, int ndev)
{
	size_t i;
	int d;

	for (i = 0; i < len && isdigit((unsigned char)tok[i]); i++)
		;
	if (len && i == len && len < 4) {
		d = atoi(tok);
		return d < ndev ? d : -1;
	}
	for (d = 0; d < ndev; d++)
		if (names[d] && strlen(names[d]) == len && !strncmp(names[d], tok, len))
			return d;
	return -1;
}

static int no_such(const char *tok, size_t len, const char *const *names, int ndev)
{
	char have[256] = "";
	size_t used = 0;
	int d;

	for (d = 0; d < ndev && used < sizeof(have); d++)
		used += (size_t)snprintf(have + used, sizeof(have) - used, "%s%d=%s", d ? ", " : "",
					 d, names[d] ? names[d] : "?");
	return tp__error(TCPX_P2P_EINVAL, "TCPX_P2P_NICS: \"%.*s\" is no device of the plugin "
			 "(devices: %s)", (int)len, tok, have);
}

int tp__nics_pick(const char *spec, const char *const *names, int ndev, const int *closest,
		  int nclosest, int *out, int *nout)
{
	const char *p;
	int i, n = 0;

	/* The keywords ignore case, as every enumerated setting does; device
	 * names are matched exactly, as the plugin reports them. */
	if (!spec || !*spec || !strcasecmp(spec, "auto")) {
		for (i = 0; i < nclosest; i++)
			add(out, &n, closest[i]);
	} else if (!strcasecmp(spec, "all")) {
		for (i = 0; i < ndev; i++)
			add(out, &n, i);
	} else {
		for (p = spec; *p;) {
			size_t len = strcspn(p, ",");
			int d = lookup(p, len, names, ndev);

			if (d < 0)
				return no_such(p, len, names, ndev);
			if (!add(out, &n, d))
				return tp__error(TCPX_P2P_EINVAL, "TCPX_P2P_NICS: more than %d "
						 "devices", TP_MAX_NICS);
			p += len;
			if (*p == ',')
				p++;
		}
	}
	if (!n)
		return tp__error(TCPX_P2P_EINVAL, "TCPX_P2P_NICS=\"%s\" names no device", spec);
	*nout = n;
	return 0;
}
