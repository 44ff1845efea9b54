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

import hashlib
from pathlib import Path

import pytest

from deliverykit.pcap import Reader
from swift.core.content import Content, MemoryStorage
from swift.core.merkle import MerkleTree
from swift.core.peer import Peer, PeerConfig
from swift.wire import codec as C
from swift.wire.constants import ChunkAddressing, HashFunc, MsgType, Option

SHARED = Path(__file__).resolve().parents[3] / "shared" / "captures" / "libswift"
CAPTURES = sorted(SHARED.glob("*.pcap")) if SHARED.is_dir() else []
ROOT_1K = bytes.fromhex("e3eb2f6f11d5a63feef47a775ba7c9ce89794d79")

needs_captures = pytest.mark.skipif(not CAPTURES, reason=f"no libswift captures in {SHARED}")


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
    return data, MerkleTree.build((data[i:i + cs] for i in range(0, len(data), cs)), HashFunc.SHA1, cs)
