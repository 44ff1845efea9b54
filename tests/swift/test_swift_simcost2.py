"""A simulated peer's cost per datagram, the same bytes, second step
(docs/sim.md, "The held-chunk mark and the end game's walk (session 16)"):
news of a chunk we hold.

An ACK or HAVE that tells the peer's binmap a chunk it had not announced
gives its channel nothing to ask when we hold that chunk, so it marks
nothing (a seeder holds every chunk: no ACK it gets marks its channel).
The reference is ``Peer.DIRTY_SET = False``, which visits every channel on
every flush.  Real ``Peer`` objects exchange the bytes they send (sans-IO,
in memory).
"""

from __future__ import annotations

import hashlib

import pytest

from swift.core.config import PeerConfig
from swift.core.content import Content, MemoryStorage
from swift.core.merkle import MerkleTree
from swift.core.peer import Peer
from swift.wire import codec as C
from swift.wire.constants import MsgType
from tests.swift.test_swift_dirty_set import CS, MISSING, N, _counting
from tests.swift.test_swift_simcost import ME, OTHERS, _dgram, _idle_swarm


def test_news_of_a_held_chunk_visits_no_channel() -> None:
    """A peer announces a chunk it had not announced before: when the
    leecher holds it, the next flush visits no channel and sends nothing
    (before session 16 it visited the channel); when the leecher lacks it,
    that channel is visited and the chunk REQUESTed."""
    data, nodes, now = _idle_swarm()
    leecher, peer = nodes[ME], nodes[OTHERS[2]]
    last = N - 1  # every node lacks it and MISSING
    leecher.content.store_chunk(last, data[last * CS:(last + 1) * CS])
    peer.content.store_chunk(last, data[last * CS:(last + 1) * CS])
    ch = next(c for c in leecher.channels.values() if c.addr == OTHERS[2])
    assert not ch.remote.have.has(last)
    visits = _counting(leecher)
    held = [C.Have(s, t) for s, t in peer._specs(last, last + 1)]
    leecher.datagram_received(_dgram(peer, ME, held), OTHERS[2], now)
    assert ch.remote.have.has(last)  # news: the peer's binmap learnt it
    assert leecher.datagrams_to_send(now) == [] and visits[0] == 0

    peer.content.store_chunk(MISSING, data[MISSING * CS:(MISSING + 1) * CS])
    lacked = [C.Ack(s, t, 5) for s, t in peer._specs(MISSING, MISSING + 1)]
    leecher.datagram_received(_dgram(peer, ME, lacked), OTHERS[2], now)
    sent = leecher.datagrams_to_send(now)
    assert visits[0] == 1 and [a for _, a in sent] == [OTHERS[2]]
    msgs = C.decode_raw(sent[0][0], leecher.ctx)[1]
    assert [(m[0], m[1]) for m in msgs] == [(MsgType.REQUEST, MISSING)]


def _pair_digest(dirty: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[str, int, int]:
    """A seeder and a leecher in memory (64 chunks, 1 KiB): (hash of every
    datagram, in order; the seeder's channel visits; the steps)."""
    monkeypatch.setattr(Peer, "DIRTY_SET", dirty)
    data = hashlib.shake_256(b"simcost2").digest(64 * CS)
    tree = MerkleTree.build([data[i:i + CS] for i in range(0, len(data), CS)], chunk_size=CS)
    seeder = Peer(Content.seeded(tree, MemoryStorage(data)), PeerConfig(chunk_size=CS, seed=1))
    leech = Peer(Content(MerkleTree.for_root(tree.root_hash, chunk_size=CS), MemoryStorage()),
                 PeerConfig(chunk_size=CS, seed=2))
    sa, la = ("10.0.0.1", 1), ("10.0.0.2", 2)
    visits = _counting(seeder)
    now = 1000.0
    leech.connect(sa, now)
    h = hashlib.sha256()
    step = 0
    for step in range(2000):
        if leech.content.complete:
            break
        now += 0.0005
        for d, _ in seeder.datagrams_to_send(now, budget=8):
            h.update(d)
            leech.datagram_received(d, sa, now)
        for d, _ in leech.datagrams_to_send(now, budget=8):
            h.update(b"<" + d)
            seeder.datagram_received(d, la, now)
        if step % 100 == 0:
            seeder.handle_timer(now)
            leech.handle_timer(now)
    assert leech.content.complete and bytes(leech.content.storage.buf[:len(data)]) == data
    monkeypatch.undo()
    return h.hexdigest(), visits[0], step


def test_a_seeders_acks_mark_nothing_same_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """One seeder, one leecher: every ACK the seeder gets is news of a chunk
    it holds.  The same datagrams as visiting every channel on every flush,
    and the seeder's channel is visited on few of its flushes (before
    session 16, after every ACK)."""
    on = _pair_digest(True, monkeypatch)
    off = _pair_digest(False, monkeypatch)
    assert on[0] == off[0] and on[2] == off[2]
    assert on[1] * 4 < off[1], (on[1], off[1])
