#include "bench_numa.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#ifdef TP_BENCH_HAVE_NUMA
#include <numa.h>
#endif

/* sysfs numa_node of a PCI device: -1 when unknown. */
static int pci_node(const char *bus_id)
{
	char path[128];
	FILE *f;
	int node = -1;
	size_t i;

	if (snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/numa_node", bus_id) >=
	    (int)sizeof(path))
		return -1;
	for (i = strlen("/sys/bus/pci/devices/"); path[i] && path[i] != '/'; i++)
		path[i] = (char)tolower((unsigned char)path[i]);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (fscanf(f, "%d", &node) != 1)
		node = -1;
	fclose(f);
	return node;
}

int bench_numa_bind(int node, const char *bus_id, const char **why)
{
	if (node == BENCH_NUMA_OFF) {
		*why = "off";
		return -1;
	}
#ifdef TP_BENCH_HAVE_NUMA
	if (numa_available() < 0 || numa_max_node() == 0) {
		*why = "one NUMA node";
		return -1;
	}
	if (node == BENCH_NUMA_AUTO)
		node = bus_id ? pci_node(bus_id) : -1;
	if (node < 0 || node > numa_max_node()) {
		*why = "NUMA node of the GPU unknown";
		return -1;
	}
	if (numa_run_on_node(node) != 0) {
		*why = "numa_run_on_node failed";
		return -1;
	}
	numa_set_preferred(node);
	*why = "bound";
	return node;
#else
	(void)pci_node;
	*why = "built without libnuma";
	return -1;
#endif
}
