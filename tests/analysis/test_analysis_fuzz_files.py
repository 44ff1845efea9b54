"""Every analyser on damaged capture files: one error line or counted malformed frames,
never a traceback (issue 13: "fuzz each analyser with truncated/garbage pcap files").

The base file mixes real traffic of all four protocols (libswift PPSPP and OOR's LISP
from ../shared/captures, ALC from our encoder, HTTP over TCP); it is cut at many
points, has bytes flipped and runs of garbage written over it, and is read by
``deliverykit analyse`` with every analyser, text, JSON and CSV outputs on.
"""

from __future__ import annotations

import random
import struct
from pathlib import Path

import pytest
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.l2 import Ether
from scapy.utils import wrpcap

from deliverykit import analyse
from deliverykit.pcap import Reader
from m2c.wire.codec import AlcPacket, encode

SHARED = Path(__file__).resolve().parents[3] / "shared" / "captures"


def _mixed(tmp_path: Path) -> bytes:
    pk = []
    for rel in ("libswift/ref_ls_ls_8k.pcap", "oor/bc1-vB.pcap"):
        p = SHARED / rel
        if not p.exists():
            pytest.fail(f"{p} is missing (the shared captures of real peers)")
        for ts, lt, data, _orig in Reader(p).records():
            assert lt == 1  # both Ethernet
            e = Ether(data)
            e.time = ts
            pk.append(e)
    for i in range(20):
        alc = encode(AlcPacket(session=7, toi=0, codepoint=3, slot=i // 5, group=i % 2, psn=i // 2,
                               buffer_id=0, offset=i * 100, sbn=0, esi=i, payload=bytes(100)))
        pk.append(Ether() / IP(src="10.0.0.1", dst="239.1.1.1") / UDP(sport=9, dport=47000) / alc)
    req = b"GET /a HTTP/1.1\r\nHost: o\r\n\r\n"
    resp = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nVMC: first\r\n\r\nhello"
    c, s = ("10.0.0.2", 40000), ("10.0.0.3", 8080)
    pk += [Ether() / IP(src=c[0], dst=s[0]) / TCP(sport=c[1], dport=s[1], flags="S", seq=99),
           Ether() / IP(src=s[0], dst=c[0]) / TCP(sport=s[1], dport=c[1], flags="SA", seq=499),
           Ether() / IP(src=c[0], dst=s[0])
           / TCP(sport=c[1], dport=s[1], flags="PA", seq=100) / req,
           Ether() / IP(src=s[0], dst=c[0])
           / TCP(sport=s[1], dport=c[1], flags="PA", seq=500) / resp,
           Ether() / IP(src=s[0], dst=c[0]) / TCP(sport=s[1], dport=c[1], flags="FA",
                                                 seq=500 + len(resp))]
    path = tmp_path / "mixed.pcap"
    wrpcap(str(path), pk)
    return path.read_bytes()


def _variants(data: bytes, rng: random.Random):
    """Cut files, flipped bytes, garbage runs, absurd record lengths, a garbage file."""
    for n in sorted({0, 3, 4, 23, 24, 30, 40, 100, *rng.sample(range(24, len(data)), 12)}):
        yield f"cut{n}", data[:n]
    for k in range(10):
        b = bytearray(data)
        for _ in range(rng.randint(1, 200)):
            b[rng.randrange(24, len(b))] ^= 1 << rng.randrange(8)
        yield f"flip{k}", bytes(b)
    for k in range(6):
        b = bytearray(data)
        at = rng.randrange(24, len(b) - 64)
        b[at:at + 64] = rng.randbytes(64)
        yield f"garbage{k}", bytes(b)
    b = bytearray(data)
    struct.pack_into("<I", b, 24 + 8, 0xFFFFFF00)  # first record's captured length
    yield "hugelen", bytes(b)
    yield "random", rng.randbytes(5000)


def test_damaged_files_never_traceback(tmp_path, capsys):
    data = _mixed(tmp_path)
    rng = random.Random(13)
    for name, blob in _variants(data, rng):
        cap = tmp_path / f"{name}.pcap"
        cap.write_bytes(blob)
        out = tmp_path / name
        plots = ["--plots", str(out) + "-plots"] if name in ("flip0", "flip1", "garbage0") else []
        rc = analyse.main([str(cap), "--no-progress", "--json", str(out) + ".json",
                           "--csv", str(out) + "-csv", *plots])
        io = capsys.readouterr()
        assert "Traceback" not in io.err + io.out, name
        if rc == 2:  # not a capture at all: one line
            assert len(io.err.strip().splitlines()) == 1, (name, io.err)
            assert not Path(str(out) + ".json").exists()
        else:
            assert rc == 0, (name, rc, io.err)
            assert Path(str(out) + ".json").stat().st_size > 0
