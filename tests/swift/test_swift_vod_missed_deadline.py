"""VoD: a chunk whose deadline one peer missed is left to another peer only
when there is one (review 2, finding 2; paper III-C).

With a single seeder slower than the deadline rule, every missed chunk was
filtered out of that seeder's picks and never asked for again (the end game
only takes chunks in flight), so the download stopped for good.
"""

import os

from swift_support import leecher, pump, seeder

from swift.core.peer import PeerConfig

SEED, LEECH = ("10.0.0.1", 1), ("10.0.0.2", 2)


def test_vod_one_slow_seeder_completes_after_missed_deadlines() -> None:
    s = seeder(os.urandom(300 * 1024), PeerConfig(seed=1, upload_rate=100_000))
    leech = leecher(s.swarm_id, PeerConfig(seed=2, picker="vod"))
    leech.set_playpos(0, buffering=False)
    leech.connect(SEED, 0.0)
    pump({SEED: s, LEECH: leech}, steps=30000, until=lambda: leech.content.complete)
    assert leech.stats.get("deadline_missed", 0) > 0  # the rule did fire
    n = leech.content.n_chunks
    assert leech.content.complete, [c for c in range(n) if not leech.content.have.has(c)][:10]
