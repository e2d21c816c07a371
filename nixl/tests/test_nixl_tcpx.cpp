/* The TCPX backend under real NIXL agents: two agents in this process
 * (DRAM, and VRAM where a GPU is usable) move scattered descriptor lists by
 * WRITE and READ with notifications, and every byte is checked; a target
 * process that is killed; metadata that is not ours; requests prepared once
 * and posted as prepared lists, cancelled when released pending; memory
 * deregistered under a transfer, on either side; stale metadata; transfers
 * the target refuses; a restarted target; posts from two threads;
 * agent-local transfers.  Needs NIXL_PLUGIN_DIR naming the folder of libplugin_TCPX.so,
 * and tcpx_count.so preloaded (CTest sets both).
 * Exit 0 pass, 1 fail, 77 skip. */
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <chrono>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <dirent.h>
#include <dlfcn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nixl.h>

#ifdef TP_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace {

int failures = 0;

#define EXPECT(cond)                                                                           \
	do {                                                                                   \
		if (!(cond)) {                                                                 \
			fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);        \
			failures++;                                                            \
		}                                                                              \
	} while (0)

using steady = std::chrono::steady_clock;

struct Agent {
	std::unique_ptr<nixlAgent> agent;
	nixlBackendH *backend = nullptr;
	std::string name;
};

bool makeAgent(Agent &a, const std::string &name, int gpu, const nixl_b_params_t &extra = {},
	       nixl_thread_sync_t sync = nixl_thread_sync_t::NIXL_THREAD_SYNC_DEFAULT)
{
	nixlAgentConfig cfg(false, false, default_comm_port, sync);
	a.name = name;
	a.agent = std::make_unique<nixlAgent>(name, cfg);
	nixl_b_params_t params;
	params["ip_addr"] = "127.0.0.1";
	params["timeout_ms"] = "5000";
	params["gpu"] = std::to_string(gpu);
	for (const auto &[k, v] : extra)
		params[k] = v;
	nixl_status_t st = a.agent->createBackend("TCPX", params, a.backend);
	if (st != NIXL_SUCCESS)
		fprintf(stderr, "createBackend(TCPX) for %s: %d\n", name.c_str(), st);
	return st == NIXL_SUCCESS;
}

bool exchange(Agent &from, Agent &to)
{
	nixl_blob_t md;
	std::string got;
	if (from.agent->getLocalMD(md) != NIXL_SUCCESS)
		return false;
	return to.agent->loadRemoteMD(md, got) == NIXL_SUCCESS && got == from.name;
}

nixl_status_t waitXfer(Agent &a, nixlXferReqH *req, int timeout_ms)
{
	auto end = steady::now() + std::chrono::milliseconds(timeout_ms);
	nixl_status_t st;
	while ((st = a.agent->getXferStatus(req)) == NIXL_IN_PROG && steady::now() < end)
		std::this_thread::sleep_for(std::chrono::microseconds(50));
	return st;
}

/* Polls a's notifications until one from `from` equal to msg arrived;
 * calls check (the data must be in place by then) right when it does. */
template <typename Check>
bool waitNotif(Agent &a, const std::string &from, const std::string &msg, Check check)
{
	auto end = steady::now() + std::chrono::seconds(20);
	while (steady::now() < end) {
		nixl_notifs_t notifs;
		if (a.agent->getNotifs(notifs) != NIXL_SUCCESS)
			return false;
		for (auto &m : notifs[from])
			if (m == msg) {
				check();
				return true;
			}
		std::this_thread::sleep_for(std::chrono::microseconds(100));
	}
	fprintf(stderr, "no notification '%s' from %s at %s\n", msg.c_str(), from.c_str(),
		a.name.c_str());
	return false;
}

/* A buffer of one memory type, with host-side views for filling and
 * checking. */
struct Buffer {
	nixl_mem_t mem;
	int dev;
	size_t len;
	void *ptr = nullptr;
	std::vector<unsigned char> host;

	Buffer(nixl_mem_t m, int d, size_t n) : mem(m), dev(d), len(n), host(n)
	{
#ifdef TP_HAVE_CUDA
		if (mem == VRAM_SEG) {
			if (cudaMalloc(&ptr, len) != cudaSuccess)
				ptr = nullptr;
			return;
		}
#endif
		ptr = host.data();
	}
	~Buffer()
	{
#ifdef TP_HAVE_CUDA
		if (mem == VRAM_SEG && ptr)
			cudaFree(ptr);
#endif
	}
	void fill(unsigned seed)
	{
		std::mt19937 rng(seed);
		for (auto &b : host)
			b = static_cast<unsigned char>(rng());
		push();
	}
	void push()
	{
#ifdef TP_HAVE_CUDA
		if (mem == VRAM_SEG)
			cudaMemcpy(ptr, host.data(), len, cudaMemcpyHostToDevice);
#endif
	}
	void pull()
	{
#ifdef TP_HAVE_CUDA
		if (mem == VRAM_SEG)
			cudaMemcpy(host.data(), ptr, len, cudaMemcpyDeviceToHost);
#endif
	}
	uintptr_t addr() const { return reinterpret_cast<uintptr_t>(ptr); }
	nixl_reg_dlist_t reg() const
	{
		nixl_reg_dlist_t l(mem);
		l.addDesc(nixlBlobDesc(addr(), len, dev, ""));
		return l;
	}
};

/* Scattered blocks of varied sizes: block i goes from src_off[i] to
 * dst_off[i], both orders shuffled. */
struct Layout {
	std::vector<size_t> src_off, dst_off, size;
};

Layout scatter(size_t nblocks, size_t slot, unsigned seed)
{
	Layout l;
	std::mt19937 rng(seed);
	std::vector<size_t> a(nblocks), b(nblocks);
	for (size_t i = 0; i < nblocks; i++)
		a[i] = b[i] = i;
	std::shuffle(a.begin(), a.end(), rng);
	std::shuffle(b.begin(), b.end(), rng);
	for (size_t i = 0; i < nblocks; i++) {
		l.src_off.push_back(a[i] * slot);
		l.dst_off.push_back(b[i] * slot);
		l.size.push_back(1 + rng() % slot);
	}
	return l;
}

nixl_xfer_dlist_t dlist(const Buffer &b, const std::vector<size_t> &off,
			const std::vector<size_t> &size)
{
	nixl_xfer_dlist_t l(b.mem);
	for (size_t i = 0; i < off.size(); i++)
		l.addDesc(nixlBasicDesc(b.addr() + off[i], size[i], b.dev));
	return l;
}

bool sameBlocks(const Buffer &src, const Buffer &dst, const Layout &l, bool forward)
{
	for (size_t i = 0; i < l.size.size(); i++) {
		size_t s = forward ? l.src_off[i] : l.dst_off[i];
		size_t d = forward ? l.dst_off[i] : l.src_off[i];
		if (memcmp(src.host.data() + s, dst.host.data() + d, l.size[i]) != 0) {
			fprintf(stderr, "block %zu (%zu bytes) differs\n", i, l.size[i]);
			return false;
		}
	}
	return true;
}

/* Initiator i WRITEs scattered blocks of its buffer into target t's, with a
 * notification; then READs other blocks of t's back, with one. */
