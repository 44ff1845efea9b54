"""The slow-start request window applies only before the first rate sample
(review 2, finding 5).

"No sample yet" was tested as ``ch.path.rate <= 0``; a channel that stops
delivering halves its rate average every 0.5 s and reaches exactly 0.0
after some nine minutes, which made the window jump to ``2 * received``
(up to max_outstanding) long after start-up.  Sans-IO: the planner's rate
update (``_rank``) is driven directly through those silent minutes, since
the channel's liveness rule (3.12) would otherwise close it first.
"""

import os

from swift_support import leecher, pump, seeder

from swift.core import bins as B
from swift.core.peer import PeerConfig

SEED, LEECH = ("10.0.0.1", 6778), ("10.0.0.2", 6778)


def test_window_does_not_jump_after_rate_decays_to_zero() -> None:
    s = seeder(os.urandom(3000 * 1024), PeerConfig(seed=1))
    leech = leecher(s.swarm_id, PeerConfig(seed=2))
    leech.connect(SEED, 0.0)
    now = pump({SEED: s, LEECH: leech}, steps=100000,
               until=lambda: any(c.path.received >= 400 for c in leech.channels.values()))
    ch = next(iter(leech.channels.values()))
    assert ch.path.received >= 400 and not leech.content.complete
    for _ in range(1200):  # ten silent minutes: the average halves each time
        now += 0.5
        leech._rank(now)
    assert ch.path.rate == 0.0
    for c in list(ch.down.requests):  # as the request timeout does
        leech.inflight.reset(B.chunk(c))
    ch.down.clear()
    leech._request_msgs(ch, now)
    # the window from the (fallback) rate, not slow start's 2 x received
    assert 0 < len(ch.down.requests) < 100, len(ch.down.requests)
