/* TCPX_P2P_LOG_LEVEL and its alias UCCL_TCPX_DEBUG, read once per process.
 * Registered once per mode, each with its own environment (CMakeLists.txt):
 *   alias    UCCL_TCPX_DEBUG=1                       -> debug + deprecation notice
 *   alias0   UCCL_TCPX_DEBUG=0                       -> warn, nothing printed
 *   both     UCCL_TCPX_DEBUG=1 TCPX_P2P_LOG_LEVEL=trace -> trace, no notice
 *   numeric  TCPX_P2P_LOG_LEVEL=2                    -> info
 *   name     TCPX_P2P_LOG_LEVEL=None                 -> none
 *   bad      TCPX_P2P_LOG_LEVEL=loud                 -> warn + a warning; config_init EINVAL */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/log.h"

static int failed;

#define CHECK(cond)                                                              \
	do {                                                                     \
		if (!(cond)) {                                                   \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__,   \
				__LINE__, #cond);                                \
			failed = 1;                                              \
		}                                                                \
	} while (0)

/* Run tp__log_init with stderr captured into out. */
static void init_capturing(char *out, size_t len)
{
	FILE *f = tmpfile();
	int saved;
	size_t n;

	if (!f) {
		perror("tmpfile");
		exit(1);
	}
	fflush(stderr);
	saved = dup(2);
	dup2(fileno(f), 2);
	tp__log_init();
	tp__log_init(); /* once per process: the second call prints nothing */
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	rewind(f);
	n = fread(out, 1, len - 1, f);
	out[n] = '\0';
	fclose(f);
}

static const char *describe_log_level(char *buf, size_t len)
{
	int i;

	for (i = 0; i < tcpx_p2p_config_count(); i++) {
		const char *name;

		if (tcpx_p2p_config_describe(NULL, i, &name, NULL, buf, len) == 0 &&
		    !strcmp(name, "TCPX_P2P_LOG_LEVEL"))
			return buf;
	}
	return "";
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	char err[4096], value[32];
	tcpx_p2p_config cfg;

	init_capturing(err, sizeof(err));
	fprintf(stderr, "mode %s: level %d, stderr: \"%s\"\n", mode, tp__log_level, err);

	if (!strcmp(mode, "alias")) {
		CHECK(tp__log_level == TCPX_P2P_LOG_DEBUG);
		CHECK(strstr(err, "tcpx_p2p INFO log ") != NULL);
		CHECK(strstr(err, "UCCL_TCPX_DEBUG is deprecated; use TCPX_P2P_LOG_LEVEL") != NULL);
		CHECK(strchr(err, '\n') == strrchr(err, '\n')); /* one line */
		CHECK(!strcmp(describe_log_level(value, sizeof(value)), "debug"));
		CHECK(tcpx_p2p_config_init(&cfg) == 0);
	} else if (!strcmp(mode, "alias0")) {
		CHECK(tp__log_level == TCPX_P2P_LOG_WARN);
		CHECK(err[0] == '\0');
	} else if (!strcmp(mode, "both")) {
		CHECK(tp__log_level == TCPX_P2P_LOG_TRACE);
		CHECK(strstr(err, "deprecated") == NULL);
		CHECK(!strcmp(describe_log_level(value, sizeof(value)), "trace"));
	} else if (!strcmp(mode, "numeric")) {
		CHECK(tp__log_level == TCPX_P2P_LOG_INFO);
		CHECK(err[0] == '\0');
	} else if (!strcmp(mode, "name")) {
		CHECK(tp__log_level == TCPX_P2P_LOG_NONE);
		CHECK(!strcmp(describe_log_level(value, sizeof(value)), "none"));
	} else if (!strcmp(mode, "bad")) {
		CHECK(tp__log_level == TCPX_P2P_LOG_WARN);
		CHECK(strstr(err, "tcpx_p2p WARN log ") != NULL);
		CHECK(strstr(err, "TCPX_P2P_LOG_LEVEL=\"loud\" is not valid") != NULL);
		CHECK(tcpx_p2p_config_init(&cfg) == TCPX_P2P_EINVAL);
		CHECK(strstr(tcpx_p2p_last_error(), "TCPX_P2P_LOG_LEVEL=\"loud\"") != NULL);
		CHECK(strstr(tcpx_p2p_last_error(), "none|warn|info|debug|trace") != NULL);
	} else {
		fprintf(stderr, "usage: %s alias|alias0|both|numeric|name|bad\n", argv[0]);
		return 1;
	}
	return failed;
}
