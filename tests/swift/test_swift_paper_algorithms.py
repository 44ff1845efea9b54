"""The Libswift paper's algorithms (Petrocco et al., section III) as the paper has them.

Eq. 1 ranking, eq. 2 fast set and eq. 3 request size on hand-computed values
(from the paper's formulas, not from the code); the dynamic x of eq. 2 driven
by a real player's stall; WFQ upload fairness (III-B) and push mode (II, RFC
7574 3.7) in the packet-level simulator (deliverykit.sim), the same Peer
objects that run on sockets.  docs/swift.md, "The paper's algorithms"."""

from __future__ import annotations

import hashlib
import random

import pytest

from deliverykit.sim import Simulation
from swift.core.binmap import Binmap
from swift.core.chanstate import ChannelEvent
from swift.core.config import PeerConfig
from swift.core.content import Content, MemoryStorage
from swift.core.merkle import MerkleTree
from swift.core.peer import Peer
from swift.core.picker import expected_bandwidth, fast_set, request_size
from swift.core.player import Player
from swift.sim import SwiftApp, flash_crowd
from swift.wire import codec as C
from swift.wire.constants import MsgType

CS = 1024


# -- eq. 1: R_i = S_i - k S_i L_r, S_i = P (1 - RTT_i) / DIP_i -------------------------


@pytest.mark.parametrize(("p", "rtt", "dip", "loss", "k", "want"), [
    # S = 1024 * 0.8 / 0.01 = 81,920; R = 81,920 - 2 * 81,920 * 0.1 = 65,536
    (1024, 0.2, 0.01, 0.1, 2.0, 65_536.0),
    # no loss: R = S = 1024 * 0.9 / 0.002 = 460,800
    (1024, 0.1, 0.002, 0.0, 1.0, 460_800.0),
    # S = 8192 * 0.5 / 0.1 = 40,960; k = 1, L_r = 0.25: R = 0.75 S = 30,720
    (8192, 0.5, 0.1, 0.25, 1.0, 30_720.0),
    # k L_r > 1 would make it negative: no bandwidth expected
    (1024, 0.1, 0.01, 0.5, 4.0, 0.0),
    # RTT of 1 s or more: (1 - RTT) <= 0, nothing expected (the factor is clamped)
    (1024, 1.5, 0.01, 0.0, 1.0, 0.0),
])
def test_eq1_expected_bandwidth(p: int, rtt: float, dip: float, loss: float, k: float,
                                want: float) -> None:
    assert expected_bandwidth(p, rtt, dip, loss, k) == pytest.approx(want)


# -- eq. 2: the first n peers by decreasing R_i with sum R_i >= x BR_v --------------------


def test_eq2_fast_set_takes_the_fewest_best_peers_that_cover_x_times_the_bitrate() -> None:
    ranked = [(100.0, "a"), (300.0, "b"), (200.0, "c"), (50.0, "d")]
    # x BR = 4 * 100 = 400: b (300) < 400, b + c (500) >= 400
    assert fast_set(ranked, 100.0, 4.0) == ["b", "c"]
    # equality is enough: 500 >= 5 * 100
    assert fast_set(ranked, 100.0, 5.0) == ["b", "c"]
    # 5.5 * 100 = 550: b + c + a = 600
    assert fast_set(ranked, 100.0, 5.5) == ["b", "c", "a"]
    # one peer alone covers 1.5 * 100
    assert fast_set(ranked, 100.0, 1.5) == ["b"]
    # all of them fall short of 10 * 100: all are fast
    assert sorted(fast_set(ranked, 100.0, 10.0)) == ["a", "b", "c", "d"]


# -- eq. 3: request size min(W_ledbat / 2, H / F) ------------------------------------------


@pytest.mark.parametrize(("w", "h", "f", "want"), [
    (40, 64, 4, 16),   # min(20, 16)
    (10, 64, 2, 5),    # min(5, 32)
    (100, 64, 3, 21),  # min(50, 21.33) -> 21 whole chunks
    (64, 64, 1, 32),   # min(32, 64)
    (1, 64, 1, 1),     # min(0.5, 64) -> at least one chunk
])
def test_eq3_request_size(w: int, h: int, f: int, want: int) -> None:
    assert request_size(w, h, f) == want


# -- dynamic x of eq. 2 -----------------------------------------------------------------------


