"""Start-up request window (docs/swift.md, "Requests"): until the first rate
sample that saw data, the window grows by one request per chunk delivered.

The planner takes a rate sample at its first timer, right after connect,
when nothing can have arrived; counting that empty sample as "the first
sample" held every download at the initial 48-chunk guess for its first
0.5 s (the quick loopback benchmark fell from ~28 to ~15 MB/s at 1 KiB).
"""

import os

from swift_support import leecher, pump, seeder

from swift.core.peer import PeerConfig

SEED, LEECH = ("10.0.0.1", 6778), ("10.0.0.2", 6778)


def test_window_grows_in_the_first_half_second() -> None:
    s = seeder(os.urandom(3000 * 1024), PeerConfig(seed=1))
    leech = leecher(s.swarm_id, PeerConfig(seed=2))
    leech.connect(SEED, 0.0)
    most = [0]

    def watch(step: int, now: float) -> None:
        for c in leech.channels.values():
            most[0] = max(most[0], len(c.down.requests))

    pump({SEED: s, LEECH: leech}, steps=200, dt=0.002, tick=watch)  # 0.4 s: before the 2nd sample
    ch = next(iter(leech.channels.values()))
    assert ch.path.received > 100
    assert most[0] > 48, most[0]  # past the initial guess: slow-start growth
