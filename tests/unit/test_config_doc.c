/* docs/configuration.md must list every variable of the configuration
 * table, on a table row that also shows its default: the doc stays true. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tcpx_p2p.h"

#ifndef TP_CONFIG_DOC
#error "TP_CONFIG_DOC (path of docs/configuration.md) must be defined"
#endif

static char *read_file(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET))
		goto close_file;
	buf = malloc((size_t)n + 1);
	if (!buf)
		goto close_file;
	if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
		free(buf);
		buf = NULL;
		goto close_file;
	}
	buf[n] = '\0';
close_file:
	fclose(f);
	return buf;
}

/* The table row "| `NAME` | ..." for name, copied into row; 0 if none. */
static int find_row(const char *doc, const char *name, char *row, size_t len)
{
	char key[128];
	const char *p, *end;

	snprintf(key, sizeof(key), "| `%s` |", name);
	for (p = doc; (p = strstr(p, key)); p++) {
		if (p != doc && p[-1] != '\n')
			continue;
		end = strchr(p, '\n');
		if (!end)
			end = p + strlen(p);
		snprintf(row, len, "%.*s", (int)(end - p), p);
		return 1;
	}
	return 0;
}

int main(void)
{
	char value[256], want[300], row[2048];
	const char *name, *help;
	int i, failed = 0;
	char *doc;

	/* The log-level row shows the level in force: make it the default. */
	unsetenv("TCPX_P2P_LOG_LEVEL");
	unsetenv("UCCL_TCPX_DEBUG");
	doc = read_file(TP_CONFIG_DOC);
	if (!doc) {
		fprintf(stderr, "cannot read %s\n", TP_CONFIG_DOC);
		return 1;
	}
	for (i = 0; i < tcpx_p2p_config_count(); i++) {
		if (tcpx_p2p_config_describe(NULL, i, &name, &help, value, sizeof(value))) {
			fprintf(stderr, "describe(%d): %s\n", i, tcpx_p2p_last_error());
			failed = 1;
			continue;
		}
		if (!find_row(doc, name, row, sizeof(row))) {
			fprintf(stderr, "%s: %s has no table row \"| `%s` |\"\n", TP_CONFIG_DOC,
				name, name);
			failed = 1;
			continue;
		}
		snprintf(want, sizeof(want), "| `%s` |", value);
		if (!strstr(row, want)) {
			fprintf(stderr, "%s: the row of %s does not show its default `%s`: %s\n",
				TP_CONFIG_DOC, name, value, row);
			failed = 1;
		}
	}
	if (!failed)
		printf("%d settings documented in %s\n", tcpx_p2p_config_count(), TP_CONFIG_DOC);
	free(doc);
	return failed;
}
