/* The simulator's settings, read from the environment at start
 * (settings.h). */
#include "settings.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "report.h"

struct sim_settings sim_cfg;

static unsigned long env_num(const char *name, unsigned long def, unsigned long lo,
			     unsigned long hi)
{
	const char *v = getenv(name);
	char *end;
	if (!v || !*v)
		return def;
	errno = 0;
	unsigned long x = strtoul(v, &end, 0);
	if (errno || *end || x < lo || x > hi) {
		sim_say("tcpxsim: %s=%s is not a number in [%lu, %lu]; using %lu", name, v, lo, hi,
			def);
		return def;
	}
	return x;
}

static void find_gpus(struct sim_settings *c)
{
	const char *list = getenv("TCPXSIM_GPUS");
	if (list && *list) {
		char copy[512], *save = NULL;
		snprintf(copy, sizeof(copy), "%s", list);
		for (char *t = strtok_r(copy, ",", &save); t && c->ngpus < SIM_MAX_GPUS;
		     t = strtok_r(NULL, ",", &save))
			snprintf(c->gpus[c->ngpus++], 32, "%s", t);
		return;
	}
	DIR *d = opendir("/proc/driver/nvidia/gpus");
	for (struct dirent *e; d && (e = readdir(d)) && c->ngpus < SIM_MAX_GPUS;)
		if (e->d_name[0] != '.')
			snprintf(c->gpus[c->ngpus++], 32, "%.31s", e->d_name);
	if (d)
		closedir(d);
	if (c->ngpus == 0)
		snprintf(c->gpus[c->ngpus++], 32, "0000:00:00.0");
}

void sim_settings_read(void)
{
	struct sim_settings *c = &sim_cfg;
	const char *v;
	c->mss = (uint32_t)env_num("TCPXSIM_MSS", 8192, 1, 65536);
	c->bounce_bytes = env_num("TCPXSIM_BOUNCE_MB", 256, 1, 65536) << 20;
	c->pool_pages = (uint32_t)env_num("TCPXSIM_POOL_PAGES", 0, 0, UINT32_MAX);
	c->linear = (uint32_t)env_num("TCPXSIM_LINEAR", 0, 0, 1u << 20);
	c->poison = (int)env_num("TCPXSIM_POISON", 1, 0, 1);
	c->strict = (int)env_num("TCPXSIM_STRICT", 1, 0, 1);
	c->tx_delay_ns = env_num("TCPXSIM_TX_DELAY_US", 0, 0, 10000000) * 1000u;
	c->verbose = (int)env_num("TCPXSIM_LOG", 0, 0, 1);
	c->backtrace = (int)env_num("TCPXSIM_BACKTRACE", 1, 0, 1);
	v = getenv("TCPXSIM_STEERING");
	c->steering = v && !strcmp(v, "all") ? STEER_ALL : v && !strcmp(v, "none") ? STEER_NONE
										  : STEER_RULES;
	if (v && strcmp(v, "all") && strcmp(v, "none") && strcmp(v, "rules"))
		sim_say("tcpxsim: TCPXSIM_STEERING=%s: expected rules, all or none; using rules", v);
	find_gpus(c);
	v = getenv("TCPXSIM_BOUNCE");
	if (v && *v && strcmp(v, "host") && strcmp(v, "gpu") && strcmp(v, "hostmap")) {
		sim_say("tcpxsim: TCPXSIM_BOUNCE=%s: expected gpu, hostmap or host; using the "
			"default", v);
		v = NULL;
	}
	if (v && !strcmp(v, "host"))
		c->on_gpu = 0;
	else if (v && (!strcmp(v, "gpu") || !strcmp(v, "hostmap")))
		c->on_gpu = 1;
	else
		c->on_gpu = access("/proc/driver/nvidia/gpus", F_OK) == 0;
	c->bounce_mode = !c->on_gpu ? SIM_BOUNCE_HOST : v && !strcmp(v, "hostmap")
							     ? SIM_BOUNCE_HOSTMAP : SIM_BOUNCE_GPU;
	/* Off by default with hostmap, where the only copies are the sends' reads
	 * of GPU memory: bounce.c says why it stays on with a GPU buffer. */
	c->copy_lock = (int)env_num("TCPXSIM_COPY_LOCK", c->bounce_mode != SIM_BOUNCE_HOSTMAP, 0, 1);
}

const char *sim_bounce_mode_name(enum sim_bounce_mode m)
{
	return m == SIM_BOUNCE_GPU ? "GPU" : m == SIM_BOUNCE_HOSTMAP ? "GPU-mapped host" : "host";
}
