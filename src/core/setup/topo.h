/* Which NIC is closest to a GPU in the PCIe tree (the one behind the same
 * switch on A3: GPU 0/1 -> eth1, 2/3 -> eth2, ...). */
#ifndef TP_CORE_TOPO_H
#define TP_CORE_TOPO_H

/* Index of the path in nic_paths sharing the most leading components
 * ("/"-separated) with gpu_path; the first of equals wins.  -1 when none
 * shares at least /sys/devices/<root complex>, or gpu_path is empty. */
int tp__topo_closest(const char *gpu_path, const char *const *nic_paths, int n);

/* Every path tied for the most shared components (all NICs behind the
 * GPU's switch): their indices in out (at most max), and their number;
 * 0 when tp__topo_closest would return -1. */
int tp__topo_closest_set(const char *gpu_path, const char *const *nic_paths, int n, int *out,
			 int max);

/* The sysfs device path of a PCI bus id ("0000:04:00.0"), resolved through
 * /sys/bus/pci/devices; 0 or -1 (no sysfs entry). */
int tp__topo_pci_path(const char *bus_id, char *path, unsigned long len);

#endif
