"""VoD: a high-priority request past its deadline goes to a different peer
(paper III-C, "allowing to forward the same request to a different peer in
case it is not retrieved on time"); with no other peer holding the chunk it
stays asked where it is (docs/sim-fig6.md, "Why linear stalls least",
session 14).

Before, the request was CANCELled and asked again of the same peer, which
put the chunk at the back of that peer's queue, behind chunks asked after
it; every 0.2 s again while it stayed late.  In the Fig. 6 swarm the seeder
was that peer for the chunks at the playback position, and the leechers
stalled on them.

And a chunk that two peers both missed was left by each to the other for
good ("goes to another peer that has it"), so nobody asked for it again.
"""

import os

from swift_support import leecher, pump, seeder

from swift.core.peer import PeerConfig

SEED, SEED2, LEECH = ("10.0.0.1", 1), ("10.0.0.3", 3), ("10.0.0.2", 2)
CHUNKS = 60
#: 16 chunks/s of video and a 2 s margin: chunks 0-31 from the playback
#: position have deadlines; a seeder serving 10 chunks/s misses them
VOD = dict(picker="vod", high_window=64, bitrate=16 * 1024, deadline_margin=2.0,
           request_timeout=30.0)


def _arrival_order(nodes: dict, leech) -> list[int]:
    """Chunks in the order the leecher verified them (pumped to completion)."""
    order: list[int] = []

    def tick(step: int, now: float) -> None:
        have = leech.content.have
        for c in range(CHUNKS):
            if c not in seen and have.has(c):
                seen.add(c)
                order.append(c)

    seen: set[int] = set()
    pump(nodes, steps=6000, dt=0.005, tick=tick, until=lambda: leech.content.complete)
    tick(0, 0.0)
    return order


def test_a_late_chunk_only_one_peer_holds_keeps_its_place_in_that_peers_queue() -> None:
    s = seeder(os.urandom(CHUNKS * 1024), PeerConfig(seed=1, upload_rate=10 * 1024))
    leech = leecher(s.swarm_id, PeerConfig(seed=2, **VOD))
    leech.set_playpos(0, buffering=False)  # playing from 0: deadlines apply
    leech.connect(SEED, 0.0)
    order = _arrival_order({SEED: s, LEECH: leech}, leech)
    assert leech.content.complete
    assert leech.stats.get("deadline_missed", 0) > 0  # deadlines did pass
    # the one seeder serves in request order: the urgent chunks were not
    # moved behind later ones (before: e.g. [0, 1, ..., 12, 14, ..., 13])
    assert order == sorted(order), order


def test_a_late_chunk_another_peer_holds_is_forwarded_there() -> None:
    data = os.urandom(CHUNKS * 1024)
    a = seeder(data, PeerConfig(seed=1, upload_rate=10 * 1024))
    b = seeder(data, PeerConfig(seed=3, upload_rate=10 * 1024))
    leech = leecher(a.swarm_id, PeerConfig(seed=2, **VOD))
    leech.set_playpos(0, buffering=False)
    leech.connect(SEED, 0.0)
    leech.connect(SEED2, 0.0)
    _arrival_order({SEED: a, SEED2: b, LEECH: leech}, leech)
    # before: chunks late at both seeders were left by each to the other,
    # and nobody asked for them again (28 of 60 missing after 30 s)
    assert leech.content.complete
    forwarded = leech.stats.get("deadline_missed", 0) - leech.stats.get("deadline_kept", 0)
    assert forwarded > 0  # the rule still moves a late request to the other seeder