void writeAndRead(Agent &i, Agent &t, nixl_mem_t mem, int dev, const char *what)
{
	const size_t nblocks = 257, slot = 9000;
	Buffer ib(mem, dev, nblocks * slot), tb(mem, dev, nblocks * slot);
	if (!ib.ptr || !tb.ptr) {
		EXPECT(!"allocation");
		return;
	}
	ib.fill(1);
	tb.fill(2);
	EXPECT(i.agent->registerMem(ib.reg()) == NIXL_SUCCESS);
	EXPECT(t.agent->registerMem(tb.reg()) == NIXL_SUCCESS);
	EXPECT(exchange(t, i));

	Layout w = scatter(nblocks, slot, 3);
	nixlXferReqH *req = nullptr;
	nixl_opt_args_t args;
	args.notif = std::string(what) + " write done";
	EXPECT(i.agent->createXferReq(NIXL_WRITE, dlist(ib, w.src_off, w.size),
				      dlist(tb, w.dst_off, w.size), t.name, req,
				      &args) == NIXL_SUCCESS);
	if (!req)
		return;
	nixl_status_t st = i.agent->postXferReq(req);
	EXPECT(st == NIXL_SUCCESS || st == NIXL_IN_PROG);
	/* the target sees the notification only with every byte in place */
	EXPECT(waitNotif(t, i.name, *args.notif, [&] {
		tb.pull();
		EXPECT(sameBlocks(ib, tb, w, true));
	}));
	EXPECT(waitXfer(i, req, 20000) == NIXL_SUCCESS);
	/* a repost of the same request, with new data */
	ib.fill(4);
	st = i.agent->postXferReq(req);
	EXPECT(st == NIXL_SUCCESS || st == NIXL_IN_PROG);
	EXPECT(waitXfer(i, req, 20000) == NIXL_SUCCESS);
	EXPECT(waitNotif(t, i.name, *args.notif, [] {}));
	tb.pull();
	EXPECT(sameBlocks(ib, tb, w, true));
	EXPECT(i.agent->releaseXferReq(req) == NIXL_SUCCESS);

	Layout r = scatter(nblocks, slot, 5);
	tb.fill(6);
	args.notif = std::string(what) + " read done";
	req = nullptr;
	EXPECT(i.agent->createXferReq(NIXL_READ, dlist(ib, r.src_off, r.size),
				      dlist(tb, r.dst_off, r.size), t.name, req,
				      &args) == NIXL_SUCCESS);
	if (!req)
		return;
	st = i.agent->postXferReq(req);
	EXPECT(st == NIXL_SUCCESS || st == NIXL_IN_PROG);
	EXPECT(waitXfer(i, req, 20000) == NIXL_SUCCESS);
	ib.pull();
	EXPECT(sameBlocks(tb, ib, r, false));
	EXPECT(waitNotif(t, i.name, *args.notif, [] {}));
	EXPECT(i.agent->releaseXferReq(req) == NIXL_SUCCESS);

	/* standalone notifications, both ways (t answers on i's connection) */
	EXPECT(i.agent->genNotif(t.name, "ping") == NIXL_SUCCESS);
	EXPECT(waitNotif(t, i.name, "ping", [] {}));
	EXPECT(exchange(i, t));
	EXPECT(t.agent->genNotif(i.name, "pong") == NIXL_SUCCESS);
	EXPECT(waitNotif(i, t.name, "pong", [] {}));
	/* notifications of any length up to the peer's notif_max_bytes (64 KiB):
	 * past the 1 KiB of tcpx_p2p_notif, and just under the bound */
	for (size_t n : {(size_t)2000, (size_t)(60 << 10)}) {
		std::string big(n, 'x');
		for (size_t k = 0; k < n; k++)
			big[k] = static_cast<char>('a' + (k * 7 + n) % 26);
		EXPECT(i.agent->genNotif(t.name, big) == NIXL_SUCCESS);
		EXPECT(waitNotif(t, i.name, big, [] {}));
	}
	/* more than the peer takes */
	EXPECT(i.agent->genNotif(t.name, std::string(70000, 'x')) != NIXL_SUCCESS);

	EXPECT(t.agent->invalidateRemoteMD(i.name) == NIXL_SUCCESS);
	EXPECT(i.agent->invalidateRemoteMD(t.name) == NIXL_SUCCESS);
	EXPECT(i.agent->deregisterMem(ib.reg()) == NIXL_SUCCESS);
	EXPECT(t.agent->deregisterMem(tb.reg()) == NIXL_SUCCESS);
	fprintf(stderr, "%s: WRITE, repost, READ of %zu scattered blocks, notifications: %s\n",
		what, nblocks, failures ? "FAILED" : "ok");
}

/* Replaces the first `from` in s by `to` (same length); false if absent. */
bool patch(std::string &s, const std::string &from, const std::string &to)
{
	size_t at = s.find(from);
	if (at == std::string::npos)
		return false;
	s.replace(at, from.size(), to);
	return true;
}

void badMetadata(Agent &good)
{
	Buffer b(DRAM_SEG, 0, 4096);
	EXPECT(good.agent->registerMem(b.reg()) == NIXL_SUCCESS);
	nixl_blob_t md;
	EXPECT(good.agent->getLocalMD(md) == NIXL_SUCCESS);
	std::string name;
	{
		Agent x;
		EXPECT(makeAgent(x, "bad-conninfo", -1));
		std::string m = md;
		EXPECT(patch(m, "TCPX1 ", "TCPX9 "));
		EXPECT(x.agent->loadRemoteMD(m, name) != NIXL_SUCCESS);
		EXPECT(x.agent->loadRemoteMD("not metadata", name) != NIXL_SUCCESS);
	}
	{
		Agent x;
		EXPECT(makeAgent(x, "bad-region", -1));
		std::string m = md;
		EXPECT(patch(m, "TPR1", "TPR7"));
		EXPECT(x.agent->loadRemoteMD(m, name) != NIXL_SUCCESS);
	}
	EXPECT(good.agent->deregisterMem(b.reg()) == NIXL_SUCCESS);
	fprintf(stderr, "bad metadata refused: %s\n", failures ? "FAILED" : "ok");
}

/* A target in a child process that is killed: the initiator's transfers
 * fail with an error, in bounded time, and nothing hangs. */
