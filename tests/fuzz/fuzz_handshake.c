/* libFuzzer target: the server side of the rendezvous handshake
 * (src/core/setup/handshake.c) fed the peer's bytes through a socket pair, on the
 * emulator plugin, with a 20 ms deadline.  The first byte picks a session
 * with or without a token: with one, nothing should get past the MAC
 * checks; without, seeds with a well-formed blob reach the plugin and fail
 * there quickly (connection refused, or the deadline). */
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/socket.h>

#include "core/conn.h"
#include "core/setup/handshake.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static tcpx_p2p_session *sess[2];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	int i;

	/* Pending connects of failed handshakes are released at once.  The
	 * sessions take their settings from the environment: the objects are
	 * linked without the library's version script, so the versioned public
	 * config_init may not resolve here. */
	setenv("TCPX_EMU_CONNECT_ABANDON_MS", "1", 1);
	setenv("TCPX_P2P_LOG_LEVEL", "none", 1);
	setenv("TCPX_P2P_PLUGIN", TP_FUZZ_PLUGIN, 1);
	setenv("TCPX_P2P_NUM_CHANNELS", "1", 1);
	for (i = 0; i < 2; i++) {
		if (i)
			setenv("TCPX_P2P_AUTH_TOKEN", "fuzz-token-0123456789", 1);
		else
			unsetenv("TCPX_P2P_AUTH_TOKEN");
		if (tcpx_p2p_session_create(NULL, &sess[i]))
			abort();
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tcpx_p2p_conn *c = NULL;
	tp_deadline deadline;
	int sv[2];

	if (size < 1 || size > 100000 || socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		return 0;
	if (write(sv[1], data + 1, size - 1) == (ssize_t)(size - 1)) {
		shutdown(sv[1], SHUT_WR);
		deadline = tp__deadline_ms(20);
		if (tp__handshake(sess[data[0] & 1], sv[0], "fuzz", true, deadline, deadline,
				  &c) == 0) {
			c->rdv_fd = -1; /* closed below */
			tcpx_p2p_conn_destroy(c);
		}
	}
	close(sv[0]);
	close(sv[1]);
	return 0;
}
