"""PPSPP wire vectors: one datagram per message type and chunk addressing method (RFC 7574 sec. 8).

A vector file (``tests/vectors/ppspp/ppspp-<addressing>.vec``) is text: ``#``
comments naming the source, then ``addressing``, ``hash`` and ``chunk_size``
lines (the wire context) and one ``vector NAME HEX`` line per datagram.
Written by ``python -m swift.conformance.vectors export DIR``; read back with
:func:`load_all`. Vectors from another implementation go in their own file
with their own ``# source:`` line.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from deliverykit.conformance import vectors_dir as shared_vectors_dir
from swift.wire import codec as C
from swift.wire.constants import ChunkAddressing, HashFunc, IntegrityMethod, SigAlg, Version

ADDRESSINGS = {"bin32": ChunkAddressing.BIN32, "byte64": ChunkAddressing.BYTE64,
               "chunk32": ChunkAddressing.CHUNK32, "bin64": ChunkAddressing.BIN64,
               "chunk64": ChunkAddressing.CHUNK64}
CHANNEL = 0x5A17C0DE
ROOT = bytes(range(32))


def _ctx(addressing: str) -> C.WireContext:
    return C.WireContext.make(
        ADDRESSINGS[addressing], HashFunc.SHA256, SigAlg.ECDSAP256SHA256, 1024
    )


def _spec(ctx: C.WireContext, lo: int, hi: int) -> tuple[int, int]:
    if ctx.is_bin:
        w = hi - lo
        lay = w.bit_length() - 1
        b = ((lo >> lay) << (lay + 1)) + (1 << lay) - 1
        return b, b
    if ctx.addressing == ChunkAddressing.BYTE64:
        return lo * 1024, hi * 1024 - 1
    return lo, hi - 1


def datagrams(addressing: str) -> list[tuple[str, bytes]]:
    """(name, datagram bytes) for every message type under ``addressing``."""
    ctx = _ctx(addressing)
    s4 = _spec(ctx, 4, 8)
    s1 = _spec(ctx, 2, 3)
    payload = bytes((i * 7) & 0xFF for i in range(1024))
    opts = C.HandshakeOptions(version=Version.V1, min_version=Version.V1, swarm_id=ROOT,
                              integrity=IntegrityMethod.MERKLE, hash_func=HashFunc.SHA256,
                              addressing=ctx.addressing, chunk_size=1024)
    msgs: list[tuple[str, list]] = [
        ("handshake-initiation", [C.Handshake(0x01020304, opts)]),
        ("handshake-close", [C.Handshake(0)]),
        ("data", [C.Data(*s1, 0x0005F5E100, payload)]),
        ("ack", [C.Ack(*s4, 25000)]),
        ("have", [C.Have(*s4)]),
        ("integrity", [C.Integrity(*s4, bytes(range(100, 132)))]),
        ("signed-integrity", [C.SignedIntegrity(*s4, 0xE3C0FFEE00000000, bytes(range(64)))]),
        ("request", [C.Request(*s4)]),
        ("cancel", [C.Cancel(*s4)]),
        ("choke", [C.Choke()]),
        ("unchoke", [C.Unchoke()]),
        ("pex-req", [C.PexReq()]),
        ("pex-res-v4", [C.PexResV4("192.0.2.7", 6778)]),
        ("pex-res-v6", [C.PexResV6("2001:db8::7", 6778)]),
        ("pex-res-cert", [C.PexResCert(b"\x30\x03\x02\x01\x01")]),
        ("keepalive", []),
        ("integrity-then-data", [C.Integrity(*s4, bytes(32)), C.Data(*s1, 1, payload)]),
    ]
    return [(name, C.encode_datagram(ctx, 0 if name.startswith("handshake-init") else CHANNEL, m))
            for name, m in msgs]


def _commit() -> str:
    try:
        return (
            subprocess.run(
                ["git", "rev-parse", "--short", "HEAD"],
                capture_output=True,
                text=True,
                cwd=Path(__file__).parent,
                timeout=5,
            ).stdout.strip()
            or "unknown"
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def export(directory: str | Path) -> list[Path]:
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    out = []
    for a in ADDRESSINGS:
        lines = [f"# ppspp-{a}: one datagram per message type, RFC 7574 sec. 8",
                 f"# source: swift.wire.codec (this toolkit, commit {_commit()}), "
                 "`python -m swift.conformance.vectors export`",
                 f"addressing {a}", "hash sha256", "chunk_size 1024"]
        lines += [f"vector {n} {b.hex()}" for n, b in datagrams(a)]
        p = d / f"ppspp-{a}.vec"
        p.write_text("\n".join(lines) + "\n")
        out.append(p)
    return out


def parse(text: str) -> dict:
    v: dict = {"comments": [], "vectors": {}}
    for line in text.splitlines():
        if line.startswith("#"):
            v["comments"].append(line[1:].strip())
        elif line.startswith("vector "):
            _, name, hexs = line.split()
            v["vectors"][name] = bytes.fromhex(hexs)
        elif line.strip():
            k, _, val = line.partition(" ")
            v[k] = int(val) if val.isdigit() else val
    return v


def vectors_dir() -> Path | None:
    """The ppspp vector folder (see deliverykit.conformance.vectors_dir)."""
    return shared_vectors_dir("ppspp")


def load_all(directory: Path | None = None) -> list[tuple[str, dict]]:
    d = directory or vectors_dir()
    return [] if d is None else [(p.stem, parse(p.read_text())) for p in sorted(d.glob("*.vec"))]


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "export":
        for p in export(sys.argv[2]):
            print(p)
        sys.exit(0)
    print("usage: python -m swift.conformance.vectors export DIR", file=sys.stderr)
    sys.exit(2)
