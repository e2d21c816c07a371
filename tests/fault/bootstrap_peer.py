#!/usr/bin/env python3
"""A misbehaving rendezvous peer for tcpx_perf.

Usage: bootstrap_peer.py client MODE PORT   dial 127.0.0.1:PORT (retrying
                                            until the server listens)
       bootstrap_peer.py server MODE PORT   accept one peer on 127.0.0.1:PORT
MODE: garbage  - bytes that are no frame at all
      bad_len  - a valid HELLO header announcing a 4 GiB payload
      bad_blob - a valid HELLO frame whose payload is not a connection blob
      bad_type - a valid header of an unknown frame type
      silent   - say nothing, keep the socket open
      rst      - close at once with a reset
      crafted  - a well-formed HELLO whose emulator handles carry connect
                 progress naming 0x4141414141414141 (issue #8); as server it
                 copies the dialer's blob header, as client it assumes the
                 defaults (2 channels, 2 MiB chunks, TCPXEmu_v7)
Prints "peer: listening" (server) or "peer: dialing" (client, before its
first attempt) on stderr, and "peer: ready" on stdout once connected.  Exits 0 after HOLD seconds (env
FAULT_HOLD_S, default 15) or when the other side closes.
"""
import os
import socket
import struct
import sys
import time

MAGIC = 0x54505831  # "TPX1", src/core/setup/rdv_frame.h
VERSION = 1
HELLO = 1


def header(ftype, length):
    return struct.pack("!IHHI", MAGIC, VERSION, ftype, length)


PAYLOADS = {
    "garbage": b"GET / HTTP/1.0\r\n\r\n" + bytes(range(256)) * 4,
    "bad_len": header(HELLO, 0xFFFFFFFF),
    "bad_blob": header(HELLO, 64) + b"\xa5" * 64,
    "bad_type": header(0x7777, 0),
    "silent": b"",
    "rst": b"",
    "crafted": b"",
}


BLOB_MAGIC = 0x54505842  # "TPXB", src/core/setup/listener.c
BLOB_VERSION = 12  # src/core/setup/blob.h: TP_BLOB_VERSION
EMU_MAGIC = 0x54435845  # "TCXE", plugins/emu/emu.h


def crafted_hello(nchan=5, chunk=2097152, plugin=b"TCPXEmu_v7"):
    """A blob whose emulator handles say "connect in progress, slot 5, key
    0x4141414141414141" (struct emu_handle, src/abi/handle_layout.h).
    nchan counts the handles: the default 4 data channels + the control one."""
    hdr = struct.pack("!IHHII32sIIIQ32s", BLOB_MAGIC, BLOB_VERSION, nchan, chunk, 128, plugin,
                      4096, 65536, 1, 0x0123456789ABCDEF, b"")
    # max_notifs, max_notif_bytes, chunks_per_channel, epoch (the session's incarnation),
    # node id (none)
    addr = struct.pack("<H", socket.AF_INET) + struct.pack("!H", 1) + \
        socket.inet_aton("127.0.0.1") + b"\0" * 8
    h = struct.pack("<IIQ", EMU_MAGIC, 1, 0) + addr + \
        struct.pack("<IIQ", 0, 5, 0x4141414141414141)
    blob = hdr + (h + b"\0" * (128 - len(h))) * nchan
    return header(HELLO, len(blob)) + blob


def read_hello(s):
    """The peer's HELLO payload (its blob), or None."""
    s.settimeout(10)
    try:
        hdr = s.recv(12, socket.MSG_WAITALL)
        magic, _, ftype, length = struct.unpack("!IHHI", hdr)
        if magic != MAGIC or ftype != HELLO or length > 65536:
            return None
        return s.recv(length, socket.MSG_WAITALL)
    except (OSError, struct.error):
        return None


def dial(port, deadline):
    print("peer: dialing", file=sys.stderr, flush=True)
    while True:
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=2)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def accept(port):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", port))
    ls.listen(1)
    print("peer: listening", file=sys.stderr, flush=True)
    ls.settimeout(30)
    s, _ = ls.accept()
    ls.close()
    return s


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("client", "server") or \
            sys.argv[2] not in PAYLOADS:
        print(__doc__, file=sys.stderr)
        return 2
    role, mode, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    hold = float(os.environ.get("FAULT_HOLD_S", "15"))
    s = dial(port, time.monotonic() + 60) if role == "client" else accept(port)
    print("peer: ready", flush=True)
    if mode == "rst":
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()
        return 0
    payload = PAYLOADS[mode]
    if mode == "crafted":
        blob = read_hello(s) if role == "server" else None
        if blob and len(blob) >= 56:
            _, _, nchan, chunk, _, plugin, _, _ = struct.unpack("!IHHII32sII", blob[:56])
            payload = crafted_hello(nchan, chunk, plugin.rstrip(b"\0"))
        else:
            payload = crafted_hello()
    try:
        s.sendall(payload)
    except OSError as e:
        # The other side may reject the first bytes and close before we finish.
        print("peer: send: %s" % e, file=sys.stderr)
    s.settimeout(0.2)
    end = time.monotonic() + hold
    while time.monotonic() < end:
        try:
            if not s.recv(65536):
                print("peer: closed by the other side", flush=True)
                break
        except socket.timeout:
            continue
        except OSError as e:
            print("peer: recv: %s" % e, flush=True)
            break
    s.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
