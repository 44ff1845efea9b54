"""Dialect per channel, refusal reasons, Supported Messages (issue 15 items 1 and 5).

Sans-IO peers driven with hand-made datagrams, and the ``ppspp`` CLI against a
peer made of a UDP socket on 127.0.0.1 (no libswift needed: the live tests with
the real binary are in test_swift_libswift_interop.py).
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import threading
from pathlib import Path

from swift_support import make_tree

from swift.core import events as ev
from swift.core.content import Content, MemoryStorage
from swift.core.merkle import MerkleTree
from swift.core.peer import Peer, PeerConfig
from swift.wire import codec as C
from swift.wire.constants import ChunkAddressing, HashFunc, IntegrityMethod, MsgType

PPSPP = [sys.executable, "-m", "swift"]
S = ("127.0.0.1", 7000)
CTX1 = C.WireContext.make(ChunkAddressing.CHUNK32, HashFunc.SHA1)


def _leecher(data: bytes, **kw) -> tuple[Peer, MerkleTree]:
    cfg = PeerConfig(hash_func=HashFunc.SHA1, profile="auto", **kw)
    tree = make_tree(data, cfg)
    peer = Peer(Content(MerkleTree.for_root(tree.root_hash, HashFunc.SHA1, 1024, size=len(data)),
                        MemoryStorage()), cfg)
    return peer, tree


def _sent(peer: Peer, now: float) -> list:
    return [m for d, _ in peer.datagrams_to_send(now) for m in C.decode_datagram(d, CTX1).messages]


def _reply(ours: int, **opts) -> bytes:
    o = C.HandshakeOptions(version=1, min_version=1, integrity=IntegrityMethod.MERKLE,
                           hash_func=HashFunc.SHA1, addressing=ChunkAddressing.CHUNK32)
    o = C.HandshakeOptions(**{**{k: getattr(o, k) for k in o.__slots__}, **opts})
    return C.encode_datagram(CTX1, ours, [C.Handshake(0x1234, o)])


def test_refused_reply_names_what_and_why() -> None:
    peer, _ = _leecher(os.urandom(5000))
    ours = peer.connect(S, 0.0)
    peer.datagrams_to_send(0.0)
    peer.datagram_received(_reply(ours, integrity=IntegrityMethod.SIGN_ALL), S, 0.1)
    got = [e for e in iter(peer.next_event, None) if isinstance(e, ev.HandshakeRefused)]
    assert [e.addr for e in got] == [S]
    assert "integrity method 2, this swarm uses 1" in got[0].reason


def test_unparsable_reply_names_the_unknown_option() -> None:
    peer, _ = _leecher(os.urandom(5000))
    ours = peer.connect(S, 0.0)
    peer.datagrams_to_send(0.0)
    # version 1, then option 10 (unassigned): our decoder stops there
    peer.datagram_received(
        ours.to_bytes(4, "big") + bytes.fromhex("00000012340001") + b"\x0a\x00\xff", S, 0.1)
    got = [e.reason for e in iter(peer.next_event, None) if isinstance(e, ev.HandshakeRefused)]
    assert got and "unknown option 10" in got[0]


def _cancels_after_timeout(supported: set[int] | None) -> int:
    data = os.urandom(64 * 1024)
    peer, _ = _leecher(data)
    ours = peer.connect(S, 0.0)
    peer.datagrams_to_send(0.0)
    bitmap = None if supported is None else C.supported_bitmap(supported)
    hs = _reply(ours, chunk_size=1024, supported=bitmap)
    peer.datagram_received(hs + C.encode_message(CTX1, C.Have(0, 63)), S, 0.1)
    asked = [m for m in _sent(peer, 0.1) if m.type == MsgType.REQUEST]
    assert asked
    n = 0
    for i in range(1, 40):  # no DATA ever comes: the requests time out
        now = 0.1 + i * 0.25
        peer.handle_timer(now)
        n += sum(m.type == MsgType.CANCEL for m in _sent(peer, now))
    return n


def test_cancel_only_to_a_peer_that_takes_it() -> None:
    every = set(range(14))
    assert _cancels_after_timeout(every) > 0
    assert _cancels_after_timeout(None) > 0  # no option: it takes every message (7.10)
    assert _cancels_after_timeout(every - {MsgType.CANCEL}) == 0


def test_auto_answers_each_dialect_in_kind() -> None:
    """One swarm, two initiators: RFC 7574 (with Chunk Size) and libswift (without)."""
    data = os.urandom(5000)
    cfg = PeerConfig(hash_func=HashFunc.SHA1, profile="auto")
    seed = Peer(Content.seeded(make_tree(data, cfg), MemoryStorage(data)), cfg)
    base = {"version": 1, "min_version": 1, "swarm_id": seed.swarm_id, "integrity": 1,
            "hash_func": 0, "addressing": 2}
    rfc = C.encode_datagram(CTX1, 0, [C.Handshake(11, C.HandshakeOptions(**base, chunk_size=1024))])
    lib = C.encode_datagram(CTX1, 0, [C.Handshake(22, C.HandshakeOptions(**base))])
    seed.datagram_received(rfc, ("127.0.0.1", 1), 0.0)
    seed.datagram_received(lib, ("127.0.0.1", 2), 0.0)
    replies = {addr[1]: C.decode_datagram(d, CTX1).messages[0].options
               for d, addr in seed.datagrams_to_send(0.0)}
    assert replies[1].chunk_size == 1024
    assert replies[2].chunk_size is None and replies[2].supported is None


# -- the CLI -----------------------------------------------------------------------


class _Answerer(threading.Thread):
    """A UDP 'peer' on 127.0.0.1 answering every handshake with ``reply(their channel)``."""

    def __init__(self, reply) -> None:
        super().__init__(daemon=True)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.reply = reply
        self.stop = threading.Event()

    def run(self) -> None:
        for _ in range(3000):  # bounded: 10 minutes at most
            if self.stop.is_set():
                break
            try:
                d, addr = self.sock.recvfrom(2048)
            except TimeoutError:
                continue
            if self.reply is not None and d[:4] == bytes(4) and len(d) > 9 and d[4] == 0:
                self.sock.sendto(self.reply(int.from_bytes(d[5:9], "big")), addr)

    def __enter__(self) -> _Answerer:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.join(5)
        self.sock.close()


ROOT40 = "e3eb2f6f11d5a63feef47a775ba7c9ce89794d79"


def _download(tmp_path: Path, port: int, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(PPSPP + ["download", ROOT40, "--peer", f"127.0.0.1:{port}", "-o",
                                   str(tmp_path / "out.bin"), "-q", "--timeout", "4", *extra],
                          capture_output=True, text=True, timeout=120, check=False)


def test_hint_says_what_was_refused_not_nothing_from(tmp_path: Path) -> None:
    with _Answerer(lambda ch: _reply(ch, integrity=IntegrityMethod.SIGN_ALL)) as peer:
        r = _download(tmp_path, peer.port)
    assert r.returncode == 1
    assert "nothing from" not in r.stderr
    assert re.search(r"refused .*integrity method 2, this swarm uses 1", r.stderr), r.stderr
    assert "Traceback" not in r.stderr


def test_silent_peer_hint_then_exit_1_at_the_timeout(tmp_path: Path) -> None:
    with _Answerer(None) as peer:
        r = _download(tmp_path, peer.port)
    assert r.returncode == 1
    lines = r.stderr.splitlines()
    assert "nothing from" in lines[0] and "timeout after 4 s" in lines[-1], r.stderr
    assert not (tmp_path / "out.bin").exists() and not (tmp_path / "out.bin.part").exists()


def test_seed_without_flags_serves_a_sha1_swarm(tmp_path: Path) -> None:
    """``ppspp seed FILE`` prints the SHA-256 root on stdout and the SHA-1 root (the one a
    libswift leecher can take) on stderr; ``ppspp download`` of that 40-hex root, with no
    flags, gets the file."""
    data = os.urandom(300_000)
    src = tmp_path / "c.bin"
    src.write_bytes(data)
    err = tmp_path / "seed.err"
    with err.open("w") as fh:
        seed = subprocess.Popen(PPSPP + ["seed", str(src), "--host", "127.0.0.1", "--port", "0"],
                                stdout=subprocess.PIPE, stderr=fh, text=True)
    try:
        first = seed.stdout.readline().strip()
        assert re.fullmatch(r"[0-9a-f]{64}", first), first
        text = ""
        for _ in range(600):  # bounded wait for the SHA-1 line (after "seeding")
            text = err.read_text()
            if "SHA-1 swarm" in text:
                break
            threading.Event().wait(0.1)
        sha1 = re.search(r"as SHA-1 swarm ([0-9a-f]{40})", text).group(1)
        port = int(re.search(r"^seeding .* on [0-9.]+:(\d+)$", text, re.MULTILINE).group(1))
        out = tmp_path / "out.bin"
        r = subprocess.run(PPSPP + ["download", sha1, "--peer", f"127.0.0.1:{port}", "-o", str(out),
                                    "-q", "--timeout", "60"],
                           capture_output=True, text=True, timeout=120, check=False)
    finally:
        seed.terminate()
        seed.communicate(timeout=30)
    assert r.returncode == 0, r.stderr
    assert out.read_bytes() == data


def test_leecher_learns_the_peers_chunk_size_from_its_data() -> None:
    """A libswift swarm of 8 KiB chunks (``-z 8192``, no Chunk Size option on the wire) and
    a leecher left at 1 KiB: nothing verifies, and the leecher names the size it saw."""
    from swift_support import pump
    data = os.urandom(100_000)
    scfg = PeerConfig(hash_func=HashFunc.SHA1, chunk_size=8192, profile="libswift")
    tree = make_tree(data, scfg)
    seed = Peer(Content.seeded(tree, MemoryStorage(data)), scfg)
    lcfg = PeerConfig(hash_func=HashFunc.SHA1, profile="auto")
    leech = Peer(Content(MerkleTree.for_root(tree.root_hash, HashFunc.SHA1, 1024), MemoryStorage()),
                 lcfg)
    leech.connect("S", 0.0)
    pump({"S": seed, "L": leech}, steps=5000, until=lambda: leech.chunk_size_seen is not None)
    assert leech.chunk_size_seen == 8192
    assert leech.stats["verified"] == 0


def test_leecher_learns_the_chunk_size_an_rfc_reply_states() -> None:
    peer, _ = _leecher(os.urandom(5000))
    ours = peer.connect(S, 0.0)
    peer.datagrams_to_send(0.0)
    peer.datagram_received(_reply(ours, chunk_size=4096), S, 0.1)
    assert peer.chunk_size_seen == 4096


def test_download_without_chunk_size_restarts_with_the_peers(tmp_path: Path) -> None:
    """``ppspp download ROOT40`` with no flags from a seeder of 8 KiB chunks that states no
    chunk size (the libswift dialect, as ``swift -z 8192``): one restart, then verified."""
    data = os.urandom(200_000)
    src = tmp_path / "c.bin"
    src.write_bytes(data)
    err = tmp_path / "seed.err"
    with err.open("w") as fh:
        seed = subprocess.Popen(PPSPP + ["seed", str(src), "--host", "127.0.0.1", "--port", "0",
                                         "--chunk-size", "8192", "--profile", "libswift"],
                                stdout=subprocess.PIPE, stderr=fh, text=True)
    try:
        root = seed.stdout.readline().strip()
        assert re.fullmatch(r"[0-9a-f]{40}", root), root
        text = ""
        for _ in range(600):
            text = err.read_text()
            if "seeding" in text:
                break
            threading.Event().wait(0.1)
        port = int(re.search(r"^seeding .* on [0-9.]+:(\d+)$", text, re.MULTILINE).group(1))
        out = tmp_path / "out.bin"
        r = subprocess.run(PPSPP + ["download", root, "--peer", f"127.0.0.1:{port}", "-o", str(out),
                                    "-q", "--timeout", "60"],
                           capture_output=True, text=True, timeout=120, check=False)
    finally:
        seed.terminate()
        seed.communicate(timeout=30)
    assert r.returncode == 0, r.stderr
    assert "starting again with --chunk-size 8192" in r.stderr
    assert out.read_bytes() == data


def test_default_seeder_still_counts_handshakes_for_no_swarm_of_its(tmp_path: Path) -> None:
    """``ppspp seed FILE`` serves two swarms (SHA-256 and SHA-1): a handshake for neither
    (and a datagram for no channel) is counted as refused / unknown_channel in the final
    counters, as with one swarm, not dropped uncounted."""
    import json
    src = tmp_path / "c.bin"
    src.write_bytes(os.urandom(20_000))
    seed = subprocess.Popen(PPSPP + ["seed", str(src), "--host", "127.0.0.1", "--port", "0",
                                     "--duration", "4"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        seed.stdout.readline()
        port = int(seed.stderr.readline().rsplit(":", 1)[1])
        opts = C.HandshakeOptions(version=1, min_version=1, swarm_id=bytes(20), integrity=1,
                                  hash_func=0, addressing=2)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.sendto(C.encode_datagram(CTX1, 0, [C.Handshake(77, opts)]), ("127.0.0.1", port))
            s.sendto(bytes.fromhex("12345678") + b"\x0a", ("127.0.0.1", port))
        out, _ = seed.communicate(timeout=60)
    finally:
        if seed.poll() is None:
            seed.kill()
            seed.communicate()
    stats = json.loads(out.strip().splitlines()[-1])["stats"]
    assert stats["refused"] >= 1 and stats["unknown_channel"] >= 1, stats


def test_auto_tries_the_libswift_dialect_first_for_a_sha1_swarm() -> None:
    """A SHA-1 swarm (a 40-hex root: in practice libswift's) opens in libswift's
    dialect, without option 9; a peer that drops it unanswered gets the RFC 7574
    handshake after 0.5 s (virtual time), not after the 2-s retransmission backoff."""
    peer, _ = _leecher(os.urandom(5000))
    peer.connect(S, 0.0)
    first = [m for m in _sent(peer, 0.0) if m.type == MsgType.HANDSHAKE]
    assert first and first[0].options.chunk_size is None
    peer.handle_timer(0.3)
    assert not [m for m in _sent(peer, 0.3) if m.type == MsgType.HANDSHAKE]
    peer.handle_timer(0.55)
    second = [m for m in _sent(peer, 0.55) if m.type == MsgType.HANDSHAKE]
    assert second and second[0].options.chunk_size == 1024


def test_auto_opens_in_rfc_7574_for_a_sha256_swarm() -> None:
    """Any other swarm opens in RFC 7574 (with option 9), libswift's dialect second."""
    data = os.urandom(5000)
    cfg = PeerConfig(hash_func=HashFunc.SHA256, profile="auto")
    tree = make_tree(data, cfg)
    peer = Peer(Content(MerkleTree.for_root(tree.root_hash, HashFunc.SHA256, 1024,
                                            size=len(data)), MemoryStorage()), cfg)
    ctx = C.WireContext.make(ChunkAddressing.CHUNK32, HashFunc.SHA256)
    peer.connect(S, 0.0)
    sent = [m for d, _ in peer.datagrams_to_send(0.0)
            for m in C.decode_datagram(d, ctx).messages if m.type == MsgType.HANDSHAKE]
    assert sent and sent[0].options.chunk_size == 1024
    peer.handle_timer(0.55)
    again = [m for d, _ in peer.datagrams_to_send(0.55)
             for m in C.decode_datagram(d, ctx).messages if m.type == MsgType.HANDSHAKE]
    assert again and again[0].options.chunk_size is None
