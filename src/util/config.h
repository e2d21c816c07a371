/* Internal side of the configuration table (src/util/config.c). */
#ifndef TP_UTIL_CONFIG_H
#define TP_UTIL_CONFIG_H

#include "tcpx_p2p.h"

#define TP_MAX_CHANNELS TCPX_P2P_MAX_CHANNELS
#define TP_MAX_WINDOW 16           /* the TCPX plugin's requests per comm */
#define TP_MAX_CHUNKS_PER_CHANNEL 16 /* chunks_per_channel's range: 1..this */
#define TP_MAX_CHUNK (4u << 20)    /* one TCPX receive request */
#define TP_DEFAULT_CHUNK (2u << 20)

/* tcpx_p2p_config_init for the library's own use (the public name is
 * versioned per struct size). */
int tp__config_init(tcpx_p2p_config *cfg);
int tp__config_init_v01(tcpx_p2p_config *cfg);
int tp__config_init_v02(tcpx_p2p_config *cfg);
int tp__config_init_v05(tcpx_p2p_config *cfg);
int tp__config_init_v06(tcpx_p2p_config *cfg);
int tp__config_init_v07(tcpx_p2p_config *cfg);
int tp__config_init_v13(tcpx_p2p_config *cfg);
int tp__config_init_v08(tcpx_p2p_config *cfg);

/* Check every field; on error the detail names the field and its range.
 * Callers with an older, smaller struct get defaults for the missing
 * fields: *out is always a full current struct. */
int tp__config_resolve(const tcpx_p2p_config *in, tcpx_p2p_config *out);

#endif
