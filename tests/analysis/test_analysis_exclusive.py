"""One protocol's packets never count as another's (issue 13 item 14).

Every frame of captures that hold all four protocols (real peers' captures from
../shared/captures, and a capture this test makes of our own roles running side
by side on loopback) is claimed (``accepts``) by at most one protocol analyser,
and by the one whose protocol it is.  The PPSPP analyser used to claim LISP
data packets: an 8-byte LISP header with no flags reads as channel 0 + HANDSHAKE.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from deliverykit.analyse import Options, load_analysers
from deliverykit.pcap import Frame, Reader

SHARED = Path(__file__).resolve().parents[3] / "shared" / "captures"
PROTOCOLS = ("corecast", "m2c", "ppspp", "vmc")
LISP_PORTS = {4341, 4342}


def claims(frames: list[Frame], opts: dict | None = None) -> list[set[str]]:
    """For each frame (in order), the protocol analysers that claimed it."""
    analysers = load_analysers(PROTOCOLS, Options(opts or {}))
    out = []
    for f in frames:
        got = {a.name for a in analysers if a.accepts(f)}
        for a in analysers:
            if a.name in got:
                a.feed(f)
        out.append(got)
    return out


def _shared(sub: str) -> list[Path]:
    found = sorted((SHARED / sub).glob("*.pcap"))
    if not found:
        pytest.fail(f"no captures under {SHARED / sub} (the shared captures of real peers)")
    return found


@pytest.mark.parametrize("path", _shared("libswift") if (SHARED / "libswift").is_dir() else [],
                         ids=lambda p: p.name)
def test_libswift_captures_are_ppspp_only(path):
    frames = list(Reader(path))
    got = claims(frames)
    assert got and all(g == {"ppspp"} for g in got), {tuple(sorted(g)) for g in got}


@pytest.mark.parametrize("path", _shared("oor") if (SHARED / "oor").is_dir() else [],
                         ids=lambda p: p.name)
def test_oor_lisp_captures_are_corecast_only(path):
    """OOR's LISP data and control (4341/4342) and our ITR's inside port: corecast's; the
    plain inner traffic between EIDs is nobody's."""
    frames = list(Reader(path))
    got = claims(frames)
    for f, g in zip(frames, got):
        if f.sport in LISP_PORTS or f.dport in LISP_PORTS or f.dport == 9341:
            assert g == {"corecast"}, (f.src, f.sport, f.dst, f.dport, g)
        else:
            assert g == set(), (f.src, f.sport, f.dst, f.dport, g)


def test_shared_captures_present():
    assert (SHARED / "libswift").is_dir() and (SHARED / "oor").is_dir(), SHARED


@pytest.mark.root
@pytest.mark.tool("tcpdump", "curl")
@pytest.mark.slow
def test_our_four_roles_side_by_side(tmp_path, procs):
    """One loopback capture of a PPSPP seed + download (on no well-known port: followed from
    its handshake), ``corecast deploy`` (LISP data/control, the ITR inside port), an M2C
    send + receive (ALC to a multicast group, IGMP) and HTTP from a VMC origin: each frame
    is claimed by exactly its own protocol's analyser."""
    import json
    import os
    import random
    import subprocess
    import time

    from analysis_support import PY, free_tcp_port, free_udp_port, tcpdump
    from test_analysis_vmc import _wait_port

    pp, op = free_udp_port(), free_tcp_port()
    net = f"239.194.{random.randint(1, 250)}"
    mport = random.randint(41000, 49000)
    cc_ports = (4341, 4342, 9341, 54341)
    bpf = (f"udp port {pp} or tcp port {op} or igmp or (udp and dst net {net}.0/24) or "
           + " or ".join(f"udp port {p}" for p in cc_ports))
    cap = tmp_path / "mixed.pcap"
    content = tmp_path / "c.bin"
    content.write_bytes(os.urandom(100_000))
    with tcpdump(cap, bpf):
        seed = subprocess.Popen([PY, "-m", "swift", "seed", str(content), "--host", "127.0.0.1",
                                 "--port", str(pp), "--duration", "60"],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        procs.append(seed)
        root = seed.stdout.readline().strip()
        dl = subprocess.run([PY, "-m", "swift", "download", root, "--peer", f"127.0.0.1:{pp}",
                             "-o", str(tmp_path / "o.bin"), "-q", "--host", "127.0.0.1",
                             "--timeout", "30"], capture_output=True, text=True, timeout=60)
        assert dl.returncode == 0, dl.stderr
        dep = subprocess.run([PY, "-m", "corecast", "deploy", "--chunks", "4", "--json"],
                             capture_output=True, text=True, timeout=120)
        assert dep.returncode == 0, dep.stderr[-2000:]
        sdp = tmp_path / "s.json"
        send = subprocess.Popen([PY, "-m", "m2c", "send", str(content), "--sdp", str(sdp),
                                 "--group", f"{net}.1", "--port", str(mport), "--max-rate",
                                 "8000", "--duration", "3"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(send)
        end = time.monotonic() + 10
        while not (sdp.exists() and sdp.stat().st_size) and time.monotonic() < end:
            time.sleep(0.05)
        rx = subprocess.run([PY, "-m", "m2c", "receive", str(sdp), "-o", str(tmp_path / "m"),
                             "-q", "--timeout", "15"], capture_output=True, text=True, timeout=30)
        assert rx.returncode == 0, rx.stderr
        procs.append(subprocess.Popen([PY, "-m", "vmc", "origin", "--listen", f"127.0.0.1:{op}"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        _wait_port(op)
        subprocess.run(["curl", "-sS", "-o", "/dev/null", f"http://127.0.0.1:{op}/x?size=300000"],
                       check=True, timeout=30)
        send.wait(30)
    frames = list(Reader(cap))
    got = claims(frames)

    def truth(f: Frame) -> str | None:
        if f.proto == 6:
            return "vmc"
        if f.proto == 2 or f.dst.startswith(net + "."):
            return "m2c"
        if pp in (f.sport, f.dport):
            return "ppspp"
        if any(p in (f.sport, f.dport) for p in cc_ports) or f.proto == 253:
            return "corecast"
        return None

    seen: dict[str, int] = {}
    for f, g in zip(frames, got):
        want = truth(f)
        assert g == ({want} if want else set()), (f.src, f.sport, f.dst, f.dport, f.proto, g)
        if want:
            seen[want] = seen.get(want, 0) + 1
    assert set(seen) == set(PROTOCOLS), seen  # all four were in the capture
    # and as a user sees it: each analyser's frame count in the JSON
    out = subprocess.run([PY, "-m", "deliverykit", "analyse", str(cap), "--no-progress", "--json",
                          "-"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    counts = json.loads(out.stdout)["analysers"]
    assert {p: counts[p]["frames"] for p in PROTOCOLS} == seen
