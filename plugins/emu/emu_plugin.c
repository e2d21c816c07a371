/*
 * init, devices, properties and the environment (the exported tables are
 * in emu_abi.c).
 * Settings are read for every new comm, so one process can try several
 * modes; the properties reflect the settings at the time they are asked.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "emu.h"

ncclDebugLogger_t tp__emu_logger;
int tp__emu_abi;

static long env_long(const char *name, long def, long lo, long hi)
{
	const char *s = getenv(name);
	char *end;
	long v;

	if (!s || !*s)
		return def;
	v = strtol(s, &end, 0);
	if (*end || v < lo || v > hi) {
		EMU_WARN("ignoring %s=%s (want %ld..%ld)", name, s, lo, hi);
		return def;
	}
	return v;
}

static enum emu_bounce bounce_mode(void)
{
	const char *s = getenv("TCPX_EMU_BOUNCE");
	int gpu = tp__emu_cuda_usable();

	if (!s || !*s || !strcasecmp(s, "auto"))
		return gpu ? EMU_BOUNCE_DEVICE : EMU_BOUNCE_OFF;
	if (!strcasecmp(s, "off"))
		return EMU_BOUNCE_OFF;
	if (!strcasecmp(s, "host"))
		return EMU_BOUNCE_HOST;
	if (!strcasecmp(s, "device")) {
		if (gpu)
			return EMU_BOUNCE_DEVICE;
		EMU_WARN("TCPX_EMU_BOUNCE=device without a usable GPU: using host bounce buffers");
		return EMU_BOUNCE_HOST;
	}
	EMU_WARN("unknown TCPX_EMU_BOUNCE=%s (auto|device|host|off): using auto", s);
	return gpu ? EMU_BOUNCE_DEVICE : EMU_BOUNCE_OFF;
}

/* TCPX_EMU_CLOSE_INFLIGHT: 1 for fail-others, 0 for error (the default). */
static int close_mode(void)
{
	const char *s = getenv("TCPX_EMU_CLOSE_INFLIGHT");

	if (!s || !*s || !strcasecmp(s, "error"))
		return 0;
	if (!strcasecmp(s, "fail-others"))
		return 1;
	EMU_WARN("unknown TCPX_EMU_CLOSE_INFLIGHT=%s (error|fail-others): using error", s);
	return 0;
}

/* 1 for eager, 0 for strict (TCPX's model, the default). */
static int progress_mode(void)
{
	const char *s = getenv("TCPX_EMU_PROGRESS");

	if (!s || !*s || !strcasecmp(s, "strict"))
		return 0;
	if (!strcasecmp(s, "eager"))
		return 1;
	EMU_WARN("unknown TCPX_EMU_PROGRESS=%s (strict|eager): using strict", s);
	return 0;
}

/* TCPX_EMU_SHORT_SEND=MIN:DROP (both > 0). */
static void short_send(struct emu_config *cfg)
{
	const char *s = getenv("TCPX_EMU_SHORT_SEND");
	unsigned long long min, drop;
	int end = 0;

	if (!s || !*s)
		return;
	if (sscanf(s, "%llu:%llu%n", &min, &drop, &end) != 2 || s[end] || !min || !drop) {
		EMU_WARN("ignoring TCPX_EMU_SHORT_SEND=%s (want MIN:DROP, both > 0)", s);
		return;
	}
	cfg->short_min = min;
	cfg->short_drop = drop;
}

