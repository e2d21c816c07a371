/* What tests/integration/accept_probe.c counts, read by the test through
 * dlsym(..., "accept_probe_read") on the loaded module. */
#ifndef TP_TEST_ACCEPT_PROBE_H
#define TP_TEST_ACCEPT_PROBE_H

struct accept_probe_stats {
	int emu_loaded;              /* the emulator's table was found */
	int in_flight_at_first_done; /* accepts in flight, the completing one too; -1: none yet */
	int max_in_flight;
	int completed;
};

struct accept_probe_stats accept_probe_read(void);

#endif
