"""Real libswift exchanges (../shared/captures/libswift, issue 15 item 7).

* Every datagram of every capture decodes with our codec, libswift's legacy
  swift handshake included (it used to read as INTEGRITY then "unknown
  message type 0xd8").
* Our peer, fed libswift's side of a capture in capture order (virtual time,
  no sockets), answers what libswift would accept: a handshake reply its
  option parser takes (no option 9, libswift's ``StaticOnHandshake``), and
  DATA for the chunks libswift asked for, which verify against the root.

The captures are found beside the clone (../shared/captures from the repo
root, as tests/analysis/test_analysis_exclusive.py does); without them these
tests skip with that reason.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from deliverykit.pcap import Reader
from deliverykit.testing import require_data
from swift.core import bins as B
from swift.core.content import Content, MemoryStorage
from swift.core.merkle import MerkleTree
from swift.core.peer import Peer, PeerConfig
from swift.wire import codec as C
from swift.wire.constants import ChunkAddressing, HashFunc, MsgType, Option

SHARED = Path(__file__).resolve().parents[3] / "shared" / "captures" / "libswift"
CAPTURES = sorted(SHARED.glob("*.pcap")) if SHARED.is_dir() else []
ROOT_1K = bytes.fromhex("e3eb2f6f11d5a63feef47a775ba7c9ce89794d79")

@pytest.fixture
def _captures() -> None:
    require_data(bool(CAPTURES),
                 f"the libswift captures in {SHARED} (shared/ beside the repository)")


needs_captures = pytest.mark.usefixtures("_captures")


def _chunk_size(path: Path) -> int:
    return 8192 if "_8k" in path.name else 1024


def _ctx(path: Path) -> C.WireContext:
    return C.WireContext.make(ChunkAddressing.CHUNK32, HashFunc.SHA1, chunk_size=_chunk_size(path))


def _udp(path: Path) -> list:
    return [f for f in Reader(path) if f.proto == 17 and f.sport is not None]


@needs_captures
@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name)
def test_every_datagram_decodes(path: Path) -> None:
    frames = _udp(path)
    assert frames
    bad = []
    for f in frames:
        got = C.decode_datagram(f.payload, _ctx(path))
        if got.error is not None:
            bad.append((f.sport, f.dport, f.payload[:40].hex(), got.error))
    assert not bad, bad[:5]


@needs_captures
def test_legacy_handshake_decodes_as_version_0() -> None:
    """d2_b: libswift's leecher gave up on PPSPP after 3 tries and sent its legacy handshake."""
    path = SHARED / "d2_b_ours_seed_ls_leech_rfc_sha1.pcap"
    legacy = [f.payload for f in _udp(path) if C.is_legacy_handshake(f.payload)]
    assert legacy
    for d in legacy:
        got = C.decode_datagram(d, _ctx(path))
        assert got.error is None and got.channel == 0
        (hs,) = got.messages
        assert hs.type == MsgType.HANDSHAKE and hs.channel != 0
        assert hs.options.legacy and hs.options.version == 0
        assert hs.options.swarm_id == ROOT_1K


def _content_tree(cs: int) -> tuple[bytes, MerkleTree]:
    data = (SHARED / "content-1M.bin").read_bytes()
    return data, MerkleTree.build((data[i:i + cs] for i in range(0, len(data), cs)),
                                  HashFunc.SHA1, cs)


#: what libswift's option parser (StaticOnHandshake) takes: anything else,
#: Chunk Size (9) first of all, makes it drop the whole datagram
LIBSWIFT_OPTIONS = {Option.VERSION, Option.MIN_VERSION, Option.SWARM_ID, Option.CONTENT_INTEGRITY,
                    Option.MERKLE_HASH_FUNC, Option.LIVE_SIGNATURE_ALG, Option.CHUNK_ADDRESSING,
                    Option.LIVE_DISCARD_WINDOW}
LS = ("127.0.0.1", 40000)


def _option_codes(o: C.HandshakeOptions) -> set[int]:
    names = {"version": 0, "min_version": 1, "swarm_id": 2, "integrity": 3, "hash_func": 4,
             "sig_alg": 5, "addressing": 6, "discard_window": 7, "supported": 8, "chunk_size": 9}
    return {code for name, code in names.items() if getattr(o, name) is not None}


def _sides(frames: list) -> tuple[int, int]:
    """(initiator port, responder port) of the first channel-0 datagram."""
    first = next(f for f in frames if f.payload[:4] == b"\0\0\0\0")
    return first.sport, first.dport


def _first_handshake(outs: list, ctx: C.WireContext) -> C.Handshake:
    for d, _ in outs:
        for m in C.decode_datagram(d, ctx).messages:
            if m.type == MsgType.HANDSHAKE:
                return m
    raise AssertionError("no handshake sent")


SEEDER_SIDE = [p for p in CAPTURES if p.name.startswith(("b_", "c_b_", "d2_b_"))]
LEECHER_SIDE = [p for p in CAPTURES if p.name.startswith(("a_", "c_a_"))]


