"""Review fixes for live streaming (RFC 7574 6.1.1, 6.1.2.2, 6.1.2.4, 7.7, 8.9).

Each test here failed before its fix: stale signatures blamed on an honest
source, signatures over a fixed 8-byte spec instead of the wire spec,
missing mandatory algorithms, the SIGNED_INTEGRITY cache cap.
"""

import os
import struct

import pytest
from swift_support import live_feeder, pump

from swift.core import bins as B
from swift.core.live import LiveContent, LiveTree, SignAllTree, Trust
from swift.core.livesig import LiveSigner
from swift.core.peer import Peer, PeerConfig
from swift.wire.constants import ChunkAddressing, SigAlg

SRC, V1 = ("10.2.0.1", 1), ("10.2.0.2", 2)


def _pump(nodes, src_peer, t0, steps, feed, dt=0.01):
    return pump(nodes, steps, t0=t0, dt=dt, timer_every=5,
                tick=live_feeder(src_peer, feed, lambda: os.urandom(512)))


def _pair(method: str):
    if method == "sign-all":
        src = SignAllTree.source(1024)
        return src, SignAllTree(src.swarm_id, 1024)
    src = LiveTree.source(4, 1024)
    return src, LiveTree(src.swarm_id, 4, 1024)


def test_tree_age_check_only_at_tune_in() -> None:
    """6.1.2.4: the age check applies when tuning in; afterwards a munro is
    judged against the newest trusted timestamp, and a genuine old one is
    STALE (discarded), never BAD."""
    src = LiveTree.source(per_sig=4, chunk_size=100)
    chunks = [os.urandom(100) for _ in range(12)]
    m0 = src.sign_group(0, chunks[0:4], 1000.0)
    m1 = src.sign_group(4, chunks[4:8], 1030.0)
    m2 = src.sign_group(8, chunks[8:12], 1200.0)
    rx = LiveTree(src.swarm_id, per_sig=4, chunk_size=100)
    h, ts, sig = src.signed[m0]
    r = rx.offer_munro(m0, h, ts, sig, 1070.0)  # tuning in 70 s late: stale, not bad
    assert r is Trust.STALE and not r and rx.last_stale and m0 not in rx.signed
    assert rx.offer_munro(m0, h, ts, bytes(64), 1070.0) is Trust.BAD  # forgery stays bad
    h1, ts1, sig1 = src.signed[m1]
    assert rx.offer_munro(m1, h1, ts1, sig1, 1031.0) is Trust.OK
    # tuned in: m0 is 30 s older than the newest trusted munro -> fine even
    # though our clock moved on by 500 s (a paused stream, or we lag behind)
    assert rx.offer_munro(m0, h, ts, sig, 1530.0) is Trust.OK
    h2, ts2, sig2 = src.signed[m2]
    assert rx.offer_munro(m2, h2, ts2, sig2, 1530.0) is Trust.OK  # newer than newest
    # now the newest is 1200: a munro signed at 1000 is behind by 200 s
    rx2 = LiveTree(src.swarm_id, per_sig=4, chunk_size=100)
    assert rx2.offer_munro(m2, h2, ts2, sig2, 1201.0) is Trust.OK
    assert rx2.offer_munro(m0, h, ts, sig, 1201.0) is Trust.STALE
    # Sign All: same rule
    sa = SignAllTree.source(100)
    sa.sign_group(0, chunks[:1], 1000.0)
    rxa = SignAllTree(sa.swarm_id, 100)
    t0, s0 = sa.signed[0]
    assert rxa.offer(0, chunks[0], t0, s0, 1070.0) is Trust.STALE
    assert rxa.offer(0, chunks[1], t0, s0, 1070.0) is Trust.BAD
    assert rxa.offer(0, chunks[0], t0, s0, 1010.0) is Trust.OK


@pytest.mark.parametrize("method", ["sign-all", "umt"])
def test_late_viewer_does_not_blacklist_honest_source(method) -> None:
    """A viewer joining 70 s after 64 chunks were injected (6.1.2.4): the
    old chunks are discarded as stale, the source is neither choked nor
    blacklisted, and once the stream resumes the viewer plays it."""
    src_tree, rx_tree = _pair(method)
    source = Peer(LiveContent(src_tree, window=256), PeerConfig(seed=1))
    t = 5000.0
    source.live_append(os.urandom(64 * 1024), t)
    assert source.content.next_chunk == 64
    v = Peer(LiveContent(rx_tree, window=256), PeerConfig(seed=2))
    t += 70.0
    v.connect(SRC, t)
    t = _pump({SRC: source, V1: v}, source, t, 200, feed=False)
    assert v.stats.get("stale", 0) >= 1
    assert v.stats["rejected"] == 0 and SRC not in v.blacklist
    ch = next(iter(v.channels.values()))
    assert ch.verify.bad == 0 and not ch.verify.distrusted and ch.addr == SRC
    assert v.content.have.count() == 0  # MUST discard too old (6.1.2.4)
    # (the stale DATA went unacknowledged: the source waits out its LEDBAT CTO)
    _pump({SRC: source, V1: v}, source, t, 1000, feed=True)  # the stream resumes
    assert v.content.have.count() > 20 and v.stats["rejected"] == 0
    for c, data in v.content.data.items():
        assert data == source.content.data[c]


