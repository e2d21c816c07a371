/* nixl_post: what one postXferReq of a prepared NIXL request costs the
 * caller through the TCPX backend, and the transfer's rate.  Two agents in
 * this process (DRAM), one request of --blocks descriptors of --block-size
 * bytes each (every other block of both buffers, so nothing merges),
 * made once (createXferReq: the backend's prepared list) and posted
 * --iters times after --warmup, each post waited for before the next.
 * Prints the post's time inside postXferReq (mean, p50, p99, min, max,
 * microseconds), the request's creation, and GB/s from post to done.
 * Needs NIXL_PLUGIN_DIR naming the folder of libplugin_TCPX.so.
 *
 * usage: nixl_post [--blocks N] [--block-size BYTES] [--iters N]
 *                  [--warmup N] [--op write|read]
 */
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <nixl.h>

namespace {

using steady = std::chrono::steady_clock;

double usSince(steady::time_point t0)
{
	return std::chrono::duration<double, std::micro>(steady::now() - t0).count();
}

bool makeAgent(std::unique_ptr<nixlAgent> &a, const std::string &name)
{
	nixlAgentConfig cfg(false, false);
	a = std::make_unique<nixlAgent>(name, cfg);
	nixl_b_params_t params = {{"ip_addr", "127.0.0.1"}, {"gpu", "-1"}};
	nixlBackendH *b = nullptr;
	if (a->createBackend("TCPX", params, b) != NIXL_SUCCESS) {
		fprintf(stderr, "nixl_post: createBackend(TCPX) failed (NIXL_PLUGIN_DIR?)\n");
		return false;
	}
	return true;
}

double pct(std::vector<double> v, double p)
{
	std::sort(v.begin(), v.end());
	return v[std::min(v.size() - 1, static_cast<size_t>(p * (v.size() - 1) + 0.5))];
}

} // namespace

int main(int argc, char **argv)
{
	size_t blocks = 1024, block = 64 << 10;
	int iters = 200, warmup = 20;
	nixl_xfer_op_t op = NIXL_WRITE;
	for (int k = 1; k + 1 < argc; k += 2) {
		std::string o = argv[k], v = argv[k + 1];
		if (o == "--blocks")
			blocks = strtoull(v.c_str(), nullptr, 0);
		else if (o == "--block-size")
			block = strtoull(v.c_str(), nullptr, 0);
		else if (o == "--iters")
			iters = atoi(v.c_str());
		else if (o == "--warmup")
			warmup = atoi(v.c_str());
		else if (o == "--op" && (v == "write" || v == "read"))
			op = v == "write" ? NIXL_WRITE : NIXL_READ;
		else {
			fprintf(stderr, "nixl_post: unknown option %s %s\n", o.c_str(), v.c_str());
			return 2;
		}
	}
	if (argc % 2 == 0 || !blocks || !block || iters < 1 || warmup < 0) {
		fprintf(stderr, "usage: nixl_post [--blocks N] [--block-size BYTES] [--iters N] "
				"[--warmup N] [--op write|read]\n");
		return 2;
	}
	std::unique_ptr<nixlAgent> ini, tgt;
	if (!makeAgent(ini, "post-initiator") || !makeAgent(tgt, "post-target"))
		return 1;
	const size_t len = 2 * blocks * block;
	std::vector<unsigned char> src(len, 0x5a), dst(len, 0);
	nixl_reg_dlist_t rs(DRAM_SEG), rd(DRAM_SEG);
	rs.addDesc(nixlBlobDesc(reinterpret_cast<uintptr_t>(src.data()), len, 0, ""));
	rd.addDesc(nixlBlobDesc(reinterpret_cast<uintptr_t>(dst.data()), len, 0, ""));
	nixl_blob_t md;
	std::string name;
	if (ini->registerMem(rs) != NIXL_SUCCESS || tgt->registerMem(rd) != NIXL_SUCCESS ||
	    tgt->getLocalMD(md) != NIXL_SUCCESS || ini->loadRemoteMD(md, name) != NIXL_SUCCESS) {
		fprintf(stderr, "nixl_post: registration or metadata failed\n");
		return 1;
	}
	nixl_xfer_dlist_t ls(DRAM_SEG), ld(DRAM_SEG);
	for (size_t b = 0; b < blocks; b++) {
		ls.addDesc(nixlBasicDesc(reinterpret_cast<uintptr_t>(src.data()) + 2 * b * block,
					 block, 0));
		ld.addDesc(nixlBasicDesc(reinterpret_cast<uintptr_t>(dst.data()) + 2 * b * block,
					 block, 0));
	}
	nixlXferReqH *req = nullptr;
	/* the first creation dials the target and imports its region */
	if (ini->createXferReq(op, ls, ld, "post-target", req) != NIXL_SUCCESS ||
	    ini->releaseXferReq(req) != NIXL_SUCCESS) {
		fprintf(stderr, "nixl_post: createXferReq failed\n");
		return 1;
	}
	auto t0 = steady::now();
	if (ini->createXferReq(op, ls, ld, "post-target", req) != NIXL_SUCCESS) {
		fprintf(stderr, "nixl_post: createXferReq failed\n");
		return 1;
	}
	const double create_us = usSince(t0);
	std::vector<double> post_us, total_us;
	for (int k = 0; k < warmup + iters; k++) {
		t0 = steady::now();
		nixl_status_t st = ini->postXferReq(req);
		const double p = usSince(t0);
		while (st == NIXL_IN_PROG)
			st = ini->getXferStatus(req);
		const double t = usSince(t0);
		if (st != NIXL_SUCCESS) {
			fprintf(stderr, "nixl_post: transfer %d failed: %s\n", k,
				nixlEnumStrings::statusStr(st).c_str());
			return 1;
		}
		if (k >= warmup) {
			post_us.push_back(p);
			total_us.push_back(t);
		}
	}
	double sum = 0, tsum = 0;
	for (size_t k = 0; k < post_us.size(); k++) {
		sum += post_us[k];
		tsum += total_us[k];
	}
	const double bytes = static_cast<double>(blocks * block) * post_us.size();
	printf("op=%s blocks=%zu block=%zu iters=%d create_us=%.1f post_us mean=%.1f p50=%.1f "
	       "p99=%.1f min=%.1f max=%.1f gbps=%.2f\n",
	       op == NIXL_WRITE ? "write" : "read", blocks, block, iters, create_us,
	       sum / post_us.size(), pct(post_us, 0.5), pct(post_us, 0.99),
	       pct(post_us, 0.0), pct(post_us, 1.0), bytes / (tsum * 1e3));
	for (size_t b = 0; op == NIXL_WRITE && b < blocks; b++)
		if (memcmp(src.data() + 2 * b * block, dst.data() + 2 * b * block, block) != 0) {
			fprintf(stderr, "nixl_post: block %zu did not arrive\n", b);
			return 1;
		}
	ini->releaseXferReq(req);
	ini->invalidateRemoteMD("post-target");
	ini->deregisterMem(rs);
	tgt->deregisterMem(rd);
	return 0;
}
