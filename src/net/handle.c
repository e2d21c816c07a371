/* Peer handles: the in-progress connect fields of the plugin layouts we know
 * (src/abi/handle_layout.h) are zero in every handle a listen produces, so
 * bytes there in a handle from a peer are forged or corrupt. */
#include <string.h>

#include "abi/handle_layout.h"
#include "net/net.h"

struct tp_span {
	unsigned short off, len;
};

struct tp_layout {
	const char *prefix; /* of the plugin's name */
	struct tp_span span[2];
	int nspan;
};

static const struct tp_layout tp_layouts[] = {
	{ "GPUDirectTCPX",
	  { { TP_TCPX_HANDLE_CONNECT_ARGS_OFF, TP_TCPX_HANDLE_CONNECT_ARGS_LEN } }, 1 },
	{ "TCPXEmu",
	  { { TP_EMU_HANDLE_STAGE_OFF, TP_EMU_HANDLE_STAGE_LEN },
	    { TP_EMU_HANDLE_PROGRESS_OFF, TP_EMU_HANDLE_PROGRESS_LEN } }, 2 },
	{ "Socket",
	  { { TP_NCCL_SOCKET_HANDLE_STAGE_OFF, TP_NCCL_SOCKET_HANDLE_STAGE_LEN } }, 1 },
};

int tp__net_handle_scrub(const char *plugin, unsigned char *handle, int *dirty_off)
{
	const struct tp_layout *l;
	int i, j;

	*dirty_off = -1;
	for (l = tp_layouts; l < tp_layouts + sizeof(tp_layouts) / sizeof(tp_layouts[0]); l++) {
		if (!plugin || strncmp(plugin, l->prefix, strlen(l->prefix)))
			continue;
		for (i = 0; i < l->nspan; i++) {
			for (j = l->span[i].off; j < l->span[i].off + l->span[i].len; j++)
				if (handle[j] && *dirty_off < 0)
					*dirty_off = j;
			memset(handle + l->span[i].off, 0, l->span[i].len);
		}
		return 1;
	}
	return 0;
}
