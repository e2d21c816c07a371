/* Run a benchmark peer on the NUMA node of its GPU (or of a given node):
 * on A3 a GPU's NIC sits on the same node (docs/tcpx.md, "Running on GCP A3"), and a peer whose
 * CPU and host memory are on the other socket loses bandwidth. */
#ifndef TP_BENCH_NUMA_H
#define TP_BENCH_NUMA_H

#define BENCH_NUMA_AUTO (-1) /* the node of the GPU, if known */
#define BENCH_NUMA_OFF (-2)

/* Bind the calling thread's CPUs and memory to `node` (or, for AUTO, to
 * the node of PCI device bus_id, e.g. "0000:04:00.0"; NULL: nothing).
 * Returns the node bound, -1 when nothing was done (no libnuma, one node,
 * unknown node); *why then says why (static text). */
int bench_numa_bind(int node, const char *bus_id, const char **why);

#endif
