"""The leecher's receive path with fewer frames per DATA (docs/swift-perf.md,
"Session 17: the leecher's receive path"): ``Peer._dispatch`` keeps a chunk32
INTEGRITY's hash without ``ChunkSpecs.to_chunks`` and ``VerifyState.add_hash``,
and ``Verifier.on_data`` calls ``MerkleTree.verify`` directly (no
``Content.verify`` frame, no ``dict(hash_order)``) once the size is known.

Both must keep exactly what the methods keep and send exactly the same
datagrams: the inline INTEGRITY against ``add_hash`` for random chunk ranges
(aligned, unaligned, empty, reversed, past 2**32, over the cap), and whole
transfers and simulated lossy swarms with the two paths switched off (the
``_chunk32`` flag cleared, which sends every spec through ``to_chunks`` and
``add_hash``; ``Verifier.TREE_DIRECT``), every datagram hashed."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st
from swift_support import take_over_channel

from swift.core.channel import REQUEST_CHANGES, VerifyState
from swift.core.content import Content, MemoryStorage
from swift.core.merkle import MerkleTree
from swift.core.peer import Peer, PeerConfig
from swift.core.receive import Verifier
from swift.wire import codec as C
from swift.wire.constants import HashFunc, MsgType
from tests.swift.swarm_digest import CS, digest, lossy_flash

SEED, LEECH = ("10.0.0.1", 20000), ("10.0.0.2", 20001)
N = 45
DATA = bytes(range(256)) * (N * CS // 256) + b"tail" * 50  # the last chunk short


def _leecher(cfg: PeerConfig) -> Peer:
    """A leecher with an established channel to a seeder (its channel is the test's)."""
    tree = MerkleTree.build([DATA[i:i + CS] for i in range(0, len(DATA), CS)],
                            cfg.hash_func, chunk_size=CS)
    leech = Peer(Content(MerkleTree.for_root(tree.root_hash, cfg.hash_func, chunk_size=CS),
                         MemoryStorage()), cfg)
    seed = Peer(Content.seeded(tree, MemoryStorage(DATA)), cfg)
    take_over_channel(leech, seed, 1000.0, LEECH, SEED)
    return leech


spans = st.lists(st.tuples(st.one_of(st.integers(0, 70), st.integers(0, 1 << 40)),
                           st.integers(-3, 40)), max_size=30)


@settings(max_examples=200, deadline=None)
@given(seq=spans, cap=st.integers(1, 12))
def test_integrity_inline_keeps_what_add_hash_keeps(seq: list[tuple[int, int]], cap: int) -> None:
    p = _leecher(PeerConfig(chunk_size=CS, seed=3))
    assert p._chunk32
    ch = next(iter(p.channels.values()))
    ch.verify.clear()
    ref = VerifyState()
    # the cap reached within a test (both read the class's)
    VerifyState.MAX_HASHES, old = cap, VerifyState.MAX_HASHES
    try:
        for k, (s, d) in enumerate(seq):
            e = max(0, s + d)  # decoded specs are unsigned: e < s is a reversed range
            h = hashlib.sha256(b"%d" % k).digest()
            p._dispatch(ch, [(int(MsgType.INTEGRITY), s, e, h, None)], 1000.0)
            ref.add_hash(*p.chunk_specs.to_chunks(s, e), h)
            assert ch.verify.hashes == ref.hashes
            assert ch.verify.hash_order == ref.hash_order
    finally:
        VerifyState.MAX_HASHES = old


def _no_inline_specs(init: Any) -> Any:
    def wrapped(self: Peer, *a: Any, **k: Any) -> None:
        init(self, *a, **k)
        self._chunk32 = False  # every spec through to_chunks, INTEGRITY through add_hash
    return wrapped


def _pair_digest(cfg: PeerConfig, loss_every: int) -> tuple[str, tuple[Any, ...]]:
    """One seeder -> one leecher in one process, deterministic; every
    ``loss_every``-th DATA datagram dropped (0: none).  The hash of every
    datagram both ways and the leecher's result."""
    tree = MerkleTree.build([DATA[i:i + CS] for i in range(0, len(DATA), CS)],
                            cfg.hash_func, chunk_size=CS)
    s = Peer(Content.seeded(tree, MemoryStorage(DATA)), cfg)
    leech = Peer(Content(MerkleTree.for_root(tree.root_hash, cfg.hash_func, chunk_size=CS),
                         MemoryStorage()), cfg)
    h = hashlib.sha256()
    now = 1000.0
    leech.connect(SEED, now)
    n = 0
    for step in range(3000):
        if leech.content.complete:
            break
        now += 0.0005
        for d, _ in s.datagrams_to_send(now, budget=8):
            h.update(b">%d:" % len(d) + d)
            n += 1
            if not (loss_every and n % loss_every == 0):
                leech.datagram_received(d, SEED, now)
        for d, _ in leech.datagrams_to_send(now, budget=8):
            h.update(b"<%d:" % len(d) + d)
            s.datagram_received(d, LEECH, now)
        while leech.next_event() is not None:
            pass
        if step % 20 == 0:
            s.handle_timer(now)
            leech.handle_timer(now)
    got = leech.content
    assert got.complete and isinstance(got.storage, MemoryStorage)
    assert bytes(got.storage.buf[:len(DATA)]) == DATA
    return h.hexdigest(), tuple(sorted(leech.stats.items()))


@pytest.mark.parametrize("cfg", [PeerConfig(chunk_size=CS, seed=5),
                                 PeerConfig.libswift(chunk_size=CS, seed=6),
                                 PeerConfig(chunk_size=CS, seed=7, hash_func=HashFunc.SHA1)],
                         ids=["default", "libswift", "sha1"])
@pytest.mark.parametrize("loss_every", [0, 7])
def test_transfer_sends_the_same_datagrams(cfg: PeerConfig, loss_every: int,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    new = _pair_digest(cfg, loss_every)
    monkeypatch.setattr(Verifier, "TREE_DIRECT", False)
    monkeypatch.setattr(Peer, "__init__", _no_inline_specs(Peer.__init__))
    ref = _pair_digest(cfg, loss_every)
    monkeypatch.undo()
    assert new == ref
    stats = dict(new[1])
    if loss_every:  # uncles lost with dropped DATA: held chunks, late DATA, duplicates
        assert stats["unverifiable"] and stats["held_verified"] and stats["late"] and stats["dup"]


@pytest.mark.parametrize("switch", ["tree", "specs"])
def test_lossy_swarm_the_same(switch: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A simulated flash crowd over lossy uplinks (held chunks, late DATA,
    request timeouts, the end game): the same datagrams with either path off."""
    run = lambda: lossy_flash(6, 48 * CS, 0.1, 4)  # noqa: E731
    counted = (MerkleTree, "verify")
    on = digest(run, monkeypatch, (Verifier, "TREE_DIRECT", True), counted)
    off_switch: tuple[Any, str, Any] = (
        (Verifier, "TREE_DIRECT", False) if switch == "tree"
        else (Peer, "__init__", _no_inline_specs(Peer.__init__)))
    off = digest(run, monkeypatch, off_switch, counted)
    assert on == off
    assert on[2] >= 6 * 48  # every leecher verified its chunks through the tree


def _wire(p: Peer, msgs: list[Any]) -> Any:
    """``_pack``'s datagrams, or the type of what it raised."""
    try:
        return p._pack(next(iter(p.channels.values())), 0x1234, msgs)
    except Exception as exc:  # noqa: BLE001  (the reference's error is the answer)
        return type(exc)


u = st.one_of(st.integers(0, 300), st.integers(0, (1 << 32) + 5), st.integers(-2, 0),
              st.just((1 << 64) + 1))
msg = st.one_of(st.builds(C.Ack, u, u, st.one_of(u, st.integers(0, (1 << 64) - 1))),
                st.builds(C.Have, u, u), st.builds(C.Request, u, u), st.builds(C.Cancel, u, u),
                st.builds(C.Integrity, u, u, st.just(bytes(32))), st.builds(C.Choke))


@settings(max_examples=300, deadline=None)
@given(msgs=st.lists(msg, max_size=200))
def test_pack_writes_what_encode_message_writes(msgs: list[Any]) -> None:
    """chunk32 ACK/HAVE/REQUEST/CANCEL packed at once: the same datagrams
    (split at the same places) or the same error as through encode_message."""
    p = _leecher(PeerConfig(chunk_size=CS, seed=3))
    new = _wire(p, msgs)
    p._chunk32 = False
    assert new == _wire(p, msgs)


@settings(max_examples=300, deadline=None)
@given(before=st.lists(st.integers(0, 40), max_size=30), picks=st.lists(st.integers(0, 40),
                                                                         max_size=30),
       drops=st.lists(st.integers(0, 40), max_size=10))
def test_ask_all_is_ask_in_a_loop(before: list[int], picks: list[int], drops: list[int]) -> None:
    """``DownloadSide.ask_all`` (request_msgs' one call per flush) leaves what
    ``ask`` per chunk leaves: the requests in the same dict order with the
    same times and sequence numbers, the same change count; True exactly
    when a chunk was asked already (before, or twice in ``picks``)."""
    sides = []
    for _ in range(2):
        p = _leecher(PeerConfig(chunk_size=CS, seed=3))
        down = next(iter(p.channels.values())).down
        down.clear()
        for k, c in enumerate(before):
            down.ask(c, 5.0 + k)
        for c in drops:
            if c in down.requests:
                down.drop(c)
        sides.append(down)
    a, b = sides
    n0 = REQUEST_CHANGES.n
    again = a.ask_all(picks, 9.0)
    n1 = REQUEST_CHANGES.n
    ref = False
    for c in picks:
        ref = ref or c in b.requests
        b.ask(c, 9.0)
    assert again == ref
    assert n1 - n0 == REQUEST_CHANGES.n - n1
    assert list(a.requests.items()) == list(b.requests.items())
    assert list(a.req_seq.items()) == list(b.req_seq.items())
    assert a.next_seq == b.next_seq
