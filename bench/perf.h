/* tcpx_perf: options, one peer's run, and reporting. */
#ifndef TP_BENCH_PERF_H
#define TP_BENCH_PERF_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "bench_util.h"
#include "tcpx_p2p.h"

enum perf_mode { PERF_SERVER, PERF_CLIENT, PERF_LOOPBACK, PERF_AUTO };

#define PERF_MAX_CONNS 64

struct perf_opts {
	enum perf_mode mode;
	const char *host;     /* client: peer to dial */
	const char *bind;     /* server: address to listen on */
	uint16_t port;
	struct bench_sweep sweep;
	int cuda;             /* --mem cuda */
	int gpu[2];           /* server/client GPU (loopback: both) */
	int verify, bidir, dump_config, quiet;
	int numa;             /* node, BENCH_NUMA_AUTO (the GPU's) or BENCH_NUMA_OFF */
	int conns;            /* connections between the peers, 1..PERF_MAX_CONNS */
	const char *json;     /* file for results, "-" = stdout */
	int timeout_ms;
	tcpx_p2p_config cfg;  /* library settings after env + flags */
};

/* Parse argv (and TCPX_P2P_PERF_* / launcher environment).
 * Returns 0, 1 when the program should exit successfully (--help), or -1. */
int perf_parse(int argc, char **argv, struct perf_opts *o);
void perf_dump_config(const struct perf_opts *o, FILE *f);


/* Run one peer: role 0 = server (receiver), 1 = client (sender).  Prints
 * the table when `report` is set; a server calls listening(arg, port) once
 * it listens.  Returns 0, a TCPX_P2P_E* code, or -1 (verification). */
int perf_run(const struct perf_opts *o, int role, int report,
	     void (*listening)(void *arg, uint16_t port), void *arg);

/* What one peer's run reports besides the rows. */
struct perf_peer_info {
	int role;                     /* 0 server, 1 client */
	tcpx_p2p_session_info session;
	int numa_node;                /* bound node, -1 none */
	const char *numa_why;
	double setup_ms;              /* first dial/accept until all conns exist */
};

void perf_print_header(const struct perf_opts *o, const struct perf_peer_info *pi);
void perf_print_row(const struct perf_opts *o, const struct bench_row *r);
int perf_json_open(const struct perf_opts *o, FILE **f);
void perf_json_row(FILE *f, const struct perf_opts *o, const struct perf_peer_info *pi,
		   const struct bench_row *r, int first);
void perf_json_close(FILE *f);

#endif
