/* libFuzzer target: the rendezvous frame parser (src/core/setup/rdv_frame.c), both the
 * pure header decode and the receive path over a socket pair. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#include "core/setup/rdv_frame.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static unsigned char buf[TP_RDV_FRAME_MAX];
	struct tp_rdv_frame_hdr hdr;
	uint32_t len, cap;
	uint16_t type;
	int sv[2];

	if (size < sizeof(hdr))
		return 0;
	memcpy(&hdr, data, sizeof(hdr));
	cap = size > sizeof(hdr) + 2 ? (uint32_t)data[sizeof(hdr)] << 8 | data[sizeof(hdr) + 1] :
				       TP_RDV_FRAME_MAX;
	for (type = TP_RDV_FRAME_ANY; type <= TP_RDV_FRAME_AUTH; type++)
		tp__rdv_frame_decode(&hdr, type, cap, &len);
	/* The same bytes as a peer would send them (at most what a socket
	 * buffer holds, so the write never blocks). */
	if (size > 100000 || socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		return 0;
	if (write(sv[1], data, size) == (ssize_t)size) {
		shutdown(sv[1], SHUT_WR);
		while (tp__rdv_frame_recv_any(sv[0], &type, buf, sizeof(buf), &len, 0) == 0)
			;
	}
	close(sv[0]);
	close(sv[1]);
	return 0;
}
