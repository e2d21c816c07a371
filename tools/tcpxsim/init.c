/* The simulator's start and end in a process: its settings, a crash
 * handler, and the RxDM thread with its directory; at exit, its summary. */
#define _GNU_SOURCE
#include <errno.h>
#include <execinfo.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "real.h"
#include "report.h"
#include "rxdm.h"
#include "settings.h"
#include "steer.h"

static struct {
	char prefix[96];
	int own_prefix;
	struct sim_rxdm *rxdm;
} I;

/* A crash under the simulator says where (the plugin's own frames as
 * library+offset, for addr2line), then takes its default course. */
static void on_crash(int sig)
{
	void *frames[64];
	char line[64];
	int n = backtrace(frames, 64);
	int len = snprintf(line, sizeof(line), "tcpxsim: signal %d; backtrace:\n", sig);
	ssize_t k = write(STDERR_FILENO, line, (size_t)len);
	(void)k;
	backtrace_symbols_fd(frames, n, STDERR_FILENO);
	signal(sig, SIG_DFL);
	raise(sig);
}

static void catch_crashes(void)
{
	static const int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE};
	void *warm[1];
	backtrace(warm, 1); /* loads libgcc now, not inside the handler */
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
		struct sigaction sa = {.sa_handler = on_crash, .sa_flags = SA_RESETHAND};
		sigemptyset(&sa.sa_mask);
		sigaction(sigs[i], &sa, NULL);
	}
}

__attribute__((constructor)) static void tcpxsim_init(void)
{
	const char *v;
	char err[256];
	pthread_once(&sim_real.once, sim_real_resolve);
	sim_settings_read();
	if (sim_cfg.backtrace)
		catch_crashes();
	if ((v = getenv("TCPXSIM_RXDM")) && !strcmp(v, "0"))
		return;
	/* Each process serves its own RxDM, in a directory of its own unless
	 * the plugin's prefix is set already. */
	/* A prefix another simulator set (our parent's, inherited) is not
	 * ours to serve: binding its sockets would take them from it. */
	v = getenv("NCCL_GPUDIRECTTCPX_UNIX_CLIENT_PREFIX");
	const char *owner = getenv("TCPXSIM_PREFIX_OWNER");
	if (owner && v && atol(owner) != (long)getpid())
		v = NULL;
	if (v && *v) {
		snprintf(I.prefix, sizeof(I.prefix), "%s", v);
		mkdir(I.prefix, 0700);
	} else {
		snprintf(I.prefix, sizeof(I.prefix), "/tmp/tcpxsim.XXXXXX");
		if (!mkdtemp(I.prefix)) {
			sim_say("tcpxsim: mkdtemp: %s; no RxDM", strerror(errno));
			return;
		}
		I.own_prefix = 1;
		char pid[24];
		snprintf(pid, sizeof(pid), "%ld", (long)getpid());
		setenv("NCCL_GPUDIRECTTCPX_UNIX_CLIENT_PREFIX", I.prefix, 1);
		setenv("TCPXSIM_PREFIX_OWNER", pid, 1);
	}
	if (rxdm_start(I.prefix, sim_cfg.gpus, sim_cfg.ngpus, &sim_rxdm_ops, &I.rxdm, err,
		       sizeof(err)))
		sim_say("tcpxsim: RxDM not started: %s", err);
	else if (sim_cfg.verbose)
		sim_say("tcpxsim: RxDM at %s for %d GPU(s), first %s; bounce in %s memory; copy "
			"lock %s", I.prefix, sim_cfg.ngpus, sim_cfg.gpus[0],
			sim_bounce_mode_name(sim_cfg.bounce_mode), sim_cfg.copy_lock ? "on" : "off");
}

__attribute__((destructor)) static void tcpxsim_fini(void)
{
	struct tcpxsim_stats st;
	tcpxsim_stats_get(&st);
	if (sim_cfg.verbose || st.violations)
		sim_say("tcpxsim: %llu devmem receives, %llu fragments, %llu linear bytes, %llu "
			"unsteered, %llu starved; tokens %llu returned, %llu held; %llu devmem sends, "
			"%llu completions; %llu violations",
			(unsigned long long)st.devmem_recvs, (unsigned long long)st.frags,
			(unsigned long long)st.linear_bytes, (unsigned long long)st.unsteered_recvs,
			(unsigned long long)st.starved, (unsigned long long)st.tokens_returned,
			(unsigned long long)st.tokens_held, (unsigned long long)st.devmem_sends,
			(unsigned long long)st.completions, (unsigned long long)st.violations);
	rxdm_stop(I.rxdm);
	I.rxdm = NULL;
	if (I.own_prefix)
		rmdir(I.prefix);
}
