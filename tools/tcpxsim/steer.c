/* Flow steering and the bounce buffers it picks between (steer.h). */
#include "steer.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "devmem.h"
#include "real.h"
#include "report.h"
#include "settings.h"

#define MAX_RULES 4096

/* `lock` guards the rules and the bounce buffers' creation: nothing on the
 * data path but a socket's first steering. */
static struct {
	pthread_mutex_t lock;
	struct sim_bounce *bounce[SIM_MAX_GPUS]; /* by index in sim_cfg.gpus */
	struct rxdm_rule rules[MAX_RULES];
	int nrules;
	uint64_t rule_gen;       /* bumped at every rule change; starts at 1 (atomic reads) */
} R = {.lock = PTHREAD_MUTEX_INITIALIZER, .rule_gen = 1};

/* Addresses compare as text after one normal form (IPv4-mapped IPv6
 * addresses as plain IPv4). */
static void normal_ip(const char *in, char *out, size_t cap)
{
	struct in6_addr a6;
	struct in_addr a4;
	if (inet_pton(AF_INET6, in, &a6) == 1) {
		if (IN6_IS_ADDR_V4MAPPED(&a6)) {
			memcpy(&a4, &a6.s6_addr[12], 4);
			inet_ntop(AF_INET, &a4, out, (socklen_t)cap);
		} else {
			inet_ntop(AF_INET6, &a6, out, (socklen_t)cap);
		}
	} else if (inet_pton(AF_INET, in, &a4) == 1) {
		inet_ntop(AF_INET, &a4, out, (socklen_t)cap);
	} else {
		snprintf(out, cap, "%s", in);
	}
}

static int addr_text(const struct sockaddr_storage *a, char *ip, size_t cap, int *port)
{
	char raw[64];
	if (a->ss_family == AF_INET) {
		const struct sockaddr_in *s4 = (const void *)a;
		inet_ntop(AF_INET, &s4->sin_addr, raw, sizeof(raw));
		*port = ntohs(s4->sin_port);
	} else if (a->ss_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const void *)a;
		inet_ntop(AF_INET6, &s6->sin6_addr, raw, sizeof(raw));
		*port = ntohs(s6->sin6_port);
	} else {
		return -1;
	}
	normal_ip(raw, ip, cap);
	return 0;
}

/* The bounce buffer of `gpu`, made on first use.  Called with R.lock
 * held. */
static struct sim_bounce *bounce_of(const char *gpu, char *err, size_t errlen)
{
	int i;
	for (i = 0; i < sim_cfg.ngpus; i++)
		if (!strcmp(sim_cfg.gpus[i], gpu))
			break;
	if (i == sim_cfg.ngpus) {
		snprintf(err, errlen, "GPU %s is not served", gpu);
		return NULL;
	}
	if (!R.bounce[i]) {
		size_t bytes = sim_cfg.bounce_bytes;
		if (sim_cfg.pool_pages && (size_t)sim_cfg.pool_pages * DEVMEM_PAGE < bytes)
			bytes = (size_t)sim_cfg.pool_pages * DEVMEM_PAGE;
		if (sim_bounce_create(gpu, bytes, sim_cfg.bounce_mode, sim_now_ns(), &R.bounce[i],
				      err, errlen))
			return NULL;
		if (sim_cfg.verbose)
			sim_say("tcpxsim: bounce buffer for %s: %zu bytes in %s memory", gpu,
				R.bounce[i]->size, sim_bounce_mode_name(sim_cfg.bounce_mode));
	}
	return R.bounce[i];
}