void peerGoesAway()
{
	int md_pipe[2], go_pipe[2];
	if (pipe(md_pipe) || pipe(go_pipe)) {
		EXPECT(!"pipe");
		return;
	}
	pid_t pid = fork();
	if (pid == 0) {
		close(md_pipe[0]);
		close(go_pipe[1]);
		Agent t;
		if (!makeAgent(t, "doomed", -1))
			_exit(2);
		static std::vector<unsigned char> mem(1 << 20);
		nixl_reg_dlist_t l(DRAM_SEG);
		l.addDesc(nixlBlobDesc(reinterpret_cast<uintptr_t>(mem.data()), mem.size(), 0, ""));
		nixl_blob_t md;
		if (t.agent->registerMem(l) != NIXL_SUCCESS || t.agent->getLocalMD(md) != NIXL_SUCCESS)
			_exit(3);
		uint64_t n = md.size();
		uint64_t addr = reinterpret_cast<uintptr_t>(mem.data());
		if (write(md_pipe[1], &n, 8) != 8 || write(md_pipe[1], &addr, 8) != 8 ||
		    write(md_pipe[1], md.data(), n) != static_cast<ssize_t>(n))
			_exit(4);
		char c;
		(void)!read(go_pipe[0], &c, 1); /* the parent kills us meanwhile */
		_exit(0);
	}
	close(md_pipe[1]);
	close(go_pipe[0]);
	uint64_t n = 0, raddr = 0;
	std::string md;
	bool ok = read(md_pipe[0], &n, 8) == 8 && read(md_pipe[0], &raddr, 8) == 8;
	md.resize(n);
	size_t got = 0;
	while (ok && got < n) {
		ssize_t r = read(md_pipe[0], md.data() + got, n - got);
		if (r <= 0)
			ok = false;
		else
			got += r;
	}
	EXPECT(ok);
	Agent i;
	EXPECT(makeAgent(i, "survivor", -1));
	Buffer b(DRAM_SEG, 0, 1 << 20);
	b.fill(7);
	EXPECT(i.agent->registerMem(b.reg()) == NIXL_SUCCESS);
	std::string name;
	EXPECT(ok && i.agent->loadRemoteMD(md, name) == NIXL_SUCCESS);
	nixl_xfer_dlist_t src(DRAM_SEG), dst(DRAM_SEG);
	src.addDesc(nixlBasicDesc(b.addr(), b.len, 0));
	dst.addDesc(nixlBasicDesc(raddr, b.len, 0));
	nixlXferReqH *req = nullptr;
	EXPECT(i.agent->createXferReq(NIXL_WRITE, src, dst, "doomed", req) == NIXL_SUCCESS);
	if (req) {
		nixl_status_t st = i.agent->postXferReq(req);
		EXPECT(st == NIXL_SUCCESS || st == NIXL_IN_PROG);
		EXPECT(waitXfer(i, req, 20000) == NIXL_SUCCESS);
	}
	kill(pid, SIGKILL);
	int status;
	waitpid(pid, &status, 0);
	auto t0 = steady::now();
	nixl_status_t st = NIXL_SUCCESS;
	/* until the loss is seen: each post either fails or its transfer does */
	for (int k = 0; k < 100 && req && st == NIXL_SUCCESS; k++) {
		st = i.agent->postXferReq(req);
		if (st == NIXL_SUCCESS || st == NIXL_IN_PROG)
			st = waitXfer(i, req, 20000);
		if (st == NIXL_SUCCESS)
			std::this_thread::sleep_for(std::chrono::milliseconds(20));
	}
	double s = std::chrono::duration<double>(steady::now() - t0).count();
	EXPECT(st != NIXL_SUCCESS && st != NIXL_IN_PROG);
	EXPECT(s < 15);
	fprintf(stderr, "peer killed: transfer failed with %d after %.2f s\n", st, s);
	if (req)
		i.agent->releaseXferReq(req);
	nixlXferReqH *again = nullptr;
	EXPECT(i.agent->createXferReq(NIXL_WRITE, src, dst, "doomed", again) != NIXL_SUCCESS);
	/* NIXL may have dropped the peer itself on NIXL_ERR_REMOTE_DISCONNECT */
	nixl_status_t inv = i.agent->invalidateRemoteMD("doomed");
	EXPECT(inv == NIXL_SUCCESS || inv == NIXL_ERR_NOT_FOUND);
	EXPECT(i.agent->deregisterMem(b.reg()) == NIXL_SUCCESS);
	close(md_pipe[0]);
	close(go_pipe[1]);
}

/* Registrations past what an ABI v7 plugin registers at once (2 GiB),
 * which the backend cuts into pieces at 1 GiB address multiples: blocks
 * that lie just below the cuts on this side and straddle them on the
 * other (so the two segment lists differ in length).  The memory is
 * reserved, not touched, except for the blocks. */
