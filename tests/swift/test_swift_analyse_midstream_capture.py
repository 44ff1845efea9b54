"""``deliverykit analyse`` (ppspp) on a capture that starts after the handshake
(user test 14): chunks seen then count as unverifiable (no swarm ID, no hash
function), and without ``--opt ppspp-port`` the errors table says how to give it.
The datagrams are those two real sans-IO peers exchanged."""

from __future__ import annotations

import os

from swift_support import leecher, seeder

from deliverykit.pcap import Frame
from swift.analysis import Analyser
from swift.core.peer import PeerConfig

SEED, LEECH = ("10.0.0.1", 6900), ("10.0.0.2", 5000)


def _capture() -> list[Frame]:
    cfg = PeerConfig()
    s = seeder(os.urandom(64 * 1024 + 5), cfg)
    d = leecher(s.swarm_id, cfg)
    nodes = {SEED: s, LEECH: d}
    d.connect(SEED, 0.0)
    frames = []
    now = 0.0
    for step in range(3000):
        now += 0.002
        for addr, p in nodes.items():
            for data, dst in p.datagrams_to_send(now):
                other = LEECH if addr == SEED else SEED
                assert dst == other
                frames.append(Frame(now, addr[0], other[0], 17, addr[1], other[1], data,
                                    len(data) + 28))
                nodes[other].datagram_received(data, addr, now)
        if step % 10 == 0:
            for p in nodes.values():
                p.handle_timer(now)
        if d.content.complete:
            break
    assert d.content.complete
    return frames


def _run(frames: list[Frame], **opts) -> dict:
    a = Analyser(opts)
    for f in frames:
        if a.accepts(f):
            a.feed(f)
    return a.tables()


def test_capture_after_the_handshake():
    frames = _capture()
    whole = _run(frames, **{"ppspp-port": "6900"})
    row = next(r for r in whole["ppspp_peers"] if r["peer"] == "10.0.0.2:5000")
    assert row["verified_chunks"] == 65 and row["unverifiable_chunks"] == 0
    late = [f for f in frames if f.payload[:4] != b"\0\0\0\0"][4:]  # no channel-0 HANDSHAKE
    res = _run(late, **{"ppspp-port": "6900"})
    row = next(r for r in res["ppspp_peers"] if r["peer"] == "10.0.0.2:5000")
    assert row["chunks_received"] > 0
    assert row["unverifiable_chunks"] == row["chunks_received"] + row["duplicate_chunks"]
    assert row["verified_chunks"] == row["rejected_chunks"] == 0
    blind = _run(late)  # default port 6778: nothing followed, and the table says why
    assert blind["ppspp_peers"] == []
    hint = [r for r in blind["ppspp_errors"] if "ppspp-port=PORT" in r["what"]]
    assert hint and hint[0]["count"] == len(late)