@needs_captures
@pytest.mark.parametrize("path", SEEDER_SIDE, ids=lambda p: p.name)
def test_our_seeder_answers_libswift_leecher(path: Path) -> None:
    """libswift's leecher side of a capture, in capture order, into our seeder with no
    profile (auto) and SHA-1: the reply carries only options libswift parses, every
    DATA is a chunk libswift asked for, with the content's bytes, and every INTEGRITY
    is the Merkle hash of the range it names (what libswift checks the DATA with)."""
    cs = _chunk_size(path)
    ctx = _ctx(path)
    data, tree = _content_tree(cs)
    peer = Peer(Content.seeded(tree, MemoryStorage(data)),
                PeerConfig(hash_func=HashFunc.SHA1, chunk_size=cs, profile="auto"))
    frames = _udp(path)
    ls_port, _ = _sides(frames)
    theirs = [f for f in frames if f.sport == ls_port]
    captured_ours = None  # the channel ID the seeder in the capture had
    for f in frames:
        if f.sport != ls_port and f.payload[:4] != b"\0\0\0\0":
            msgs = C.decode_datagram(f.payload, ctx).messages
            if msgs and msgs[0].type == MsgType.HANDSHAKE:
                captured_ours = msgs[0].channel
                break
    ours = None
    requested: set[int] = set()
    sent: dict[int, bytes] = {}
    replies = legacy_closes = hashes = 0
    for f in theirs:
        now = f.ts
        d = f.payload
        if (ours is not None and captured_ours is not None
                and d[:4] == captured_ours.to_bytes(4, "big")):
            d = ours.to_bytes(4, "big") + d[4:]
        got = C.decode_datagram(d, ctx)
        assert got.error is None, got.error
        for m in got.messages:
            if m.type == MsgType.REQUEST:
                requested.update(range(m.start, m.end + 1))
        peer.datagram_received(d, LS, now)
        if peer.get_timer(now) <= now:
            peer.handle_timer(now)
        for out, addr in peer.datagrams_to_send(now):
            assert addr == LS
            if len(out) == 9 and out[4:] == bytes(5):
                legacy_closes += 1  # the closing reply to libswift's legacy handshake
                continue
            dec = C.decode_datagram(out, ctx)
            assert dec.error is None
            for m in dec.messages:
                if m.type == MsgType.HANDSHAKE and m.channel:
                    assert _option_codes(m.options) <= LIBSWIFT_OPTIONS, m.options
                    assert m.options.version == 1 and m.options.hash_func == HashFunc.SHA1
                    ours = m.channel
                    replies += 1
                elif m.type == MsgType.DATA:
                    assert m.start == m.end and m.start in requested, m.start
                    sent[m.start] = m.payload
                elif m.type == MsgType.INTEGRITY:  # what libswift checks DATA with
                    w = m.end - m.start + 1
                    assert w & (w - 1) == 0 and m.start % w == 0, (m.start, m.end)
                    b = B.make(w.bit_length() - 1, m.start // w)
                    assert m.hash == tree.hash(b), (m.start, m.end)
                    hashes += 1
    assert replies, "our seeder never answered libswift's handshake"
    if requested:  # d2_b: libswift gave up before it asked for anything
        assert sent and hashes
    legacy = sum(C.is_legacy_handshake(f.payload) for f in theirs)
    assert legacy_closes == legacy
    for c, payload in sent.items():
        assert payload == data[c * cs:(c + 1) * cs], c


@needs_captures
@pytest.mark.parametrize("path", LEECHER_SIDE, ids=lambda p: p.name)
def test_our_leecher_takes_libswift_seeder(path: Path) -> None:
    """Our leecher, no profile and SHA-1 (as ``ppspp download`` infers from a 40-hex root),
    opens in libswift's dialect (no option 9: a SHA-1 swarm is in practice libswift's, and
    libswift drops a handshake with option 9); libswift's seeder side of the capture then
    opens the channel and its chunks verify against the root."""
    cs = _chunk_size(path)
    ctx = _ctx(path)
    data, tree = _content_tree(cs)
    frames = _udp(path)
    _, ls_port = _sides(frames)
    theirs = [f for f in frames if f.sport == ls_port]
    peer = Peer(Content(MerkleTree.for_root(tree.root_hash, HashFunc.SHA1, cs), MemoryStorage()),
                PeerConfig(hash_func=HashFunc.SHA1, chunk_size=cs, profile="auto"))
    t0 = theirs[0].ts - 0.3  # answered before the 0.5-s retry in the other dialect
    ours = peer.connect(LS, t0)
    first = _first_handshake(peer.datagrams_to_send(t0), ctx)
    assert _option_codes(first.options) <= LIBSWIFT_OPTIONS, first.options
    captured = C.decode_datagram(theirs[0].payload, ctx).channel
    for f in theirs:
        d = f.payload
        if d[:4] == captured.to_bytes(4, "big"):
            d = ours.to_bytes(4, "big") + d[4:]
        peer.datagram_received(d, LS, f.ts)
        if peer.get_timer(f.ts) <= f.ts:
            peer.handle_timer(f.ts)
        peer.datagrams_to_send(f.ts)
    assert peer.established or peer.stats["verified"]
    assert peer.stats["verified"] > 0 and peer.stats["rejected"] == 0, peer.stats
    for c in range(tree.n_chunks or 0):
        if peer.content.have.has(c):
            assert peer.content.read_chunk(c) == data[c * cs:(c + 1) * cs]
