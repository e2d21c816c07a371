"""Two NIXL agents in two Python processes over the TCPX backend, as a
KV-cache connector drives them: the prefill process WRITEs scattered blocks
into the decode process's pool with a notification, then READs others back
with one; the decode side checks every block when the notification arrives.
Needs NIXL's Python package (nixl, or nixl_cu12/nixl_cu13 as NIXL's build
installs it) on PYTHONPATH and NIXL_PLUGIN_DIR naming libplugin_TCPX.so's
folder.  Exit 0 pass, 1 fail, 77 skip."""
import importlib
import multiprocessing as mp
import sys
import time

BLOCKS, SLOT = 300, 8192


def load_nixl():
    for name in ("nixl._api", "nixl_cu13._api", "nixl_cu12._api"):
        try:
            return importlib.import_module(name)
        except ImportError as e:
            err = e
    raise ImportError(err)


def make_agent(api, name):
    agent = api.nixl_agent(name, api.nixl_agent_config(enable_prog_thread=False, backends=[]))
    agent.create_backend("TCPX", {"ip_addr": "127.0.0.1", "timeout_ms": "5000"})
    return agent


def layout(np, seed):
    rng = np.random.default_rng(seed)
    src = rng.permutation(BLOCKS) * SLOT
    dst = rng.permutation(BLOCKS) * SLOT
    size = rng.integers(1, SLOT + 1, BLOCKS)
    return src, dst, size


def dlist(agent, base, offs, sizes):
    return agent.get_xfer_descs([(base + int(o), int(n), 0) for o, n in zip(offs, sizes)],
                                "DRAM")


def wait_notif(agent, peer, msg):
    end = time.time() + 20
    while time.time() < end:
        if msg in agent.get_new_notifs().get(peer, []):
            return True
        time.sleep(0.0005)
    return False


def decode(conn):
    """The target: owns the pool, posts nothing for the data."""
    import numpy as np
    api = load_nixl()
    agent = make_agent(api, "decode")
    pool = np.zeros(BLOCKS * SLOT, dtype=np.uint8)
    reg = agent.register_memory([(pool.ctypes.data, pool.nbytes, 0, "")], "DRAM")
    conn.send((agent.get_agent_metadata(), pool.ctypes.data))
    src_pool = conn.recv()  # what prefill wrote from, to check against
    src, dst, size = layout(np, 1)
    ok = wait_notif(agent, "prefill", b"blocks written")
    for s, d, n in zip(src, dst, size):
        ok = ok and bool((pool[d:d + n] == src_pool[s:s + n]).all())
    pool[:] = np.random.default_rng(2).integers(0, 256, pool.size, dtype=np.uint8)
    conn.send((ok, pool))
    ok = wait_notif(agent, "prefill", b"blocks read")
    conn.send(ok)
    conn.recv()  # prefill is done: leave
    agent.deregister_memory(reg)


def main():
    try:
        import numpy as np
        api = load_nixl()
    except ImportError as e:
        print(f"skipped: NIXL's Python package or NumPy not importable ({e})")
        return 77
    ctx = mp.get_context("spawn")
    here, there = ctx.Pipe()
    child = ctx.Process(target=decode, args=(there,))
    child.start()
    failures = []
    try:
        agent = make_agent(api, "prefill")
        kv = np.random.default_rng(1).integers(0, 256, BLOCKS * SLOT, dtype=np.uint8)
        reg = agent.register_memory([(kv.ctypes.data, kv.nbytes, 0, "")], "DRAM")
        meta, remote_base = here.recv()
        peer = agent.add_remote_agent(meta)
        here.send(kv)

        src, dst, size = layout(np, 1)
        h = agent.initialize_xfer("WRITE", dlist(agent, kv.ctypes.data, src, size),
                                  dlist(agent, remote_base, dst, size), peer,
                                  b"blocks written")
        state = agent.transfer(h)
        while state == "PROC":
            state = agent.check_xfer_state(h)
        if state != "DONE":
            failures.append(f"WRITE ended {state}")
        agent.release_xfer_handle(h)
        ok, pool = here.recv()
        if not ok:
            failures.append("decode saw wrong blocks, or no notification")

        src, dst, size = layout(np, 3)
        h = agent.initialize_xfer("READ", dlist(agent, kv.ctypes.data, src, size),
                                  dlist(agent, remote_base, dst, size), peer, b"blocks read")
        state = agent.transfer(h)
        while state == "PROC":
            state = agent.check_xfer_state(h)
        if state != "DONE":
            failures.append(f"READ ended {state}")
        agent.release_xfer_handle(h)
        for s, d, n in zip(src, dst, size):
            if not (kv[s:s + n] == pool[d:d + n]).all():
                failures.append("READ brought wrong bytes")
                break
        if not here.recv():
            failures.append("decode got no notification after the READ")
        here.send("bye")
        agent.remove_remote_agent(peer)
        agent.deregister_memory(reg)
    finally:
        child.join(30)
        if child.is_alive():
            child.kill()
            failures.append("decode process hung")
        elif child.exitcode != 0:
            failures.append(f"decode process exited {child.exitcode}")
    for f in failures:
        print("FAIL", f)
    print(f"python agents: WRITE and READ of {BLOCKS} scattered blocks, notifications: "
          f"{'FAILED' if failures else 'ok'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
