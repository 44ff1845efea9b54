"""Fig. 6's linear baseline asks for the video in order from its first
request (paper IV-A: "The first retrieves data in order"; docs/sim-fig6.md,
"Why linear stalls least", session 14).

The player attaches itself as an in-order reader at its first poll, 50 ms
after the leecher starts; a leecher whose handshake finished sooner sent its
first requests with the linear picker's per-block twist, rotated to a
random offset, and started playing later for it.
"""

import os

from swift_support import leecher, pump, seeder

from swift.core.peer import PeerConfig
from swift.experiments import vod_swarm

SEED, LEECH = ("10.0.0.1", 1), ("10.0.0.2", 2)


def test_the_vod_swarms_linear_leecher_asks_in_order_before_the_player_attaches() -> None:
    seed_cfg, leech_cfg = vod_swarm.configs(1024, 125_000.0, "linear")
    data = os.urandom(512 * 1024)
    firsts = []
    for seed in range(1, 6):  # the twist's offset is drawn per peer
        s = seeder(data, PeerConfig(seed=100 + seed, chunk_size=seed_cfg.chunk_size))
        cfg = PeerConfig(**{**leech_cfg.__dict__, "seed": seed})
        lee = leecher(s.swarm_id, cfg)
        lee.connect(SEED, 0.0)  # no set_playpos yet: the player has not polled
        # chunk 0 alone comes first (the size, 5.6.2); then the picker's requests
        pump({SEED: s, LEECH: lee}, steps=200, dt=0.001,
             until=lambda lee=lee: lee.content.have.has(0) and any(
                 c.down.requests for c in lee.channels.values()))
        asked = sorted(c for ch in lee.channels.values() for c in ch.down.requests)
        assert asked, "no request in 0.2 s"
        firsts.append(asked[0])
    assert firsts == [1] * 5, firsts  # before: a random offset in the first block