def _independent_spec(addressing, lo: int, hi: int, cs: int) -> bytes:
    """The wire chunk spec of an aligned range, written out per RFC 7574 4.3."""
    if addressing == ChunkAddressing.BIN32:
        w = hi - lo
        return struct.pack(">I", B.make(w.bit_length() - 1, lo // w))
    if addressing == ChunkAddressing.BYTE64:
        return struct.pack(">QQ", lo * cs, hi * cs - 1)
    return struct.pack(">II", lo, hi - 1)


@pytest.mark.parametrize("method", ["umt", "sign-all"])
@pytest.mark.parametrize("addressing", [ChunkAddressing.BIN32, ChunkAddressing.BYTE64,
                                        ChunkAddressing.CHUNK32], ids=lambda a: a.name)
def test_live_signature_covers_wire_chunk_spec(method, addressing) -> None:
    """6.1.1 / 6.1.2.2: the signed text starts with the on-the-wire chunk
    specification in the swarm's addressing (bin32: 4 bytes, byte64: 16),
    and a viewer on that addressing verifies it end to end."""
    src_tree, rx_tree = _pair(method)
    cfg = dict(addressing=addressing)
    source = Peer(LiveContent(src_tree, window=256), PeerConfig(seed=1, **cfg))
    v = Peer(LiveContent(rx_tree, window=256), PeerConfig(seed=2, **cfg))
    t = source.live_append(os.urandom(16 * 1024), 7000.0) and 7000.0
    for key, val in list(src_tree.signed.items())[:4]:
        if method == "umt":
            lo, hi = B.base_range(key)
            h, ts, sig = val
            text = _independent_spec(addressing, lo, hi, 1024) + ts.to_bytes(8, "big") + h
        else:
            ts, sig = val
            text = (_independent_spec(addressing, key, key + 1, 1024) + ts.to_bytes(8, "big")
                    + source.content.data[key])
        assert src_tree.signer.verify(sig, text)
    v.connect(SRC, t)
    _pump({SRC: source, V1: v}, source, t, 300, feed=True)
    assert v.content.have.count() > 20 and v.stats["rejected"] == 0


@pytest.mark.parametrize("junk", ["unsolicited-data", "bare-signatures"])
def test_signed_integrity_cache_cannot_block_honest_chunks(junk) -> None:
    """6.1.1: SIGNED_INTEGRITY precedes each DATA.  70 unsolicited DATA with
    their signatures, or 70 signatures without DATA, must not fill the
    per-channel cache so that the next honest chunk's signature is dropped
    and the chunk counted corrupt."""
    src_tree, rx_tree = _pair("sign-all")
    source = Peer(LiveContent(src_tree, window=512), PeerConfig(seed=1))
    t = 9000.0
    source.live_append(os.urandom(200 * 1024), t)
    v = Peer(LiveContent(rx_tree, window=512), PeerConfig(seed=2))
    v.connect(SRC, t)
    t = _pump({SRC: source, V1: v}, source, t, 6, feed=False)  # handshake + tune-in probe
    sch = next(iter(source.channels.values()))
    vch = next(iter(v.channels.values()))
    assert sch.state == vch.state == "est" and v.live_start is not None
    for i in range(70):  # chunks far behind the tune-in point: never requested
        d = source._data_dgram(sch, i, t)
        if junk == "bare-signatures":
            d = d[:4] + d[4:4 + 1 + 8 + 8 + 64]  # SIGNED_INTEGRITY only (chunk32 spec)
        v.datagram_received(d, SRC, t)
    assert len(vch.verify.sigs) <= 64
    _pump({SRC: source, V1: v}, source, t, 200, feed=True)
    assert v.stats["rejected"] == 0 and v.content.have.count() > 20 and SRC not in v.blacklist


@pytest.mark.parametrize("method,alg,ok", [("umt", SigAlg.ECDSAP256SHA256, True),
                                           ("sign-all", SigAlg.ECDSAP256SHA256, False),
                                           ("umt", SigAlg.RSASHA256, False)])
def test_live_handshake_without_options_means_defaults(method, alg, ok) -> None:
    """7.5 / 7.7: a HANDSHAKE without the integrity method or live signature
    algorithm option means Unified Merkle Tree and ECDSAP256SHA256; a Sign
    All or RSA swarm refuses it instead of accepting it."""
    from swift.wire import codec as C
    if alg == SigAlg.RSASHA256:
        tree = LiveTree.source(4, 1024, key=LiveSigner.generate(alg, rsa_bits=1024).key, alg=alg)
    else:
        tree = _pair(method)[0]
    source = Peer(LiveContent(tree, window=256), PeerConfig(seed=1))
    opts = C.HandshakeOptions(version=1, min_version=1, swarm_id=tree.swarm_id,
                              hash_func=source.config.hash_func, chunk_size=1024)
    d = C.encode_datagram(source.ctx, 0, [C.Handshake(0x1234, opts)])
    source.datagram_received(d, V1, 1.0)
    assert bool(source.channels) is ok and (source.stats["refused"] == 0) is ok


def test_tune_in_from_signed_munro_not_from_have() -> None:
    """6.1.2.4: the tune-in point comes from the rightmost signed munro.  An
    unsigned HAVE far ahead of the stream does not move it there."""
    from swift.wire import codec as C
    src_tree, rx_tree = _pair("umt")
    source = Peer(LiveContent(src_tree, window=256), PeerConfig(seed=1))
    t = 9500.0
    source.live_append(os.urandom(100 * 1024), t)
    v = Peer(LiveContent(rx_tree, window=256), PeerConfig(seed=2))
    v.connect(SRC, t)
    t = _pump({SRC: source, V1: v}, source, t, 2, feed=False)  # handshake only
    vch = next(iter(v.channels.values()))
    sch = next(iter(source.channels.values()))
    lie = source._pack(sch, sch.remote_id, [C.Have(1_000_000, 1_000_000)])  # chunk32 spec
    v.datagram_received(lie[0], SRC, t)
    assert vch.remote.top == 1_000_001
    _pump({SRC: source, V1: v}, source, t, 100, feed=False)
    assert v.live_start is None or v.live_start < 200  # never near the unsigned HAVE
    # an honest HAVE: tune in behind the newest signed munro (chunk 99's munro ends at 100)
    v2 = Peer(LiveContent(_pair("umt")[1].__class__(src_tree.swarm_id, 4, 1024), window=256),
              PeerConfig(seed=3))
    v2.connect(SRC, t)
    _pump({SRC: source, ("10.2.0.3", 3): v2}, source, t, 50, feed=False)
    assert v2.live_start == 100 - v2.config.live_prebuffer
    assert v2.content.have.has(99)


def test_pex_ca_key_does_not_write_into_a_shared_config() -> None:
    from swift.core.pexcert import new_ca_key
    cfg = PeerConfig(seed=1, tracker=True, pex_ca_key=new_ca_key())
    p = Peer(LiveContent(_pair("umt")[1], window=64), cfg)
    assert p.config.pex_ca is not None and cfg.pex_ca is None


def test_note_stall_does_not_change_a_shared_config() -> None:
    cfg = PeerConfig(seed=1)
    a = Peer(LiveContent(_pair("umt")[1], window=64), cfg)
    b = Peer(LiveContent(_pair("umt")[1], window=64), cfg)
    a.note_stall()
    assert a.fast_factor == cfg.fast_factor + 0.5 and b.fast_factor == cfg.fast_factor == 1.5


def test_umt_pushes_rightmost_signed_munro_for_tune_in() -> None:
    """6.1.2.4: in the Unified Merkle Tree scheme a peer sends its rightmost
    signed munro (INTEGRITY + SIGNED_INTEGRITY) without waiting for a
    REQUEST, until the other side has a chunk under it or later; the
    viewer trusts it and tunes in behind it before any DATA."""
    from swift.wire import codec as C
    from swift.wire.constants import MsgType
    src_tree, rx_tree = _pair("umt")
    source = Peer(LiveContent(src_tree, window=256), PeerConfig(seed=1))
    t = 9700.0
    source.live_append(os.urandom(100 * 1024), t)
    v = Peer(LiveContent(rx_tree, window=256), PeerConfig(seed=2))
    seen: list[list[int]] = []
    orig = v.datagram_received

    def spy(d, addr, now, arrived=None):
        if int.from_bytes(d[:4], "big"):
            seen.append([m.type for m in C.decode_datagram(d, v.ctx).messages])
        orig(d, addr, now)

    v.datagram_received = spy  # type: ignore[method-assign]  # spy
    v.connect(SRC, t)
    t = _pump({SRC: source, V1: v}, source, t, 6, feed=False)
    push = [k for k, x in enumerate(seen)
            if MsgType.SIGNED_INTEGRITY in x and MsgType.DATA not in x]
    data = [k for k, x in enumerate(seen) if MsgType.DATA in x]
    assert push and (not data or push[0] < data[0])  # before any DATA
    assert seen[push[0]][-2:] == [MsgType.INTEGRITY, MsgType.SIGNED_INTEGRITY]
    assert rx_tree.frontier == 100
    t = _pump({SRC: source, V1: v}, source, t, 100, feed=False)
    assert v.live_start == 100 - v.config.live_prebuffer and v.content.have.has(99)
    seen.clear()
    _pump({SRC: source, V1: v}, source, t, 300, feed=False)
    assert not [x for x in seen if MsgType.SIGNED_INTEGRITY in x]  # the viewer has it: no more
