"""A peer process killed (SIGKILL) mid-stream and restarted, ROUNDS times,
against one surviving process (one session) that carries on.

  restart_peer.py survivor dial|dial_hung|dial_redial|listen|listen_hung PORT ROUNDS
  restart_peer.py victim listen|dial PORT TAG      (started by the survivor)

survivor dial: each victim listens on PORT; the survivor dials it, moves
bytes both ways, leaves transfers pending, kills it, starts the next one on
the same PORT and dials again.  Its old transfers must end (Closed: at once
when the kernel closes the sockets, or PeerRestarted at the re-dial), never
hang, and never write a byte into the old receive buffers that the dead
peer did not send.
survivor dial_hung: the same, but each victim is stopped (SIGSTOP), not
killed, before the next one starts: a hung incarnation whose sockets stay
open (it closed its server once it had accepted, so that the next can listen
on PORT).  Liveness is off on the survivor, so that only the new
incarnation's epoch, found at the re-dial, can end the old transfers: they
must have ended with PeerRestarted; the stopped victim is killed after.
survivor dial_redial: the same as dial, but the survivor's session re-dials
(redial_ms) and it dials only once: after each kill its old transfers must
end (Closed), then calls on the same Conn raise Again until the library has
re-dialled the next incarnation, whose bytes over that Conn are checked;
Conn.generation counts the incarnations after the first.  Only the
dialling role re-dials: a server's accepted connection stays failed.
survivor listen: each victim dials the survivor's server; the survivor
accepts it, the same exchange, kills it; the old connection's transfers must
end (Closed) and the next incarnation is accepted and moves bytes right.
Every dialling victim names its session with one node id
(Session.set_node_id), as every incarnation of one process would.
survivor listen_hung: the same, but each victim is stopped, not killed, and
liveness is off on the survivor: only the node id, found when the survivor
accepts the next incarnation, can end the old transfers (PeerRestarted).

Every byte is checked: each incarnation's data carries its TAG, so bytes of
an old incarnation landing in a new one's buffers are caught.  The survivor
waits for the victim's lines ("listening", "verified"), never a fixed time;
HANG bounds each wait generously for a loaded machine.
"""
import ctypes
import os
import queue
import signal
import subprocess
import sys
import threading
import time

import tcpx_p2p as tp

HANG = float(os.environ.get("TP_TEST_HANG_S", "60"))
SIZE = 1 << 20
STREAM = 2      # items the victim streams after the first exchange
PENDING = 2     # receives the survivor posts beyond them: never satisfied
NODE_ID = "restart-victim"  # every incarnation's (Session.set_node_id)


