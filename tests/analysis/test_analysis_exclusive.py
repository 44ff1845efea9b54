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
