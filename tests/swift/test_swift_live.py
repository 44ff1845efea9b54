"""Live streaming: Unified Merkle Tree with ECDSA P-256 signed munros (RFC 7574 6.1.2)."""

import os

from swift_support import live_feeder, pump

from swift.core import bins as B, events as ev
from swift.core.live import LiveContent, LiveTree, key_from_swarm_id, munro_of, ntp64, ntp_to_unix
from swift.core.peer import Peer, PeerConfig

SRC, V1, V2 = ("10.1.0.1", 1), ("10.1.0.2", 2), ("10.1.0.3", 3)


def test_sign_and_verify_munros() -> None:
    src = LiveTree.source(per_sig=4, chunk_size=100)
    assert len(src.swarm_id) == 65 and src.swarm_id[0] == 13
    key_from_swarm_id(src.swarm_id)
    chunks = [os.urandom(100) for _ in range(8)]
    m0 = src.sign_group(0, chunks[:4], 1000.0)
    m1 = src.sign_group(4, chunks[4:], 1001.0)
    assert (m0, m1) == (munro_of(0, 4), munro_of(4, 4)) == (3, 11)
    rx = LiveTree(src.swarm_id, per_sig=4, chunk_size=100)
    h, ts, sig = src.signed[m1]
    assert not rx.verify(5, chunks[5], dict(src.uncles(5, None)))  # munro not trusted yet
    bad = bytes([sig[0] ^ 1]) + sig[1:]
    assert not rx.offer_munro(m1, h, ts, bad, 1001.0)
    assert not rx.offer_munro(m1, bytes(32), ts, sig, 1001.0)
    assert not rx.offer_munro(m1, h, ts, sig, 1001.0 + 3600)  # too old (6.1.2.4)
    assert rx.offer_munro(m1, h, ts, sig, 1002.0)
    assert not rx.verify(5, b"x" * 100, dict(src.uncles(5, None)))
    assert rx.verify(5, chunks[5], dict(src.uncles(5, None)))
    assert rx.verify(6, chunks[6], dict(src.uncles(6, None)))  # sibling hashes remembered
    assert abs(ntp_to_unix(ntp64(1234.5)) - 1234.5) < 1e-6


_clock = [1000.0]


def _pump(nodes, src_peer, steps, feed):
    _clock[0] = pump(nodes, steps, t0=_clock[0], dt=0.01, timer_every=5,
                     tick=live_feeder(src_peer, feed, lambda: os.urandom(512)))


def test_live_source_and_two_viewers_with_relay() -> None:
    tree = LiveTree.source(per_sig=4, chunk_size=1024)
    source = Peer(LiveContent(tree, window=256), PeerConfig(seed=1))
    v1 = Peer(LiveContent(LiveTree(tree.swarm_id, 4, 1024), window=256), PeerConfig(seed=2))
    v2 = Peer(LiveContent(LiveTree(tree.swarm_id, 4, 1024), window=256), PeerConfig(seed=3))
    _pump({SRC: source}, source, 100, feed=True)  # the stream runs before anyone joins
    v1.connect(SRC, 1001.0)
    v2.connect(V1, 1001.0)  # v2 only knows v1: everything it gets is relayed
    nodes = {SRC: source, V1: v1, V2: v2}
    _pump(nodes, source, 400, feed=True)
    produced = source.content.next_chunk
    assert produced >= 120
    got1 = v1.content.have.count()
    got2 = v2.content.have.count()
    assert got1 > 40 and got2 > 20
    assert v1.stats["rejected"] == 0 and v2.stats["rejected"] == 0
    for c, data in v2.content.data.items():
        assert data == source.content.data.get(c, data)
    # the viewer tuned in near the live edge, not at chunk 0
    assert v1.live_start is not None and v1.live_start > 0
    kinds = {type(e) for e in (v2.next_event() for _ in range(10000)) if e is not None}
    assert ev.ChunkVerified in kinds


def test_live_discard_window_forgets_old_chunks() -> None:
    tree = LiveTree.source(per_sig=2, chunk_size=64)
    c = LiveContent(tree, window=16)
    c.append(os.urandom(64 * 100), 5.0)
    assert c.next_chunk == 100
    assert min(c.data) >= 100 - 16 and c.have.find_filled(0) >= 84
    assert all(B.base_range(m)[1] > 80 for m in tree.signed)


def test_live_forged_data_rejected() -> None:
    tree = LiveTree.source(per_sig=4, chunk_size=1024)
    source = Peer(LiveContent(tree, window=256), PeerConfig(seed=1))

    class Evil(LiveContent):
        def chunk_bytes(self, i):
            return b"\0" * len(self.data[i])

    source.content.__class__ = Evil
    v = Peer(LiveContent(LiveTree(tree.swarm_id, 4, 1024), window=256), PeerConfig(seed=2))
    v.connect(SRC, 1000.0)
    _pump({SRC: source, V1: v}, source, 100, feed=True)
    assert v.content.have.count() == 0 and v.stats["rejected"] >= 1


def test_key_from_swarm_id_is_the_signer_path_for_all_four_algorithms() -> None:
    """6.1/7.7: one parser for DNSKEY swarm IDs (RSASHA1, RSASHA256,
    ECDSAP256SHA256, ECDSAP384SHA384): key_from_swarm_id is LiveSigner's."""
    import pytest

    from swift.core.livesig import SUPPORTED, LiveSigner
    for alg in SUPPORTED:
        s = LiveSigner.generate(alg, rsa_bits=1024)
        k = key_from_swarm_id(s.swarm_id)
        assert k.public_numbers() == s.pub.public_numbers()
        assert LiveSigner.from_swarm_id(s.swarm_id).pub.public_numbers() == k.public_numbers()
        with pytest.raises(ValueError):
            key_from_swarm_id(s.swarm_id[:-1])
    for bad in (b"", b"\x0d", b"\x07" + bytes(64), bytes([13]) + bytes(64)):
        with pytest.raises(ValueError):
            key_from_swarm_id(bad)


def test_key_from_swarm_id_fuzz() -> None:
    """Arbitrary bytes: a public key or ValueError, nothing else."""
    from hypothesis import given, settings, strategies as st

    @settings(max_examples=300, deadline=None)
    @given(st.sampled_from([5, 8, 13, 14, 7, 0]), st.binary(max_size=200))
    def check(alg: int, body: bytes) -> None:
        try:
            key_from_swarm_id(bytes([alg]) + body)
        except ValueError:
            pass
    check()
