"""Live integrity methods and signature algorithms (RFC 7574 6.1.1, 6.1.2, 7.7, 8.9):
Sign All beside the Unified Merkle Tree, RSASHA256 beside ECDSA P-256."""

import asyncio
import os

import pytest
from hypothesis import given, settings, strategies as st
from swift_support import live_feeder, pump

from swift.aio.node import InOrderReader, live_source, live_viewer
from swift.core.live import LiveContent, LiveTree, SignAllTree
from swift.core.livesig import LiveSigner
from swift.core.peer import Peer, PeerConfig
from swift.wire import codec as C
from swift.wire.constants import IntegrityMethod, MsgType, SigAlg

SRC, V1, V2 = ("10.1.0.1", 1), ("10.1.0.2", 2), ("10.1.0.3", 3)
_RSA = LiveSigner.generate(SigAlg.RSASHA256, rsa_bits=1024)  # small key: fast tests


_RSA1 = LiveSigner.from_key(_RSA.key, SigAlg.RSASHA1)
_RSA_ALGS = (SigAlg.RSASHA1, SigAlg.RSASHA256)
#: 7.7 / 8.9: signature sizes; ECDSAP384SHA384: 96 bytes, swarm ID 97 bytes
_SIG_SIZE = {SigAlg.RSASHA1: 128, SigAlg.RSASHA256: 128, SigAlg.ECDSAP256SHA256: 64,
             SigAlg.ECDSAP384SHA384: 96}


def _signer(alg):
    return {SigAlg.RSASHA256: _RSA, SigAlg.RSASHA1: _RSA1}.get(alg) or LiveSigner.generate(alg)


@pytest.mark.parametrize("alg", [SigAlg.ECDSAP256SHA256, SigAlg.RSASHA256, SigAlg.RSASHA1,
                                 SigAlg.ECDSAP384SHA384], ids=lambda a: a.name)
def test_signer_swarm_id_round_trip(alg) -> None:
    s = _signer(alg)
    sid = s.swarm_id
    assert sid[0] == alg
    if alg in _RSA_ALGS:  # RFC 3110: exponent length 3 (65537), exponent, modulus
        assert sid[1] == 3 and sid[2:5] == (65537).to_bytes(3, "big") and len(sid) == 5 + 128
    if alg == SigAlg.ECDSAP384SHA384:
        assert len(sid) == 97
    rx = LiveSigner.from_swarm_id(sid)
    assert rx.key is None and rx.sig_size == s.sig_size == _SIG_SIZE[alg]
    sig = s.sign(b"text")
    assert len(sig) == s.sig_size
    assert rx.verify(sig, b"text")
    assert not rx.verify(sig, b"texT")
    assert not rx.verify(bytes([sig[0] ^ 1]) + sig[1:], b"text")
    assert not rx.verify(sig[:-1], b"text")
    with pytest.raises(ValueError):
        rx.sign(b"x")


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_swarm_id_parser_fuzz(sid: bytes) -> None:
    try:
        s = LiveSigner.from_swarm_id(sid)
    except ValueError:
        return
    assert s.alg in _SIG_SIZE


_clock = [1000.0]


def _pump(nodes, src_peer, steps, feed):
    _clock[0] = pump(nodes, steps, t0=_clock[0], dt=0.01, timer_every=5,
                     tick=live_feeder(src_peer, feed, lambda: os.urandom(512)))


def _trees(method: str, alg: SigAlg):
    key = _RSA.key if alg in _RSA_ALGS else None
    if method == "sign-all":
        src = SignAllTree.source(1024, key=key, alg=alg)
        return src, lambda: SignAllTree(src.swarm_id, 1024)
    src = LiveTree.source(4, 1024, key=key, alg=alg)
    return src, lambda: LiveTree(src.swarm_id, 4, 1024)


@pytest.mark.parametrize("method,alg", [("sign-all", SigAlg.ECDSAP256SHA256),
                                        ("sign-all", SigAlg.RSASHA256),
                                        ("umt", SigAlg.RSASHA256),
                                        ("umt", SigAlg.RSASHA1),
                                        ("sign-all", SigAlg.ECDSAP384SHA384)])
def test_live_methods_in_memory_with_relay(method, alg) -> None:
    src_tree, rx_tree = _trees(method, alg)
    source = Peer(LiveContent(src_tree, window=256), PeerConfig(seed=1))
    v1 = Peer(LiveContent(rx_tree(), window=256), PeerConfig(seed=2))
    v2 = Peer(LiveContent(rx_tree(), window=256), PeerConfig(seed=3))
    want = IntegrityMethod.SIGN_ALL if method == "sign-all" else IntegrityMethod.UNIFIED_MERKLE
    opts = source._our_options(True)
    assert (opts.integrity, opts.sig_alg) == (want, alg)
    _pump({SRC: source}, source, 60, feed=True)
    v1.connect(SRC, _clock[0])
    v2.connect(V1, _clock[0])  # relayed only
    _pump({SRC: source, V1: v1, V2: v2}, source, 300, feed=True)
    assert v1.content.have.count() > 40 and v2.content.have.count() > 20
    assert v1.stats["rejected"] == v2.stats["rejected"] == 0
    sent = 0
    for c, data in v2.content.data.items():
        if c in source.content.data:
            assert data == source.content.data[c]
            sent += 1
    assert sent > 20  # compared for real, not only for chunks the source forgot