def pattern(tag, i):
    """SIZE bytes that differ with the incarnation (tag) and the item (i)."""
    unit = bytes((k * 7 + tag * 31 + i * 13 + (k >> 8)) & 0xFF for k in range(4096))
    return bytearray(unit * (SIZE // len(unit)))


def log(*a):
    print("==", *a, file=sys.stderr, flush=True)


# ---- the victim ----------------------------------------------------------

def victim(role, port, tag):
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    with tp.Session() as s:
        s.set_node_id(NODE_ID)
        if role == "listen":
            srv = s.server("127.0.0.1", port)
            print("listening", flush=True)
            c = srv.accept(timeout=HANG)
            srv.close()    # the next incarnation listens while this one hangs
        else:
            c = s.dial("127.0.0.1", port, timeout=HANG)
        first = pattern(tag, 0)
        got = bytearray(SIZE)
        xs = c.send(s.register(first))
        xr = c.recv(s.register(got))
        xs.wait(HANG)
        xr.wait(HANG)
        if got != pattern(tag, 1000):
            print("BAD bytes from the survivor", flush=True)
            return 3
        print("verified", flush=True)
        for i in range(1, STREAM + 1):
            c.send(s.register(pattern(tag, i))).wait(HANG)
        print("streamed", flush=True)
        # Mid-stream: the survivor's receives stay posted until it kills us
        # (a survivor gone for good takes us with it: PR_SET_PDEATHSIG).
        time.sleep(4 * HANG)
        return 4


# ---- the survivor --------------------------------------------------------

class Victim:
    def __init__(self, role, port, tag):
        self.p = subprocess.Popen([sys.executable, __file__, "victim", role, str(port), str(tag)],
                                  stdout=subprocess.PIPE, text=True)
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.p.stdout:
            self.lines.put(line.strip())
        self.lines.put(None)

    def expect(self, word):
        try:
            line = self.lines.get(timeout=HANG)
        except queue.Empty:
            sys.exit(f"FAIL: no '{word}' from the victim within {HANG} s")
        if line != word:
            sys.exit(f"FAIL: the victim said {line!r}, not {word!r} (rc {self.p.poll()})")

    def stop(self):
        os.kill(self.p.pid, signal.SIGSTOP)

    def kill(self):
        if self.p.poll() is None:
            os.kill(self.p.pid, signal.SIGKILL)
        self.p.wait()


def exchange(s, c, tag):
    """The first exchange with incarnation tag, then its stream; returns
    the transfers left pending and their buffers."""
    first = bytearray(SIZE)
    xr = c.recv(s.register(first))
    xs = c.send(s.register(pattern(tag, 1000)))
    xr.wait(HANG)
    xs.wait(HANG)
    if first != pattern(tag, 0):
        sys.exit(f"FAIL: incarnation {tag}: its first item's bytes are wrong")
    bufs = [bytearray(SIZE) for _ in range(STREAM + PENDING)]
    xrs = [c.recv(s.register(b)) for b in bufs]
    for i in range(STREAM):
        xrs[i].wait(HANG)
        if bufs[i] != pattern(tag, i + 1):
            sys.exit(f"FAIL: incarnation {tag}: item {i + 1}'s bytes are wrong")
    # The victim posts no receive for this one: it may be buffered, or wait.
    xsend = c.send(s.register(pattern(tag, 2000)))
    return xrs[STREAM:] + [xsend], bufs[STREAM:]


def ended(tag, xfers, bufs, outcomes, hung=False):
    """Each of the old incarnation's transfers ends within HANG, with Closed
    (PeerRestarted is one) or, for the unmatched send, success; nothing
    landed in the receives the dead peer never answered."""
    for x in xfers:
        try:
            x.wait(HANG)
            name = "ok"
            if x.op != "send":
                sys.exit(f"FAIL: incarnation {tag}: a receive it never answered completed")
        except tp.PeerRestarted:
            name = "PeerRestarted"
        except tp.Closed:
            name = "Closed"
        except tp.TimedOut:
            sys.exit(f"FAIL: incarnation {tag}: a transfer still pending {HANG} s after the kill")
        if hung and name == "Closed" or hung and name == "ok" and x.op != "send":
            sys.exit(f"FAIL: incarnation {tag}: a transfer ended {name}, not PeerRestarted")
        outcomes[name] = outcomes.get(name, 0) + 1
    for b in bufs:
        if any(b):
            sys.exit(f"FAIL: incarnation {tag}: bytes landed in a receive of the dead peer")


def redialled(c, tag):
    """Drive c until the library re-established it: the calls raise Again
    meanwhile, and within HANG it is the next incarnation's."""
    end = time.monotonic() + HANG
    again = 0
    while True:
        try:
            c.progress()
            break
        except tp.Again:
            again += 1
            if time.monotonic() > end:
                sys.exit(f"FAIL: incarnation {tag}: not re-dialled within {HANG} s")
            time.sleep(0.01)
    if c.generation != tag - 1:
        sys.exit(f"FAIL: incarnation {tag}: generation {c.generation}, not {tag - 1}")
    return again


def survivor(role, port, rounds):
    outcomes = {}
    old = None
    victims = []
    hung = role.endswith("_hung")
    redial = role.endswith("_redial")
    role = role.split("_")[0]
    config = {}
    if hung:
        config["dead_after_ms"] = 0
    if redial:
        config["redial_ms"] = int(HANG * 1000)
    try:
        with tp.Session(**config) as s:
            srv = s.server("127.0.0.1", port) if role == "listen" else None
            if srv:
                print("listening", flush=True)
            for tag in range(1, rounds + 1):
                v = Victim("listen" if role == "dial" else "dial", port, tag)
                victims.append(v)
                if role == "dial":
                    v.expect("listening")
                    c = old[0] if redial and old else s.dial("127.0.0.1", port, timeout=HANG)
                else:
                    c = srv.accept(timeout=HANG)
                if old:
                    ended(tag - 1, *old[1:], outcomes, hung)
                    victims[-2].kill()
                    if redial:
                        log(f"incarnation {tag} re-dialled on the same Conn (Again "
                            f"{redialled(c, tag)} times meanwhile)")
                    else:
                        old[0].close()
                pending, bufs = exchange(s, c, tag)
                v.expect("verified")
                if hung and tag < rounds:
                    v.stop()
                else:
                    v.kill()
                log(f"incarnation {tag} {'stopped' if hung and tag < rounds else 'killed'} "
                    f"with {len(pending)} transfers pending")
                old = (c, pending, bufs)
            ended(rounds, *old[1:], outcomes)
            old[0].close()
            st = s.stats()
    finally:
        for v in victims:
            v.kill()
    log("the old transfers ended:", outcomes, "session failed", st["failed"])
    print(f"PASS: {rounds} incarnations of the {'listening' if role == 'dial' else 'dialling'} "
          f"peer killed and restarted: {outcomes}")
    return 0


def main():
    if sys.argv[1] == "victim":
        return victim(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    return survivor(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))


if __name__ == "__main__":
    sys.exit(main())