void tp__emu_config_load(struct emu_config *cfg)
{
	long per = env_long("NCCL_NSOCKS_PERTHREAD", 2, 1, 64);
	long nthr = env_long("NCCL_SOCKET_NTHREADS", 1, 1, 64);
	long total = per * nthr;

	memset(cfg, 0, sizeof(*cfg));
	cfg->bounce = bounce_mode();
	if (total > EMU_MAX_SOCKS) {
		EMU_WARN("NCCL_NSOCKS_PERTHREAD x NCCL_SOCKET_NTHREADS = %ld exceeds %d: clamped",
			 total, EMU_MAX_SOCKS);
		total = EMU_MAX_SOCKS;
	}
	cfg->nsocks = (int)total;
	cfg->task = (uint64_t)env_long("NCCL_DYNAMIC_CHUNK_SIZE", 0, 0, 1L << 30);
	cfg->nthreads = (int)(nthr < total ? nthr : total);
	cfg->pages = (uint32_t)env_long("TCPX_EMU_BOUNCE_PAGES", 8192, 1, 1 << 20);
	/* The path MSS cuts fragments (emu_bounce.c): 8192 is a jumbo-frame
	 * path as on A3; 1448 a 1500-byte MTU, where 4 MiB needs > 2048. */
	cfg->mss = (uint32_t)env_long("TCPX_EMU_MSS", 8192, 512, 65536);
	cfg->poison = env_long("TCPX_EMU_POISON", 0, 0, 1) != 0;
	cfg->strict_tags = env_long("TCPX_EMU_STRICT_TAGS", 0, 0, 1) != 0;
	cfg->null_pct = (int)env_long("TCPX_EMU_NULL_REQ_PCT", 0, 0, 100);
	cfg->cuda_batch = env_long("TCPX_EMU_CUDA_BATCH", 1, 0, 1) != 0;
	cfg->cuda_scatter = env_long("TCPX_EMU_CUDA_SCATTER", 1, 0, 1) != 0;
	cfg->eager = progress_mode();
	cfg->close_fail_others = close_mode();
	cfg->accept_wait_us = (uint32_t)env_long("TCPX_EMU_ACCEPT_WAIT_US", 5000, 0, 60000000);
	cfg->null_bounce = env_long("TCPX_EMU_NULL_BOUNCE", 0, 0, 1) != 0;
	cfg->connect_abandon_ms = (int)env_long("TCPX_EMU_CONNECT_ABANDON_MS", 30000, 1, 86400000);
	short_send(cfg);
	cfg->sizes = (int)env_long("TCPX_EMU_SIZES", -1, -1, 1);
	/* Driven through a table before v7 there is no device handle to
	 * describe bounce pages and no irecvConsumed to return them: receives
	 * land in place and end at test.  NCCL promised such plugins at most
	 * 8 requests per comm, and its socket transport of the time had
	 * exactly 8: so does the emulator. */
	cfg->max_reqs = EMU_MAX_REQS;
	if (tp__emu_abi && tp__emu_abi < 7) {
		cfg->bounce = EMU_BOUNCE_OFF;
		cfg->consume_at_test = 1;
		cfg->max_reqs = EMU_MAX_REQS_V6;
	}
	/* Auto (-1): a receive that lands in place reports its size, as
	 * NCCL's TCP plugins do; one into bounce pages is described by its
	 * fragment records alone, as on TCPX. */
	if (cfg->sizes < 0)
		cfg->sizes = cfg->bounce == EMU_BOUNCE_OFF;
}

ncclResult_t tp__emu_init(ncclDebugLogger_t logger)
{
	tp__emu_logger = logger;
	EMU_INFO("initialised (GPU %s)", tp__emu_cuda_usable() ? "usable" : "not usable");
	return ncclSuccess;
}

/* TCPX_EMU_NDEV: how many devices the plugin reports (all on the same
 * address), so that a library striping channels over NICs can be tested. */
int tp__emu_ndev(void)
{
	return (int)env_long("TCPX_EMU_NDEV", 1, 1, EMU_MAX_DEVS);
}

ncclResult_t tp__emu_devices(int *ndev)
{
	*ndev = tp__emu_ndev();
	return ncclSuccess;
}

/* Device 0 is "tcpxemu", device d > 0 "tcpxemu<d>"; constant, since
 * sessions may ask for properties from several threads at once. */
static char *const prop_names[EMU_MAX_DEVS] = {
	"tcpxemu",    "tcpxemu1",  "tcpxemu2",  "tcpxemu3",  "tcpxemu4",  "tcpxemu5",
	"tcpxemu6",   "tcpxemu7",  "tcpxemu8",  "tcpxemu9",  "tcpxemu10", "tcpxemu11",
	"tcpxemu12",  "tcpxemu13", "tcpxemu14", "tcpxemu15",
};
static char prop_pci[] = "";

ncclResult_t tp__emu_get_properties(int dev, ncclNetProperties_v7_t *props)
{
	int unpack;

	if (dev < 0 || dev >= tp__emu_ndev()) {
		EMU_WARN("getProperties: no device %d", dev);
		return ncclInvalidArgument;
	}
	unpack = bounce_mode() != EMU_BOUNCE_OFF;
	memset(props, 0, sizeof(*props));
	props->name = prop_names[dev];
	props->pciPath = prop_pci;
	props->guid = 0;
	props->ptrSupport = NCCL_PTR_HOST | (tp__emu_cuda_usable() ? NCCL_PTR_CUDA : 0);
	props->speed = 100000;
	props->port = 0;
	props->latency = 0;
	props->maxComms = 65536;
	props->maxRecvs = 1;
	props->netDeviceType = unpack ? NCCL_NET_DEVICE_UNPACK : NCCL_NET_DEVICE_HOST;
	props->netDeviceVersion = unpack ? NCCL_NET_DEVICE_UNPACK_VERSION
					 : NCCL_NET_DEVICE_INVALID_VERSION;
	return ncclSuccess;
}
