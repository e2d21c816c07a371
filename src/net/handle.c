/* Peer handles: the in-progress connect fields of the plugin layouts we know
 * (src/abi/handle_layout.h) are zero in every handle a listen produces, so
 * bytes there in a handle from a peer are forged or corrupt; and the socket
 * and thread counts there index fixed arrays in the plugin's comm, so they
 * must be in range. */
#include <string.h>

#include "abi/handle_layout.h"
#include "net/net.h"

struct tp_span {
	unsigned short off, len;
};

/* An int the plugin indexes arrays with: 1..max, and (max_of >= 0) at most
 * the int at offset max_of (threads never outnumber sockets). */
struct tp_count {
	short off, max, max_of;
};

struct tp_layout {
	const char *prefix; /* of the plugin's name */
	struct tp_span span[2];
	int nspan;
	struct tp_count count[2];
	int ncount;
};

static const struct tp_layout tp_layouts[] = {
	{ "GPUDirectTCPX",
	  { { TP_TCPX_HANDLE_CONNECT_ARGS_OFF, TP_TCPX_HANDLE_CONNECT_ARGS_LEN } }, 1,
	  { { TP_TCPX_HANDLE_NUM_SOCKS_OFF, TP_TCPX_MAX_SOCKS, -1 },
	    { TP_TCPX_HANDLE_NUM_THREADS_OFF, TP_TCPX_MAX_SOCKS, TP_TCPX_HANDLE_NUM_SOCKS_OFF } }, 2 },
	{ "TCPXEmu",
	  { { TP_EMU_HANDLE_STAGE_OFF, TP_EMU_HANDLE_STAGE_LEN },
	    { TP_EMU_HANDLE_PROGRESS_OFF, TP_EMU_HANDLE_PROGRESS_LEN } }, 2,
	  { { 0, 0, 0 } }, 0 },
	{ "Socket",
	  { { TP_NCCL_SOCKET_HANDLE_STAGE_OFF, TP_NCCL_SOCKET_HANDLE_STAGE_LEN } }, 1,
	  { { TP_NCCL_SOCKET_HANDLE_NSOCKS_OFF, TP_NCCL_SOCKET_MAX_SOCKS, -1 },
	    { TP_NCCL_SOCKET_HANDLE_NTHREADS_OFF, TP_NCCL_SOCKET_MAX_THREADS, -1 } }, 2 },
};

/* The layout of the plugin named plugin, NULL when unknown. */
static const struct tp_layout *find_layout(const char *plugin)
{
	const struct tp_layout *l;

	for (l = tp_layouts; plugin && l < tp_layouts + sizeof(tp_layouts) / sizeof(tp_layouts[0]);
	     l++)
		if (!strncmp(plugin, l->prefix, strlen(l->prefix)))
			return l;
	return NULL;
}

static int read_int(const unsigned char *handle, int off)
{
	int v;

	memcpy(&v, handle + off, sizeof(v));
	return v;
}

int tp__net_handle_counts(const char *plugin, const unsigned char *handle, int *bad_off)
{
	const struct tp_layout *l = find_layout(plugin);
	int i, v;

	*bad_off = -1;
	for (i = 0; l && i < l->ncount; i++) {
		const struct tp_count *c = &l->count[i];

		v = read_int(handle, c->off);
		if (v < 1 || v > c->max || (c->max_of >= 0 && v > read_int(handle, c->max_of))) {
			*bad_off = c->off;
			return -1;
		}
	}
	return 0;
}

int tp__net_handle_scrub(const char *plugin, unsigned char *handle, int *dirty_off)
{
	const struct tp_layout *l = find_layout(plugin);
	int i, j;

	*dirty_off = -1;
	if (!l)
		return 0;
	for (i = 0; i < l->nspan; i++) {
		for (j = l->span[i].off; j < l->span[i].off + l->span[i].len; j++)
			if (handle[j] && *dirty_off < 0)
				*dirty_off = j;
		memset(handle + l->span[i].off, 0, l->span[i].len);
	}
	return 1;
}
