#include "core/setup/topo.h"

#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Number of whole leading components a and b share. */
static int shared_components(const char *a, const char *b)
{
	int n = 0;

	for (;;) {
		while (*a == '/')
			a++;
		while (*b == '/')
			b++;
		if (!*a || !*b)
			return n;
		size_t la = strcspn(a, "/"), lb = strcspn(b, "/");

		if (la != lb || strncmp(a, b, la) != 0)
			return n;
		n++;
		a += la;
		b += lb;
	}
}

/* "/sys/devices/pci0000:00": fewer shared components is another root. */
#define TP_TOPO_MIN_SHARED 3

int tp__topo_closest(const char *gpu_path, const char *const *nic_paths, int n)
{
	int best = -1, best_shared = TP_TOPO_MIN_SHARED - 1, i, k;

	if (!gpu_path || !*gpu_path || !nic_paths)
		return -1;
	for (i = 0; i < n; i++) {
		if (!nic_paths[i] || !*nic_paths[i])
			continue;
		k = shared_components(gpu_path, nic_paths[i]);
		if (k > best_shared) {
			best = i;
			best_shared = k;
		}
	}
	return best;
}

int tp__topo_closest_set(const char *gpu_path, const char *const *nic_paths, int n, int *out,
			 int max)
{
	int best = tp__topo_closest(gpu_path, nic_paths, n), k, i, cnt = 0;

	if (best < 0)
		return 0;
	k = shared_components(gpu_path, nic_paths[best]);
	for (i = best; i < n && cnt < max; i++)
		if (nic_paths[i] && *nic_paths[i] && shared_components(gpu_path, nic_paths[i]) == k)
			out[cnt++] = i;
	return cnt;
}

int tp__topo_pci_path(const char *bus_id, char *path, unsigned long len)
{
	char link[128], resolved[PATH_MAX];
	size_t i;

	if (snprintf(link, sizeof(link), "/sys/bus/pci/devices/%s", bus_id) >= (int)sizeof(link))
		return -1;
	/* sysfs names are lower case; CUDA prints upper-case hex */
	for (i = strlen("/sys/bus/pci/devices/"); link[i]; i++)
		link[i] = (char)tolower((unsigned char)link[i]);
	if (!realpath(link, resolved) || strlen(resolved) >= len)
		return -1;
	strcpy(path, resolved);
	return 0;
}
