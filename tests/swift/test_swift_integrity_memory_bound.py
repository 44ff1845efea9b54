"""INTEGRITY without DATA must not grow a channel's memory without bound
(review 2, finding 3).

The 4096 cap was on ``pending_hashes`` (a dict by bin), while every
INTEGRITY message was appended to ``hash_order``: a peer repeating one bin
grew that list forever.  The cap now holds for both.
"""

import os

from swift_support import leecher, pump, seeder

from swift.core.peer import PeerConfig
from swift.wire import codec as C

SEED, LEECH = ("10.0.0.1", 6778), ("10.0.0.2", 6778)


def test_repeated_integrity_is_bounded_and_download_completes() -> None:
    s = seeder(os.urandom(64 * 1024), PeerConfig(seed=1))
    leech = leecher(s.swarm_id, PeerConfig(seed=2))
    leech.connect(SEED, 0.0)
    nodes = {SEED: s, LEECH: leech}
    now = pump(nodes, steps=5)
    lch = next(iter(leech.channels.values()))
    assert lch.state == "est"
    one_bin = C.encode_datagram(leech.ctx, lch.local_id, [C.Integrity(0, 0, os.urandom(32))] * 37)
    many = C.encode_datagram(leech.ctx, lch.local_id,
                             [C.Integrity(k, k, os.urandom(32)) for k in range(37)])
    for _ in range(300):  # 11,100 messages each
        leech.datagram_received(one_bin, SEED, now)
        leech.datagram_received(many, SEED, now)
    assert len(lch.verify.hash_order) <= 4096
    assert len(lch.verify.hashes) <= 4096
    # the garbage hashes are dropped with the next DATA; the download goes on
    pump(nodes, steps=20000, t0=now, until=lambda: leech.content.complete)
    assert leech.content.complete