void bigRegistration(Agent &i, Agent &t)
{
	const size_t len = (5ull << 30) / 2;
	const size_t block = 3 << 20;
	void *lp = mmap(nullptr, len, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	void *rp = mmap(nullptr, len, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (lp == MAP_FAILED || rp == MAP_FAILED) {
		fprintf(stderr, "big registration: skipped (no %zu bytes of address space)\n", len);
		return;
	}
	auto *l = static_cast<unsigned char *>(lp);
	auto *r = static_cast<unsigned char *>(rp);
	const uintptr_t G = 1ull << 30;
	std::vector<size_t> loff, roff, size;
	for (uintptr_t cut = (reinterpret_cast<uintptr_t>(l) / G + 1) * G;
	     cut + block < reinterpret_cast<uintptr_t>(l) + len; cut += G)
		loff.push_back(cut - reinterpret_cast<uintptr_t>(l) - block - 4096);
	for (uintptr_t cut = (reinterpret_cast<uintptr_t>(r) / G + 1) * G;
	     cut + block < reinterpret_cast<uintptr_t>(r) + len && roff.size() < loff.size();
	     cut += G)
		roff.push_back(cut - reinterpret_cast<uintptr_t>(r) - block / 2);
	loff.resize(roff.size());
	size.assign(loff.size(), block);
	std::mt19937 rng(9);
	for (size_t o : loff)
		for (size_t k = 0; k < block; k++)
			l[o + k] = static_cast<unsigned char>(rng());
	nixl_reg_dlist_t lr(DRAM_SEG), rr(DRAM_SEG);
	lr.addDesc(nixlBlobDesc(reinterpret_cast<uintptr_t>(l), len, 0, ""));
	rr.addDesc(nixlBlobDesc(reinterpret_cast<uintptr_t>(r), len, 0, ""));
	EXPECT(i.agent->registerMem(lr) == NIXL_SUCCESS);
	EXPECT(t.agent->registerMem(rr) == NIXL_SUCCESS);
	EXPECT(exchange(t, i));
	nixl_xfer_dlist_t src(DRAM_SEG), dst(DRAM_SEG);
	for (size_t k = 0; k < loff.size(); k++) {
		src.addDesc(nixlBasicDesc(reinterpret_cast<uintptr_t>(l) + loff[k], block, 0));
		dst.addDesc(nixlBasicDesc(reinterpret_cast<uintptr_t>(r) + roff[k], block, 0));
	}
	nixlXferReqH *req = nullptr;
	EXPECT(!loff.empty());
	EXPECT(i.agent->createXferReq(NIXL_WRITE, src, dst, t.name, req) == NIXL_SUCCESS);
	if (req) {
		nixl_status_t st = i.agent->postXferReq(req);
		EXPECT(st == NIXL_SUCCESS || st == NIXL_IN_PROG);
		EXPECT(waitXfer(i, req, 20000) == NIXL_SUCCESS);
		for (size_t k = 0; k < loff.size(); k++)
			EXPECT(memcmp(l + loff[k], r + roff[k], block) == 0);
		EXPECT(i.agent->releaseXferReq(req) == NIXL_SUCCESS);
	}
	EXPECT(i.agent->invalidateRemoteMD(t.name) == NIXL_SUCCESS);
	EXPECT(i.agent->deregisterMem(lr) == NIXL_SUCCESS);
	EXPECT(t.agent->deregisterMem(rr) == NIXL_SUCCESS);
	munmap(lp, len);
	munmap(rp, len);
	fprintf(stderr, "2.5 GiB registrations, %zu blocks across their 1 GiB pieces: %s\n",
		loff.size(), failures ? "FAILED" : "ok");
}

/* What the backend asked of the library (tcpx_count.so, preloaded). */
enum { C_PREPARE, C_POST, C_WRITE, C_READ, C_CANCEL, C_CANCELED, C_EAGAIN, C_DEAD_POST,
       C_UNTRACKED };

long count(int what)
{
	static auto fn = reinterpret_cast<long (*)(int)>(dlsym(RTLD_DEFAULT, "tp_count_get"));
	return fn ? fn(what) : -1;
}

/* Notifications for a from `from` until one equal to last arrived (all of
 * them, last included); false if it never does. */
bool notifsUntil(Agent &a, const std::string &from, const std::string &last,
		 std::vector<std::string> &got)
{
	auto end = steady::now() + std::chrono::seconds(60);
	while (steady::now() < end) {
		nixl_notifs_t notifs;
		if (a.agent->getNotifs(notifs) != NIXL_SUCCESS)
			return false;
		for (auto &m : notifs[from]) {
			got.push_back(m);
			if (m == last)
				return true;
		}
		std::this_thread::sleep_for(std::chrono::microseconds(100));
	}
	fprintf(stderr, "no notification '%s' from %s at %s\n", last.c_str(), from.c_str(),
		a.name.c_str());
	return false;
}

/* A request is prepared once (one prepared list) and each post of it is a
 * post of that list: no per-descriptor work, no tcpx_p2p_write/read. */
void preparedRequests(Agent &i, Agent &t)
{
	const size_t nblocks = 64, slot = 4096;
	Buffer ib(DRAM_SEG, 0, nblocks * slot), tb(DRAM_SEG, 0, nblocks * slot);
	EXPECT(i.agent->registerMem(ib.reg()) == NIXL_SUCCESS);
	EXPECT(t.agent->registerMem(tb.reg()) == NIXL_SUCCESS);
	EXPECT(exchange(t, i));
	Layout w = scatter(nblocks, slot, 11);
	const long prep0 = count(C_PREPARE), post0 = count(C_POST);
	const long wr0 = count(C_WRITE), rd0 = count(C_READ);
	EXPECT(prep0 >= 0);
	for (nixl_xfer_op_t op : {NIXL_WRITE, NIXL_READ}) {
		nixlXferReqH *req = nullptr;
		EXPECT(i.agent->createXferReq(op, dlist(ib, w.src_off, w.size),
					      dlist(tb, w.dst_off, w.size), t.name,
					      req) == NIXL_SUCCESS);
		if (!req)
			return;
		for (unsigned k = 0; k < 3; k++) {
			(op == NIXL_WRITE ? ib : tb).fill(30 + k);
			nixl_status_t st = i.agent->postXferReq(req);
			EXPECT(st == NIXL_SUCCESS || st == NIXL_IN_PROG);
			EXPECT(waitXfer(i, req, 20000) == NIXL_SUCCESS);
			if (op == NIXL_WRITE)
				EXPECT(sameBlocks(ib, tb, w, true));
			else
				EXPECT(sameBlocks(tb, ib, w, false));
		}
		EXPECT(i.agent->releaseXferReq(req) == NIXL_SUCCESS);
	}
	EXPECT(count(C_PREPARE) == prep0 + 2);
	EXPECT(count(C_POST) == post0 + 6);
	EXPECT(count(C_WRITE) == wr0 && count(C_READ) == rd0);
	EXPECT(i.agent->invalidateRemoteMD(t.name) == NIXL_SUCCESS);
	EXPECT(i.agent->deregisterMem(ib.reg()) == NIXL_SUCCESS);
	EXPECT(t.agent->deregisterMem(tb.reg()) == NIXL_SUCCESS);
	fprintf(stderr, "prepared once, posted thrice (WRITE, READ): %s\n",
		failures ? "FAILED" : "ok");
}

/* tcpx_count.so's switch (the test runs with it preloaded): while on, list
 * posts of threads that called tp_count_held_here() get EAGAIN.  NULL,
 * counted as a failure, without the shim. */
void (*countHold())(int)
{
	auto hold = reinterpret_cast<void (*)(int)>(dlsym(RTLD_DEFAULT, "tp_count_hold"));
	if (!hold || !dlsym(RTLD_DEFAULT, "tp_count_held_here")) {
		EXPECT(!"tcpx_count.so preloaded");
		return nullptr;
	}
	return hold;
}

/* Turns hold on and starts a thread whose post of req meets EAGAIN
 * until it is turned off; returns once that post has retried.  st gets the
 * post's status, or its transfer's once posted. */
std::thread heldPost(void (*hold)(int), Agent &i, nixlXferReqH *req, nixl_status_t &st)
{
	auto held_here = reinterpret_cast<void (*)()>(dlsym(RTLD_DEFAULT, "tp_count_held_here"));
	const long eagain0 = count(C_EAGAIN);
	hold(1);
	std::thread a([&i, req, &st, held_here] {
		held_here();
		st = i.agent->postXferReq(req);
		if (st == NIXL_SUCCESS || st == NIXL_IN_PROG)
			st = waitXfer(i, req, 60000);
	});
	auto end = steady::now() + std::chrono::seconds(60);
	while (count(C_EAGAIN) == eagain0 && steady::now() < end)
		std::this_thread::sleep_for(std::chrono::milliseconds(1));
	EXPECT(count(C_EAGAIN) > eagain0); /* the post is retrying */
	return a;
}

/* Two threads post requests of one agent (NIXL's thread-safe mode lets
 * them in at once): a post that meets EAGAIN (the control bytes waiting
 * for the peer at their bound; tcpx_count.so makes it so until the other
 * thread's transfer is done) retries without holding up the other
 * thread's post of another request, and goes through once there is room. */
void postsFromTwoThreads()
{
	void (*hold)(int) = countHold();
	if (!hold)
		return;
	Agent i, t;
	/* the held post may retry for timeout_ms: far longer than the other
	 * thread's transfer takes */
	EXPECT(makeAgent(i, "threads-i", -1, {{"timeout_ms", "30000"}},
			 nixl_thread_sync_t::NIXL_THREAD_SYNC_RW) &&
	       makeAgent(t, "threads-t", -1));
	const size_t len = 1 << 20;
	Buffer ia(DRAM_SEG, 0, len), ib(DRAM_SEG, 0, len), ta(DRAM_SEG, 0, len),
	    tb(DRAM_SEG, 0, len);
	ia.fill(71);
	ib.fill(72);
	for (Buffer *b : {&ia, &ib})
		EXPECT(i.agent->registerMem(b->reg()) == NIXL_SUCCESS);
	for (Buffer *b : {&ta, &tb})
		EXPECT(t.agent->registerMem(b->reg()) == NIXL_SUCCESS);
	EXPECT(exchange(t, i));
	nixlXferReqH *ra = nullptr, *rb = nullptr;
	nixl_xfer_dlist_t sa(DRAM_SEG), da(DRAM_SEG), sb(DRAM_SEG), db(DRAM_SEG);
	sa.addDesc(nixlBasicDesc(ia.addr(), len, 0));
	da.addDesc(nixlBasicDesc(ta.addr(), len, 0));
	sb.addDesc(nixlBasicDesc(ib.addr(), len, 0));
	db.addDesc(nixlBasicDesc(tb.addr(), len, 0));
	EXPECT(i.agent->createXferReq(NIXL_WRITE, sa, da, t.name, ra) == NIXL_SUCCESS);
	EXPECT(i.agent->createXferReq(NIXL_WRITE, sb, db, t.name, rb) == NIXL_SUCCESS);
	if (!ra || !rb)
		return;
	nixl_status_t sta = NIXL_ERR_UNKNOWN;
	std::thread a = heldPost(hold, i, ra, sta);
	nixl_status_t st = i.agent->postXferReq(rb);
	EXPECT(st == NIXL_SUCCESS || st == NIXL_IN_PROG);
	EXPECT(waitXfer(i, rb, 60000) == NIXL_SUCCESS);
	hold(0);
	a.join();
	EXPECT(sta == NIXL_SUCCESS);
	EXPECT(memcmp(ia.ptr, ta.ptr, len) == 0 && memcmp(ib.ptr, tb.ptr, len) == 0);
	EXPECT(i.agent->releaseXferReq(ra) == NIXL_SUCCESS);
	EXPECT(i.agent->releaseXferReq(rb) == NIXL_SUCCESS);
	EXPECT(i.agent->invalidateRemoteMD(t.name) == NIXL_SUCCESS);
	for (Buffer *b : {&ia, &ib})
		EXPECT(i.agent->deregisterMem(b->reg()) == NIXL_SUCCESS);
	for (Buffer *b : {&ta, &tb})
		EXPECT(t.agent->deregisterMem(b->reg()) == NIXL_SUCCESS);
	fprintf(stderr, "a post retrying on EAGAIN holds up no other thread's: %s\n",
		failures ? "FAILED" : "ok");
}

/* A post retrying on EAGAIN while another thread closes the connection
 * (invalidateRemoteMD: NIXL's disconnect) ends NIXL_ERR_REMOTE_DISCONNECT
 * and never posts on the destroyed connection (tcpx_count.so counts a
 * post of a list whose connection was destroyed, and refuses it). */
void postWhileClosing()
{
	void (*hold)(int) = countHold();
	if (!hold)
		return;
	Agent i, t;
	EXPECT(makeAgent(i, "closing-i", -1, {{"timeout_ms", "30000"}}) &&
	       makeAgent(t, "closing-t", -1));
	const size_t len = 1 << 20;
	Buffer ib(DRAM_SEG, 0, len), tb(DRAM_SEG, 0, len);
	EXPECT(i.agent->registerMem(ib.reg()) == NIXL_SUCCESS);
	EXPECT(t.agent->registerMem(tb.reg()) == NIXL_SUCCESS);
	EXPECT(exchange(t, i));
	nixl_xfer_dlist_t src(DRAM_SEG), dst(DRAM_SEG);
	src.addDesc(nixlBasicDesc(ib.addr(), len, 0));
	dst.addDesc(nixlBasicDesc(tb.addr(), len, 0));
	nixlXferReqH *req = nullptr;
	EXPECT(i.agent->createXferReq(NIXL_WRITE, src, dst, t.name, req) == NIXL_SUCCESS);
	if (!req)
		return;
	const long dead0 = count(C_DEAD_POST);
	nixl_status_t st = NIXL_ERR_UNKNOWN;
	std::thread a = heldPost(hold, i, req, st);
	EXPECT(i.agent->invalidateRemoteMD(t.name) == NIXL_SUCCESS);
	hold(0);
	a.join();
	EXPECT(st == NIXL_ERR_REMOTE_DISCONNECT);
	EXPECT(count(C_DEAD_POST) == dead0);
	EXPECT(count(C_UNTRACKED) == 0); /* every list was watched */
	EXPECT(i.agent->releaseXferReq(req) == NIXL_SUCCESS);
	EXPECT(i.agent->deregisterMem(ib.reg()) == NIXL_SUCCESS);
	EXPECT(t.agent->deregisterMem(tb.reg()) == NIXL_SUCCESS);
	fprintf(stderr, "a post retrying while the connection closes: %s\n",
		failures ? "FAILED" : "ok");
}

/* Releasing a pending request cancels its transfer rather than waiting
 * for it: a cancelled WRITE's notification never arrives (a notification
 * sent after it does), and the connection carries the next transfer.  A
 * WRITE may finish before its release (too late to cancel: it then
 * completes as usual), so this tries a few times for a cancelled one. */
void cancelOnRelease()
{
	/* small chunks: a cancel right after the post finds most of them not
	 * yet handed to the plugin */
	const nixl_b_params_t small = {{"chunk_bytes", "65536"}, {"num_channels", "2"}};
	Agent i, t;
	EXPECT(makeAgent(i, "cancel-i", -1, small) && makeAgent(t, "cancel-t", -1, small));
	const size_t len = 128 << 20;
	Buffer ib(DRAM_SEG, 0, len), tb(DRAM_SEG, 0, len);
	EXPECT(i.agent->registerMem(ib.reg()) == NIXL_SUCCESS);
	EXPECT(t.agent->registerMem(tb.reg()) == NIXL_SUCCESS);
	EXPECT(exchange(t, i));
	nixl_xfer_dlist_t src(DRAM_SEG), dst(DRAM_SEG);
	src.addDesc(nixlBasicDesc(ib.addr(), len, 0));
	dst.addDesc(nixlBasicDesc(tb.addr(), len, 0));
	bool cancelled = false;
	for (int k = 0; k < 5 && !cancelled; k++) {
		nixl_opt_args_t args;
		args.notif = "cancelled write " + std::to_string(k);
		nixlXferReqH *req = nullptr;
		EXPECT(i.agent->createXferReq(NIXL_WRITE, src, dst, t.name, req, &args) ==
		       NIXL_SUCCESS);
		if (!req)
			return;
		const long c0 = count(C_CANCELED);
		nixl_status_t st = i.agent->postXferReq(req);
		EXPECT(st == NIXL_SUCCESS || st == NIXL_IN_PROG);
		EXPECT(i.agent->releaseXferReq(req) == NIXL_SUCCESS);
		cancelled = count(C_CANCELED) > c0;
		const std::string after = "after " + std::to_string(k);
		EXPECT(i.agent->genNotif(t.name, after) == NIXL_SUCCESS);
		std::vector<std::string> got;
		EXPECT(notifsUntil(t, i.name, after, got));
		bool delivered = std::find(got.begin(), got.end(), *args.notif) != got.end();
		if (cancelled)
			EXPECT(!delivered);
	}
	EXPECT(cancelled);
	/* the connection goes on: a small WRITE, every byte checked */
	Layout w = scatter(16, 4096, 12);
	ib.fill(13);
	nixlXferReqH *req = nullptr;
	EXPECT(i.agent->createXferReq(NIXL_WRITE, dlist(ib, w.src_off, w.size),
				      dlist(tb, w.dst_off, w.size), t.name, req) == NIXL_SUCCESS);
	if (req) {
		nixl_status_t st = i.agent->postXferReq(req);
		EXPECT(st == NIXL_SUCCESS || st == NIXL_IN_PROG);
		EXPECT(waitXfer(i, req, 20000) == NIXL_SUCCESS);
		EXPECT(sameBlocks(ib, tb, w, true));
		EXPECT(i.agent->releaseXferReq(req) == NIXL_SUCCESS);
	}
	EXPECT(i.agent->invalidateRemoteMD(t.name) == NIXL_SUCCESS);
	EXPECT(i.agent->deregisterMem(ib.reg()) == NIXL_SUCCESS);
	EXPECT(t.agent->deregisterMem(tb.reg()) == NIXL_SUCCESS);
	fprintf(stderr, "release of a pending WRITE cancels it: %s\n", failures ? "FAILED" : "ok");
}

size_t threadCount()
{
	size_t n = 0;
	DIR *d = opendir("/proc/self/task");
	if (!d)
		return 0;
	while (struct dirent *e = readdir(d))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* Memory deregistered while a transfer uses it: on the initiator its
 * transfer is cancelled (the request then fails NIXL_ERR_CANCELED, never
 * reported pending or done after the memory is gone); on the target (a
 * WRITE into it in flight) the registration is released once the transfer
 * ends, and the target agent destroyed meanwhile leaves nothing behind.
 * Three agent pairs: threads do not grow from one to the next. */
void deregisterInFlight()
{
	const size_t len = 64 << 20;
	size_t base = 0;
	for (int pair = 0; pair < 3; pair++) {
		{
			Agent i, t;
			std::string n = std::to_string(pair);
			EXPECT(makeAgent(i, "dereg-i" + n, -1) && makeAgent(t, "dereg-t" + n, -1));
			Buffer ib(DRAM_SEG, 0, len), tb(DRAM_SEG, 0, len);
			EXPECT(i.agent->registerMem(ib.reg()) == NIXL_SUCCESS);
			EXPECT(t.agent->registerMem(tb.reg()) == NIXL_SUCCESS);
			EXPECT(exchange(t, i));
			nixl_xfer_dlist_t src(DRAM_SEG), dst(DRAM_SEG);
			src.addDesc(nixlBasicDesc(ib.addr(), len, 0));
			dst.addDesc(nixlBasicDesc(tb.addr(), len, 0));
			/* the initiator's own memory */
			nixlXferReqH *req = nullptr;
			EXPECT(i.agent->createXferReq(NIXL_WRITE, src, dst, t.name, req) ==
			       NIXL_SUCCESS);
			if (!req)
				return;
			nixl_status_t st = i.agent->postXferReq(req);
			EXPECT(st == NIXL_SUCCESS || st == NIXL_IN_PROG);
			EXPECT(i.agent->deregisterMem(ib.reg()) == NIXL_SUCCESS);
			EXPECT(i.agent->getXferStatus(req) == NIXL_ERR_CANCELED);
			st = i.agent->postXferReq(req);
			EXPECT(st != NIXL_SUCCESS && st != NIXL_IN_PROG);
			EXPECT(i.agent->releaseXferReq(req) == NIXL_SUCCESS);
			/* the target's, a WRITE into it in flight; then the target goes */
			EXPECT(i.agent->registerMem(ib.reg()) == NIXL_SUCCESS);
			req = nullptr;
			EXPECT(i.agent->createXferReq(NIXL_WRITE, src, dst, t.name, req) ==
			       NIXL_SUCCESS);
			if (!req)
				return;
			st = i.agent->postXferReq(req);
			EXPECT(st == NIXL_SUCCESS || st == NIXL_IN_PROG);
			EXPECT(t.agent->deregisterMem(tb.reg()) == NIXL_SUCCESS);
			t.agent.reset();
			st = waitXfer(i, req, 60000);
			EXPECT(st != NIXL_IN_PROG);
			EXPECT(i.agent->releaseXferReq(req) == NIXL_SUCCESS);
			EXPECT(i.agent->deregisterMem(ib.reg()) == NIXL_SUCCESS);
		}
		/* a thread per pair leaked (a session never destroyed) shows here;
		 * threads that end on their own are waited for */
		if (pair == 0) {
			base = threadCount();
			continue;
		}
		auto end = steady::now() + std::chrono::seconds(30);
		while (threadCount() > base && steady::now() < end)
			std::this_thread::sleep_for(std::chrono::milliseconds(10));
		EXPECT(threadCount() <= base);
	}
	fprintf(stderr, "memory deregistered under transfers, both sides, 3 pairs: %s\n",
		failures ? "FAILED" : "ok");
}

/* A transfer set up against a region the target has deregistered since
 * (stale metadata) fails at once (export_wait_ms after the peer's exports
 * are known), not after timeout_ms: engine loops call createXferReq. */
void staleMetadata()
{
	Agent i, t;
	EXPECT(makeAgent(i, "stale-i", -1, {{"timeout_ms", "300000"}}) &&
	       makeAgent(t, "stale-t", -1));
	Buffer ib(DRAM_SEG, 0, 1 << 16), a(DRAM_SEG, 0, 1 << 16), b(DRAM_SEG, 0, 1 << 16);
	EXPECT(i.agent->registerMem(ib.reg()) == NIXL_SUCCESS);
	EXPECT(t.agent->registerMem(a.reg()) == NIXL_SUCCESS);
	EXPECT(exchange(t, i));
	nixl_xfer_dlist_t src(DRAM_SEG), to_a(DRAM_SEG), to_b(DRAM_SEG);
	src.addDesc(nixlBasicDesc(ib.addr(), ib.len, 0));
	to_a.addDesc(nixlBasicDesc(a.addr(), a.len, 0));
	to_b.addDesc(nixlBasicDesc(b.addr(), b.len, 0));
	nixlXferReqH *req = nullptr;
	EXPECT(i.agent->createXferReq(NIXL_WRITE, src, to_a, t.name, req) == NIXL_SUCCESS);
	if (req) {
		nixl_status_t st = i.agent->postXferReq(req);
		EXPECT(st == NIXL_SUCCESS || st == NIXL_IN_PROG);
		EXPECT(waitXfer(i, req, 20000) == NIXL_SUCCESS);
		EXPECT(i.agent->releaseXferReq(req) == NIXL_SUCCESS);
	}
	EXPECT(t.agent->registerMem(b.reg()) == NIXL_SUCCESS);
	EXPECT(exchange(t, i));
	EXPECT(t.agent->deregisterMem(b.reg()) == NIXL_SUCCESS);
	auto t0 = steady::now();
	req = nullptr;
	nixl_status_t st = i.agent->createXferReq(NIXL_WRITE, src, to_b, t.name, req);
	if (st == NIXL_SUCCESS) { /* the revocation still on its way: the post fails */
		st = i.agent->postXferReq(req);
		if (st == NIXL_SUCCESS || st == NIXL_IN_PROG)
			st = waitXfer(i, req, 60000);
		i.agent->releaseXferReq(req);
	}
	double secs = std::chrono::duration<double>(steady::now() - t0).count();
	EXPECT(st != NIXL_SUCCESS && st != NIXL_IN_PROG);
	EXPECT(secs < 60); /* timeout_ms is 300 s: a bound on a hang only */
	EXPECT(i.agent->deregisterMem(ib.reg()) == NIXL_SUCCESS);
	EXPECT(t.agent->deregisterMem(a.reg()) == NIXL_SUCCESS);
	fprintf(stderr, "stale metadata refused after %.2f s: %s\n", secs,
		failures ? "FAILED" : "ok");
}

/* A transfer the target refuses because the region it names was
 * deregistered there after the request was made ends
 * NIXL_ERR_REMOTE_DISCONNECT (as on UCX, never INVALID_PARAM): NIXL drops
 * the target's metadata, and loading it anew carries the next transfer.
 * Then NIXL's own error-handling case: a target that deregisters and goes
 * away right after the post (the transfer ends done or REMOTE_DISCONNECT). */
void refusedByTarget()
{
	Agent i, t;
	EXPECT(makeAgent(i, "refused-i", -1) && makeAgent(t, "refused-t", -1));
	Buffer ib(DRAM_SEG, 0, 1 << 16), tb(DRAM_SEG, 0, 1 << 16);
	EXPECT(i.agent->registerMem(ib.reg()) == NIXL_SUCCESS);
	nixl_xfer_dlist_t src(DRAM_SEG), dst(DRAM_SEG);
	src.addDesc(nixlBasicDesc(ib.addr(), ib.len, 0));
	dst.addDesc(nixlBasicDesc(tb.addr(), tb.len, 0));
	for (nixl_xfer_op_t op : {NIXL_WRITE, NIXL_READ}) {
		EXPECT(t.agent->registerMem(tb.reg()) == NIXL_SUCCESS);
		EXPECT(exchange(t, i));
		/* the connection is made and the region imported here */
		nixlXferReqH *req = nullptr;
		EXPECT(i.agent->createXferReq(op, src, dst, t.name, req) == NIXL_SUCCESS);
		if (!req)
			return;
		EXPECT(t.agent->deregisterMem(tb.reg()) == NIXL_SUCCESS);
		nixl_status_t st = i.agent->postXferReq(req);
		if (st == NIXL_SUCCESS || st == NIXL_IN_PROG)
			st = waitXfer(i, req, 60000);
		EXPECT(st == NIXL_ERR_REMOTE_DISCONNECT);
		EXPECT(i.agent->releaseXferReq(req) == NIXL_SUCCESS);
		/* NIXL dropped the metadata: the target's region is unknown here
		 * until its metadata is loaded again */
		req = nullptr;
		EXPECT(i.agent->createXferReq(op, src, dst, t.name, req) != NIXL_SUCCESS);
		EXPECT(t.agent->registerMem(tb.reg()) == NIXL_SUCCESS);
		EXPECT(exchange(t, i));
		ib.fill(50 + op);
		tb.fill(60 + op);
		req = nullptr;
		EXPECT(i.agent->createXferReq(op, src, dst, t.name, req) == NIXL_SUCCESS);
		if (!req)
			return;
		st = i.agent->postXferReq(req);
		EXPECT(st == NIXL_SUCCESS || st == NIXL_IN_PROG);
		EXPECT(waitXfer(i, req, 20000) == NIXL_SUCCESS);
		EXPECT(memcmp(ib.ptr, tb.ptr, ib.len) == 0);
		EXPECT(i.agent->releaseXferReq(req) == NIXL_SUCCESS);
		EXPECT(t.agent->deregisterMem(tb.reg()) == NIXL_SUCCESS);
		EXPECT(i.agent->invalidateRemoteMD(t.name) == NIXL_SUCCESS);
	}
	EXPECT(i.agent->deregisterMem(ib.reg()) == NIXL_SUCCESS);
	for (nixl_xfer_op_t op : {NIXL_WRITE, NIXL_READ}) {
		Agent g;
		EXPECT(makeAgent(g, "refused-gone", -1));
		EXPECT(i.agent->registerMem(ib.reg()) == NIXL_SUCCESS);
		EXPECT(g.agent->registerMem(tb.reg()) == NIXL_SUCCESS);
		EXPECT(exchange(g, i));
		nixlXferReqH *req = nullptr;
		EXPECT(i.agent->createXferReq(op, src, dst, g.name, req) == NIXL_SUCCESS);
		if (!req)
			return;
		nixl_status_t st = i.agent->postXferReq(req);
		EXPECT(g.agent->deregisterMem(tb.reg()) == NIXL_SUCCESS);
		g.agent.reset();
		if (st == NIXL_SUCCESS || st == NIXL_IN_PROG)
			st = waitXfer(i, req, 60000);
		EXPECT(st == NIXL_SUCCESS || st == NIXL_ERR_REMOTE_DISCONNECT);
		EXPECT(i.agent->releaseXferReq(req) == NIXL_SUCCESS);
		EXPECT(i.agent->deregisterMem(ib.reg()) == NIXL_SUCCESS);
		nixl_status_t inv = i.agent->invalidateRemoteMD(g.name);
		EXPECT(inv == NIXL_SUCCESS || inv == NIXL_ERR_NOT_FOUND);
	}
	fprintf(stderr, "transfers the target refused, and a target gone after a post: %s\n",
		failures ? "FAILED" : "ok");
}

/* A target restarted under the same name (a new process: new connection
 * info) re-sends its metadata.  While NIXL still holds the old incarnation
 * it refuses the new connection info itself (NIXL_ERR_NOT_ALLOWED); a
 * request made for the old one fails NIXL_ERR_REMOTE_DISCONNECT, and NIXL
 * then drops the old metadata; the new metadata loads, and transfers go
 * to the new incarnation.  A framework may also invalidate the agent
 * itself first: the same follows. */
void restartedTarget()
{
	Agent i;
	EXPECT(makeAgent(i, "restart-i", -1));
	Buffer ib(DRAM_SEG, 0, 1 << 16), tb(DRAM_SEG, 0, 1 << 16);
	EXPECT(i.agent->registerMem(ib.reg()) == NIXL_SUCCESS);
	nixl_xfer_dlist_t src(DRAM_SEG), dst(DRAM_SEG);
	src.addDesc(nixlBasicDesc(ib.addr(), ib.len, 0));
	dst.addDesc(nixlBasicDesc(tb.addr(), tb.len, 0));
	unsigned seed = 80;
	auto writeOnce = [&](const char *what) {
		ib.fill(seed++); /* new bytes each time */
		nixlXferReqH *req = nullptr;
		EXPECT(i.agent->createXferReq(NIXL_WRITE, src, dst, "restart-t", req) ==
		       NIXL_SUCCESS);
		if (!req)
			return;
		nixl_status_t st = i.agent->postXferReq(req);
		EXPECT(st == NIXL_SUCCESS || st == NIXL_IN_PROG);
		EXPECT(waitXfer(i, req, 20000) == NIXL_SUCCESS);
		EXPECT(memcmp(ib.ptr, tb.ptr, ib.len) == 0);
		EXPECT(i.agent->releaseXferReq(req) == NIXL_SUCCESS);
		if (failures)
			fprintf(stderr, "restart: %s failed\n", what);
	};
	auto old = std::make_unique<Agent>();
	EXPECT(makeAgent(*old, "restart-t", -1));
	EXPECT(old->agent->registerMem(tb.reg()) == NIXL_SUCCESS);
	EXPECT(exchange(*old, i));
	writeOnce("to the first incarnation");
	nixlXferReqH *stale = nullptr;
	EXPECT(i.agent->createXferReq(NIXL_WRITE, src, dst, "restart-t", stale) == NIXL_SUCCESS);
	for (bool invalidate_first : {false, true}) {
		/* the process ends (its memory deregistered first, as NIXL does) */
		EXPECT(old->agent->deregisterMem(tb.reg()) == NIXL_SUCCESS);
		old.reset();
		old = std::make_unique<Agent>();
		EXPECT(makeAgent(*old, "restart-t", -1));
		EXPECT(old->agent->registerMem(tb.reg()) == NIXL_SUCCESS);
		nixl_blob_t md;
		std::string name;
		EXPECT(old->agent->getLocalMD(md) == NIXL_SUCCESS);
		if (invalidate_first) {
			EXPECT(i.agent->invalidateRemoteMD("restart-t") == NIXL_SUCCESS);
		} else {
			EXPECT(i.agent->loadRemoteMD(md, name) == NIXL_ERR_NOT_ALLOWED);
			nixl_status_t st = stale ? i.agent->postXferReq(stale) : NIXL_ERR_UNKNOWN;
			if (st == NIXL_SUCCESS || st == NIXL_IN_PROG)
				st = waitXfer(i, stale, 20000);
			EXPECT(st == NIXL_ERR_REMOTE_DISCONNECT);
			if (stale)
				EXPECT(i.agent->releaseXferReq(stale) == NIXL_SUCCESS);
		}
		EXPECT(i.agent->loadRemoteMD(md, name) == NIXL_SUCCESS && name == "restart-t");
		writeOnce(invalidate_first ? "after invalidating" : "after the old one failed");
	}
	EXPECT(old->agent->deregisterMem(tb.reg()) == NIXL_SUCCESS);
	EXPECT(i.agent->invalidateRemoteMD("restart-t") == NIXL_SUCCESS);
	EXPECT(i.agent->deregisterMem(ib.reg()) == NIXL_SUCCESS);
	fprintf(stderr, "a target restarted under its name: %s\n", failures ? "FAILED" : "ok");
}

/* Backend parameters of other backends are ignored (NIXL's tests and
 * callers hand one set to every backend); a bad value of ours still fails;
 * descriptor metadata of an agent whose connection info was never loaded
 * is refused at loadRemoteMD. */
void paramsAndPartialMetadata(Agent &t)
{
	Agent x, y;
	EXPECT(makeAgent(x, "foreign-params", -1,
			 {{"engine_config", "{}"}, {"num_workers", "2"}, {"num_threads", "0"}}));
	nixlAgentConfig cfg(false, false);
	y.agent = std::make_unique<nixlAgent>("bad-param", cfg);
	nixl_b_params_t bad = {{"num_channels", "zero"}};
	EXPECT(y.agent->createBackend("TCPX", bad, y.backend) != NIXL_SUCCESS);

	Buffer b(DRAM_SEG, 0, 4096);
	EXPECT(t.agent->registerMem(b.reg()) == NIXL_SUCCESS);
	nixl_blob_t md;
	nixl_opt_args_t o;
	o.includeConnInfo = false;
	EXPECT(t.agent->getLocalPartialMD(b.reg(), md, &o) == NIXL_SUCCESS);
	std::string name;
	EXPECT(x.agent->loadRemoteMD(md, name) != NIXL_SUCCESS);
	EXPECT(t.agent->deregisterMem(b.reg()) == NIXL_SUCCESS);
	fprintf(stderr, "foreign parameters, partial metadata: %s\n", failures ? "FAILED" : "ok");
}

/* Transfers and notifications within one agent (supportsLocal). */
void agentLocal(Agent &a)
{
	const size_t nblocks = 33, slot = 5000;
	Buffer s(DRAM_SEG, 0, nblocks * slot), d(DRAM_SEG, 0, nblocks * slot);
	s.fill(41);
	d.fill(42);
	EXPECT(a.agent->registerMem(s.reg()) == NIXL_SUCCESS);
	EXPECT(a.agent->registerMem(d.reg()) == NIXL_SUCCESS);
	Layout w = scatter(nblocks, slot, 43);
	for (nixl_xfer_op_t op : {NIXL_WRITE, NIXL_READ}) {
		nixl_opt_args_t args;
		args.notif = op == NIXL_WRITE ? "self write" : "self read";
		nixlXferReqH *req = nullptr;
		EXPECT(a.agent->createXferReq(op, dlist(s, w.src_off, w.size),
					      dlist(d, w.dst_off, w.size), a.name, req,
					      &args) == NIXL_SUCCESS);
		if (!req)
			return;
		if (op == NIXL_READ)
			d.fill(44);
		nixl_status_t st = a.agent->postXferReq(req);
		EXPECT(st == NIXL_SUCCESS || st == NIXL_IN_PROG);
		EXPECT(waitXfer(a, req, 20000) == NIXL_SUCCESS);
		if (op == NIXL_WRITE)
			EXPECT(sameBlocks(s, d, w, true));
		else
			EXPECT(sameBlocks(d, s, w, false));
		EXPECT(waitNotif(a, a.name, *args.notif, [] {}));
		EXPECT(a.agent->releaseXferReq(req) == NIXL_SUCCESS);
	}
	EXPECT(a.agent->genNotif(a.name, "self ping") == NIXL_SUCCESS);
	EXPECT(waitNotif(a, a.name, "self ping", [] {}));
	EXPECT(a.agent->deregisterMem(s.reg()) == NIXL_SUCCESS);
	EXPECT(a.agent->deregisterMem(d.reg()) == NIXL_SUCCESS);
	fprintf(stderr, "agent-local WRITE, READ, notifications: %s\n", failures ? "FAILED" : "ok");
}

int usableGpu()
{
#ifdef TP_HAVE_CUDA
	int n = 0;
	if (cudaGetDeviceCount(&n) == cudaSuccess && n > 0)
		return 0;
	(void)cudaGetLastError();
#endif
	return -1;
}

} // namespace

int main()
{
	if (!getenv("NIXL_PLUGIN_DIR")) {
		printf("skipped: NIXL_PLUGIN_DIR is not set\n");
		return 77;
	}
	/* first, before this process has threads of its own to fork with */
	peerGoesAway();

	Agent a, b;
	if (!makeAgent(a, "prefill", -1) || !makeAgent(b, "decode", -1))
		return 1;
	nixl_mem_list_t mems;
	nixl_b_params_t params;
	EXPECT(a.agent->getPluginParams("TCPX", mems, params) == NIXL_SUCCESS);
	EXPECT(params.count("num_channels") == 1 && params.count("gpu") == 1 && mems.size() == 2);
	writeAndRead(a, b, DRAM_SEG, 0, "DRAM");
	preparedRequests(a, b);
	postsFromTwoThreads();
	postWhileClosing();
	cancelOnRelease();
	agentLocal(a);
	paramsAndPartialMetadata(b);
	bigRegistration(a, b);
	badMetadata(a);
	staleMetadata();
	refusedByTarget();
	restartedTarget();
	deregisterInFlight();

	int gpu = usableGpu();
	if (gpu < 0) {
		fprintf(stderr, "VRAM: skipped (no usable GPU)\n");
	} else {
		Agent g1, g2;
		EXPECT(makeAgent(g1, "prefill-gpu", gpu) && makeAgent(g2, "decode-gpu", gpu));
		if (g1.backend && g2.backend)
			writeAndRead(g1, g2, VRAM_SEG, gpu, "VRAM");
	}
	printf("%s\n", failures ? "FAILED" : "passed");
	return failures ? 1 : 0;
}