struct sim_bounce *sim_steer(int fd, struct sock *s)
{
	struct sockaddr_storage me, peer;
	socklen_t lm = sizeof(me), lp = sizeof(peer);
	char mip[64], pip[64], err[256], gpu[32] = "";
	int mport, pport;
	uint64_t gen = __atomic_load_n(&R.rule_gen, __ATOMIC_ACQUIRE);
	if (s->b || sim_cfg.steering == STEER_NONE || s->rules_seen == gen)
		return s->b;
	if (sim_cfg.steering == STEER_ALL) {
		snprintf(gpu, sizeof(gpu), "%s", sim_cfg.gpus[0]);
	} else {
		if (getsockname(fd, (struct sockaddr *)&me, &lm) ||
		    getpeername(fd, (struct sockaddr *)&peer, &lp) ||
		    addr_text(&me, mip, sizeof(mip), &mport) || addr_text(&peer, pip, sizeof(pip), &pport))
			return NULL;
		pthread_mutex_lock(&R.lock);
		for (int i = 0; i < R.nrules && !gpu[0]; i++) {
			const struct rxdm_rule *r = &R.rules[i];
			if (r->src_port == pport && r->dst_port == mport && !strcmp(r->src_ip, pip) &&
			    !strcmp(r->dst_ip, mip))
				snprintf(gpu, sizeof(gpu), "%s", r->gpu[0] ? r->gpu : sim_cfg.gpus[0]);
		}
		pthread_mutex_unlock(&R.lock);
	}
	if (!gpu[0]) {
		s->rules_seen = gen; /* no need to look again until they change */
		return NULL;
	}
	pthread_mutex_lock(&R.lock);
	struct sim_bounce *b = bounce_of(gpu, err, sizeof(err));
	pthread_mutex_unlock(&R.lock);
	if (!b) {
		sim_say("tcpxsim: no bounce buffer for %s: %s", gpu, err);
		return NULL;
	}
	if (sim_tokens_init(&s->tokens, 2 * b->pool.npages))
		return NULL;
	s->b = b;
	return b;
}

int sim_rules_exist(void)
{
	return __atomic_load_n(&sim_stats.rules, __ATOMIC_RELAXED) != 0;
}

static int op_buffer(const char *gpu, struct sim_bounce **b, char *err, size_t errlen)
{
	pthread_mutex_lock(&R.lock);
	*b = bounce_of(gpu, err, errlen);
	pthread_mutex_unlock(&R.lock);
	return *b ? 0 : -ENODEV;
}

static int op_rule(const struct rxdm_rule *rule, int install, char *err, size_t errlen)
{
	struct rxdm_rule r = *rule;
	int rc = 0;
	normal_ip(rule->src_ip, r.src_ip, sizeof(r.src_ip));
	normal_ip(rule->dst_ip, r.dst_ip, sizeof(r.dst_ip));
	pthread_mutex_lock(&R.lock);
	int i;
	for (i = 0; i < R.nrules; i++)
		if (R.rules[i].src_port == r.src_port && R.rules[i].dst_port == r.dst_port &&
		    !strcmp(R.rules[i].src_ip, r.src_ip) && !strcmp(R.rules[i].dst_ip, r.dst_ip))
			break;
	if (install) {
		if (i < R.nrules) {
			R.rules[i] = r;
		} else if (R.nrules == MAX_RULES) {
			snprintf(err, errlen, "rule table full (%d)", MAX_RULES);
			rc = -ENOSPC;
		} else {
			R.rules[R.nrules++] = r;
		}
	} else if (i < R.nrules) {
		R.rules[i] = R.rules[--R.nrules];
	} else {
		snprintf(err, errlen, "no rule %s:%d -> %s:%d", r.src_ip, r.src_port, r.dst_ip, r.dst_port);
		rc = -ENOENT;
	}
	__atomic_store_n(&sim_stats.rules, (uint64_t)R.nrules, __ATOMIC_RELAXED);
	__atomic_store_n(&R.rule_gen, R.rule_gen + 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&R.lock);
	if (sim_cfg.verbose)
		sim_say("tcpxsim: rule %s %s:%d -> %s:%d gpu %s%s", install ? "install" : "remove",
			r.src_ip, r.src_port, r.dst_ip, r.dst_port, r.gpu, rc ? " (refused)" : "");
	return rc;
}

const struct rxdm_ops sim_rxdm_ops = {op_buffer, op_rule};