def test_sign_all_puts_signed_integrity_before_every_data() -> None:
    src_tree, rx_tree = _trees("sign-all", SigAlg.ECDSAP256SHA256)
    source = Peer(LiveContent(src_tree, window=256), PeerConfig(seed=1))
    v1 = Peer(LiveContent(rx_tree(), window=256), PeerConfig(seed=2))
    _pump({SRC: source}, source, 20, feed=True)
    v1.connect(SRC, _clock[0])
    seen = []
    orig = v1.datagram_received

    def spy(d, addr, now):
        if addr == SRC and int.from_bytes(d[:4], "big"):
            seen.append([m.type for m in C.decode_datagram(d, v1.ctx).messages])
        orig(d, addr, now)

    v1.datagram_received = spy  # type: ignore[method-assign]  # spy
    _pump({SRC: source, V1: v1}, source, 100, feed=True)
    with_data = [t for t in seen if MsgType.DATA in t]
    assert with_data
    for t in with_data:
        i = t.index(MsgType.DATA)
        assert t[i - 1] == MsgType.SIGNED_INTEGRITY and MsgType.INTEGRITY not in t


@pytest.mark.parametrize("method,alg", [("sign-all", SigAlg.ECDSAP256SHA256),
                                        ("sign-all", SigAlg.RSASHA256)])
def test_sign_all_forged_or_mismatched_rejected(method, alg) -> None:
    src_tree, rx_tree = _trees(method, alg)
    source = Peer(LiveContent(src_tree, window=256), PeerConfig(seed=1))

    class Evil(LiveContent):
        def chunk_bytes(self, i):
            return b"\1" * len(self.data[i])

    source.content.__class__ = Evil
    v = Peer(LiveContent(rx_tree(), window=256), PeerConfig(seed=2))
    v.connect(SRC, _clock[0])
    _pump({SRC: source, V1: v}, source, 100, feed=True)
    assert v.content.have.count() == 0 and v.stats["rejected"] >= 1
    # a viewer expecting the Unified Merkle Tree is refused by a Sign All source
    other = Peer(LiveContent(LiveTree(src_tree.swarm_id, 4, 1024), window=256), PeerConfig(seed=3))
    other.connect(SRC, _clock[0])
    _pump({SRC: source, V2: other}, source, 20, feed=True)
    assert not other.established and source.stats["refused"] >= 1


@pytest.mark.parametrize("method,alg", [("umt", SigAlg.ECDSAP256SHA256), ("umt", SigAlg.RSASHA256),
                                        ("sign-all", SigAlg.ECDSAP256SHA256),
                                        ("sign-all", SigAlg.RSASHA256),
                                        ("sign-all", SigAlg.RSASHA1),
                                        ("umt", SigAlg.ECDSAP384SHA384)])
async def test_live_loopback_source_to_viewer(method, alg) -> None:
    """Real UDP on 127.0.0.1: live source -> live viewer, bytes in order."""
    key = _RSA.key if alg in _RSA_ALGS else None
    stream = os.urandom(1024 * 200)
    async with live_source(PeerConfig(), method=method, sig_alg=alg, key=key, window=1024) as src:
        sid = src.peer.swarm_id
        assert sid[0] == alg
        pos = 0
        # the stream runs a little before the viewer tunes in
        for _ in range(8):
            src.peer.live_append(stream[pos:pos + 4096], src.now)
            pos += 4096
            src.kick()
            await asyncio.sleep(0.01)
        async with live_viewer(sid, PeerConfig(), method=method, window=1024) as v:
            v.connect(src.addr)
            rd = InOrderReader(v)
            got = bytearray()
            for _ in range(400):
                if pos < len(stream):
                    src.peer.live_append(stream[pos:pos + 4096], src.now)
                    pos += 4096
                    src.kick()
                for c in rd.ready():
                    got += c
                if len(got) >= 64 * 1024:
                    break
                await asyncio.sleep(0.01)
            assert len(got) >= 64 * 1024, (len(got), v.peer.stats)
            first = rd.cursor - len(got) // 1024  # contiguous run ending at the cursor
            assert bytes(got) == stream[first * 1024:first * 1024 + len(got)]
            assert v.peer.stats["rejected"] == 0
