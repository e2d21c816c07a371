#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets into corpus/<target>/.
Formats: src/core/setup/rdv_frame.h (frames), src/core/setup/blob.h (blobs),
plugins/emu/emu.h (emulator handles), src/core/setup/handshake.c (auth),
src/abi/nccl_net.h (unpack meta records; fuzz_meta.c for the header)."""
import os
import socket
import struct

FRAME_MAGIC, BLOB_MAGIC, EMU_MAGIC = 0x54505831, 0x54505842, 0x54435845
HELLO, BARRIER, BYE, AUTH = 1, 2, 3, 4


def frame(ftype, payload, magic=FRAME_MAGIC, length=None):
    n = len(payload) if length is None else length
    return struct.pack("!IHHI", magic, 1, ftype, n) + payload


def emu_handle(port=1, stage=0, slot=0, key=0):
    addr = struct.pack("<H", socket.AF_INET) + struct.pack("!H", port) + \
        socket.inet_aton("127.0.0.1") + b"\0" * 8
    h = struct.pack("<IIQ", EMU_MAGIC, stage, 0x1234) + addr + \
        struct.pack("<IIQ", 0, slot, key)
    return h + b"\0" * (128 - len(h))


def blob(nchan=1, plugin=b"TCPXEmu_v7", handle=None):
    # TP_BLOB_VERSION 12: ... plugin, max_notifs, max_notif_bytes, chunks_per_channel, epoch,
    # node id
    hdr = struct.pack("!IHHII32sIIIQ32s", BLOB_MAGIC, 12, nchan, 524288, 128, plugin, 4096, 65536,
                      4, 0x0123456789ABCDEF, b"node-1")
    return hdr + (handle or emu_handle()) * nchan


def auth(step):
    return struct.pack("<BB6xQ", 1, step, 77) + bytes(range(32)) + b"\0" * 32



# Control channel messages (src/core/ctl.h), little-endian; "AAAA" stands
# for the export's key in fuzz_ctl.
# Header: u8 type, u8 chan (an item's first channel), u16 0, u32 body bytes.
def ctl(mtype, body, chan=0, pad=0):
    return struct.pack("<BBHI", mtype, chan, pad, len(body)) + body


# A remote segment: u32 export index, u32 0, 16-byte key, u64 off, u64 len.
# fuzz_ctl puts export k's key where a seed has 16 times "ACD"[k].
def wseg(idx, key, off, n):
    return struct.pack("<II", idx, 0) + key * (16 // len(key)) + struct.pack("<QQ", off, n)


def ctl_write(mid, segs, notif=b"", mtype=2):
    total = sum(struct.unpack("<Q", g[32:40])[0] for g in segs)
    return ctl(mtype, struct.pack("<QQII", mid, total, len(segs), len(notif)) + b"".join(segs) + notif)


# A meta-ring slot for fuzz_meta: chunk length, slot, bounce length, count,
# then records (src_off, len, dst_off).
def meta(chunk, slot, bounce, recs, cnt=None):
    n = len(recs) if cnt is None else cnt
    return struct.pack("<IIQQ", chunk, slot, bounce, n) + \
        b"".join(struct.pack("<IIQ", s, n_, d) for s, n_, d in recs)


SEEDS = {
    "frame": {
        "hello": frame(HELLO, blob()),
        "barrier": frame(BARRIER, struct.pack("!I", 3)),
        "bye": frame(BYE, b""),
        "auth": frame(AUTH, auth(1)),
        "bad_magic": frame(HELLO, b"xx", magic=0x47455420),
        "too_long": frame(HELLO, b"", length=0xFFFFFFFF),
        "two": frame(BARRIER, b"") + frame(HELLO, blob(2)),
    },
    "blob": {
        "emu1": b"\x00" + blob(1),
        "emu2": b"\x01" + blob(2),
        "crafted": b"\x00" + blob(1, handle=emu_handle(stage=1, slot=5, key=0x4141414141414141)),
        "tcpx": b"\x04" + blob(1, plugin=b"GPUDirectTCPX_v7", handle=b"\0" * 80 + b"A" * 8 + b"\0" * 40),
        "mac": b"\x10" + blob(1) + b"\0" * 32,
    },
    "ctl": {
        "send_match": b"\x05" + ctl(1, struct.pack("<QQ", 7, 100)) + ctl(1, struct.pack("<QQ", 8, 4096)),
        "send_mismatch": b"\x00" + ctl(1, struct.pack("<QQ", 7, 99)),
        "write_ok": b"\x09" + ctl_write(3, [wseg(0, b"A", 0, 100), wseg(0, b"A", 4096, 1)], b"done"),
        "write_refused": b"\x00" + ctl_write(3, [wseg(0, b"B", 0, 100)]) + ctl_write(4, [wseg(5, b"A", 0, 1)]),
        "write_range": b"\x00" + ctl_write(3, [wseg(0, b"A", 65535, 2)]),
        "read_req": b"\x00" + ctl_write(9, [wseg(0, b"A", 0, 4096)], mtype=3),
        "write_two_exports": b"\x11" + ctl_write(3, [wseg(0, b"A", 100, 3000), wseg(1, b"C", 0, 8192),
                                                       wseg(0, b"A", 0, 7), wseg(1, b"C", 9, 1)], b"kv"),
        "write_revoked": b"\x00" + ctl_write(3, [wseg(2, b"D", 0, 10)]),
        "read_write_only": b"\x00" + ctl_write(9, [wseg(1, b"C", 0, 10)], mtype=3),
        "bad_keys": b"\x00" + b"".join(ctl_write(10 + i, [wseg(0, b"B", 0, 1)]) for i in range(10)),
        "too_many_segs": b"\x00" + ctl_write(3, [wseg(0, b"A", 0, 1)] * 5000),
        "too_many_notifs": b"\x07" + b"".join(ctl(6, struct.pack("<I", 1) + b"n") for _ in range(20)),
        "read_resp": b"\x00" + ctl(4, struct.pack("<QQ", 1, 100)),
        "ack": b"\x00" + ctl(5, struct.pack("<QiIQ", 1, 0, 0, 0)) + ctl(5, struct.pack("<QiIQ", 1, 2, 0, 5)),
        "notif": b"\x03" + ctl(6, struct.pack("<I", 5) + b"hello") + ctl(1, struct.pack("<QQ", 7, 100)) + ctl(6, struct.pack("<I", 1) + b"x"),
        "huge": b"\x00" + struct.pack("<BBHI", 2, 0, 0, 0xFFFFFFFF),
        # Items start on the channel their header names (fuzz_ctl's conn
        # has 2): a send on channel 1, one past the channels, a channel on
        # a message that is no item, header bytes 2-3 set.
        "send_chan1": b"\x05" + ctl(1, struct.pack("<QQ", 7, 100), chan=1) + ctl(1, struct.pack("<QQ", 8, 4096), chan=1),
        "send_chan_bad": b"\x00" + ctl(1, struct.pack("<QQ", 7, 100), chan=2),
        "notif_chan": b"\x00" + ctl(6, struct.pack("<I", 1) + b"n", chan=1),
        "header_pad": b"\x00" + ctl(1, struct.pack("<QQ", 7, 100), pad=0x100),
        "close_chan1": b"\x03" + ctl(1, struct.pack("<QQ", 7, 100), chan=1) + ctl(7, struct.pack("<5I", 2, 0, 0, 1, 0)),
        "unknown": b"\x00" + ctl(77, b"zz"),
        # CANCEL {id} (blob version 10): a read request cancelled while
        # queued, one unknown, one malformed; ACK status 3 (cancelled).
        "cancel_read": b"\x00" + ctl_write(9, [wseg(0, b"A", 0, 4096)], mtype=3) +
        ctl(10, struct.pack("<Q", 9)) + ctl(10, struct.pack("<Q", 12345)) + ctl(10, b"short"),
        "ack_cancelled": b"\x00" + ctl(5, struct.pack("<QiIQ", 1, 3, 0, 0)),
        # CLOSE: u32 channels (fuzz_ctl's conn has 2), then per channel the
        # sender's sends and receives so far.
        "close": b"\x03" + ctl(1, struct.pack("<QQ", 7, 100)) + ctl(7, struct.pack("<5I", 2, 3, 1, 0, 2)),
        "close_then_send": b"\x00" + ctl(7, struct.pack("<5I", 2, 0, 0, 0, 0)) + ctl(1, struct.pack("<QQ", 7, 100)),
        "close_twice": b"\x00" + ctl(7, struct.pack("<5I", 2, 0, 0, 0, 0)) * 2,
        "close_channels": b"\x00" + ctl(7, struct.pack("<5I", 3, 0, 0, 0, 0)),
        "close_body": b"\x00" + ctl(7, b"x"),
        # HEARTBEAT: no body; many of them hold nothing, one with a body fails.
        "heartbeats": b"\x05" + ctl(9, b"") * 64 + ctl(1, struct.pack("<QQ", 7, 100)),
        "heartbeat_body": b"\x00" + ctl(9, b"x"),
    },
    "meta": {
        "whole": meta(8192, 3, 1 << 32, [(4096, 4096, 0), (0, 4096, 4096)]),
        "fragments": meta(10000, 0, 1 << 20, [(i * 4096 + 7, 1000, i * 1000) for i in range(10)]),
        "empty": meta(0, 15, 1 << 32, []),
        "too_many": meta(1 << 22, 1, 1 << 32, [(0, 1, 0)], cnt=2049),
        "past_chunk": meta(8192, 2, 1 << 32, [(0, 4096, 0), (4096, 4096, 8192)]),
        "past_bounce": meta(8192, 2, 65536, [(65535, 2, 0)]),
        "over_page": meta(1 << 20, 4, 1 << 32, [(0, 4097, 0)]),
        "dst_wrap": meta(8192, 5, 1 << 32, [(0, 16, (1 << 64) - 8)]),
        "src_top": meta(8192, 6, 1 << 32, [(0xFFFFF000, 4096, 0), (0xFFFFFFFF, 2, 4096)]),
    },
    "handshake": {
        "hello": b"\x00" + frame(HELLO, blob(1)),
        "crafted": b"\x00" + frame(HELLO, blob(1, handle=emu_handle(stage=1, key=0x4141414141414141))),
        "auth1": b"\x01" + frame(AUTH, auth(1)),
        "auth_then_hello": b"\x01" + frame(AUTH, auth(1)) + frame(AUTH, auth(3)) + frame(HELLO, blob(1) + b"\0" * 32),
        "no_auth": b"\x01" + frame(HELLO, blob(1)),
    },
}

here = os.path.dirname(os.path.abspath(__file__))
for target, seeds in SEEDS.items():
    d = os.path.join(here, "corpus", target)
    os.makedirs(d, exist_ok=True)
    for name, data in seeds.items():
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)