def _leecher(cfg: PeerConfig, n_chunks: int = 64) -> Peer:
    data = random.Random(1).randbytes(n_chunks * CS)
    tree = MerkleTree.build([data[i:i + CS] for i in range(0, len(data), CS)], cfg.hash_func, CS)
    return Peer(Content(MerkleTree.for_root(tree.root_hash, cfg.hash_func, CS), MemoryStorage()),
                cfg)


def _ranked_peer(bitrate: float) -> tuple[Peer, list[int]]:
    """A leecher with five established channels of known measurements, ranked
    (eq. 1) at t = 1: R_i = 1024 * (1 - 0.1) * rate_i, no loss."""
    p = _leecher(PeerConfig(picker="vod", bitrate=bitrate, seed=1))
    ids = []
    for i, rate in enumerate((50.0, 40.0, 30.0, 20.0, 10.0)):
        ch = p._new_channel(("127.0.0.1", 9000 + i), True, 0.0)
        ch.handle(ChannelEvent.HANDSHAKE_REPLY)
        ch.path.received, ch.path.lost, ch.path.min_rtt, ch.path.rate = 100, 0, 0.1, rate
        ch.path.rate_mark = (1.0, ch.path.received)  # no new rate sample at t = 1
        ids.append(ch.local_id)
    p._rank(1.0)
    return p, ids


def test_rank_uses_eq1_and_eq2_with_the_channels_measurements() -> None:
    # R = 921.6 * rate: 46,080, 36,864, 27,648, 18,432, 9,216 bytes/s.
    # BR = 50,000, x = 1.5: 75,000 needs the best two (82,944)
    p, ids = _ranked_peer(50_000.0)
    assert p.fast_factor == 1.5
    assert p.fast == set(ids[:2])


def test_a_player_stall_grows_x_and_widens_the_fast_set_and_playback_shrinks_it_back() -> None:
    p, ids = _ranked_peer(50_000.0)
    have = Binmap()
    have.set_range(0, 8)
    # a real player: 1 s start-up buffer of a 50 KB/s video = 49 chunks
    player = Player(50_000.0, CS, 10_000 * CS, start=0.0, prebuffer=1.0)

    def tick(now: float) -> None:  # what the drivers do every poll (swift/sim.py)
        pos = player.tick(now, have)
        p.set_playpos(pos, buffering=player.state == "buffering")

    tick(0.1)
    assert player.state == "buffering" and p.fast_factor == 1.5  # start-up is no stall
    have.set_range(0, 100)
    tick(0.2)
    assert player.state == "playing" and p.fast_factor == 1.5
    tick(3.0)  # 150,000 bytes played, only 102,400 there: the player stalls
    assert player.stalls == 1 and player.state == "buffering"
    # x = 2.0: 100,000 needs three peers (110,592), at once, not at the next ranking
    assert p.fast_factor == 2.0
    assert p.fast == set(ids[:3])
    tick(3.1)  # still buffering: the same stall, counted once
    assert p.fast_factor == 2.0
    have.set_range(0, 200)
    tick(3.2)
    assert player.state == "playing"
    tick(6.0)  # 140,000 more bytes played, 102,400 more there: stalls again
    assert player.stalls == 2 and p.fast_factor == 2.5
    assert p.fast == set(ids[:4])  # 125,000 needs four (129,024)
    # stall-free playback: 10 s of a 50 KB/s video = 488 chunks per step back
    have.set_range(0, 10_000)
    tick(6.1)
    assert player.state == "playing"
    tick(6.1 + 9.0)  # 9 s played since: not yet
    assert p.fast_factor == 2.5
    tick(6.1 + 10.1)
    assert p.fast_factor == 2.0 and p.fast == set(ids[:3])
    tick(6.1 + 20.2)
    assert p.fast_factor == 1.5 and p.fast == set(ids[:2])
    tick(6.1 + 40.0)  # never below the configured x
    assert p.fast_factor == 1.5


def test_x_is_capped_at_fast_factor_max() -> None:
    p, ids = _ranked_peer(50_000.0)
    for _ in range(20):
        p.note_stall()
    assert p.fast_factor == p.config.fast_factor_max == 4.0
    assert p.fast == set(ids)  # 200,000 exceeds all five together: all are fast


# -- WFQ upload fairness (III-B) --------------------------------------------------------------


def _wfq_share(a: int, b: int) -> tuple[float, int]:
    """One seeder capped at 200 KB/s (its uplink is not the limit), two
    leechers keeping ``a`` and ``b`` requests outstanding (not exchanging with
    each other, 2 MiB so neither completes): the second leecher's share of
    the chunks verified from 0.5 s to 4.5 s (after start-up), and how many.
    Their linear pickers keep plain order (no twist), so they ask for the same
    chunks and the seeder's weighted fair queueing alone decides the shares."""
    sc = flash_crowd(2, 2048 * CS, seeder_up=100e6, leecher_up=100e6, delay=0.001, seed=1)
    app = SwiftApp(sc, PeerConfig(upload_rate=200_000.0), PeerConfig(), node_configs={
        "l000": PeerConfig(max_outstanding=a, picker_twist=False),
        "l001": PeerConfig(max_outstanding=b, picker_twist=False)})
    sim = Simulation(sc, app, seed=1)

    def verified() -> list[int]:
        hosts = [sim.hosts[n] for n in ("l000", "l001")]
        return [h.core.stats["verified"] for h in hosts]  # type: ignore[attr-defined]  # a Peer

    sim.run(until=0.5)
    v0 = verified()
    sim.run(until=4.5)
    d = [x - y for x, y in zip(verified(), v0)]
    assert not app.completed
    return d[1] / sum(d), sum(d)


def test_wfq_shares_follow_the_outstanding_requests() -> None:
    """2 and 6 outstanding: about 1 : 3 (0.75, within 5 points of share) over
    about 700 DATA datagrams; equal weights split evenly."""
    share, n = _wfq_share(2, 6)
    assert n > 600 and 0.70 <= share <= 0.80, share
    share, n = _wfq_share(4, 4)
    assert n > 600 and 0.45 <= share <= 0.55, share


@pytest.mark.parametrize(("a", "b"), [(2, 6), (2, 8)])
def test_wfq_shares_are_proportional_within_two_points(a: int, b: int) -> None:
    share, _ = _wfq_share(a, b)
    assert abs(share - b / (a + b)) <= 0.025, share


# -- push mode (paper II; RFC 7574 3.7) ------------------------------------------------------


def _push_run(push: bool) -> tuple[SwiftApp, Simulation, int]:
    """One seeder, one leecher, 128 KiB; counts the REQUEST messages on the
    leecher's outgoing datagrams as a capture on its link would."""
    size = 128 * CS + 100
    sc = flash_crowd(1, size, seed=2)
    app = SwiftApp(sc, PeerConfig(push=push), PeerConfig(push=push))
    sim = Simulation(sc, app, seed=2)
    requests = 0
    send = sim.network.send
    ctx = C.WireContext(PeerConfig().addressing, 32, 64, CS)

    def tap(name: str, data: bytes, dst: object) -> None:
        nonlocal requests
        if name == "l000" and data[:4] != bytes(4):
            _, msgs, _ = C.decode_raw(data, ctx)
            requests += sum(m[0] == MsgType.REQUEST for m in msgs)
        send(name, data, dst)

    sim.network.send = tap  # type: ignore[method-assign,assignment]  # tap the network
    sim.run(until=30.0)
    return app, sim, requests


def test_push_mode_delivers_the_whole_content_without_a_request() -> None:
    app, sim, requests = _push_run(True)
    host = sim.hosts["l000"]
    assert "l000" in app.completed
    peer = host.core
    stored = bytes(peer.content.storage.buf[:app.size])  # type: ignore[attr-defined]  # a Peer
    assert hashlib.sha256(stored).digest() == hashlib.sha256(app.data).digest()
    root_hash = peer.content.tree.root_hash  # type: ignore[attr-defined]  # a Peer
    assert root_hash == app.tree.root_hash
    assert requests == 0
    stats = peer.stats  # type: ignore[attr-defined]  # a Peer
    assert stats["pushed"] == stats["verified"] == 129


def test_pull_mode_is_still_the_default_and_asks() -> None:
    app, _, requests = _push_run(False)
    assert "l000" in app.completed and requests > 0
    assert PeerConfig().push is False


def test_push_mode_in_a_swarm_and_as_the_experiments_knob() -> None:
    """Leechers pull from each other while the seeder pushes; every one gets
    the whole content (compared byte for byte); the flash crowd's --push
    turns it on for both roles."""
    from swift.experiments.flashcrowd import configs
    from swift.sim import run
    seeder, leecher = configs(64 * CS, push=True)
    assert seeder.push and leecher.push and not any(c.push for c in configs(64 * CS))
    res = run(flash_crowd(4, 96 * CS, seed=3), seeder_config=seeder, leecher_config=leecher)
    assert res.all_verified and all(r.completion_s is not None for r in res.leechers)
    assert sum(r.stats.get("pushed", 0) for r in res.leechers) > 0
