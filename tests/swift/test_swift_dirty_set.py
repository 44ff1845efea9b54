"""The flush's dirty set (swift/core/channel.py ``DirtySet``, docs/sim.md "Hot spots" 4).

``Peer.datagrams_to_send`` visits only the channels an event marked, the ones
whose own deadline passed, or every channel when something may concern them
all.  These tests drive real ``Peer`` objects with the bytes they send each
other (in memory, on a fake clock: the cores are sans-IO), and real swarms in
the packet-level simulator: a channel that became ready is served on the next
flush, a deadline with no event before it still fires, and whole swarms send
the same datagrams, byte for byte, with the dirty set and without it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from swift import sim as S
from swift.core.config import PeerConfig
from swift.core.content import Content, MemoryStorage
from swift.core.peer import Peer
from swift.wire import codec as C
from swift.wire.constants import MsgType
from tests.swift.swarm_digest import digest, lossy_flash, vod
from tests.swift.swift_support import make_tree

CS = 1024
N = 64
MISSING = 5


def _partial(data: bytes, cfg: PeerConfig) -> Peer:
    """A peer that holds every chunk but ``MISSING`` (its tree is whole: the size is known)."""
    content = Content(make_tree(data, cfg), MemoryStorage(data))
    content.have.set_range(0, MISSING)
    content.have.set_range(MISSING + 1, N)
    return Peer(content, cfg)


def _exchange(nodes: dict[Any, Peer], now: float) -> int:
    """One round: every peer's flush delivered to its destination; datagrams moved."""
    moved = 0
    for addr, p in nodes.items():
        for d, dst in p.datagrams_to_send(now):
            if dst in nodes:
                nodes[dst].datagram_received(d, addr, now)
                moved += 1
    return moved


def _requests(peer: Peer, sent: list[tuple[bytes, Any]], dst: Any) -> list[tuple[int, int]]:
    """The chunk ranges ``peer`` REQUESTs of ``dst`` in ``sent``."""
    out = []
    for d, a in sent:
        if a == dst:
            _, msgs, _ = C.decode_raw(d, peer.ctx)
            out += [(m[1], m[2] + 1) for m in msgs if m[0] == MsgType.REQUEST]
    return out


def _counting(peer: Peer) -> list[int]:
    """Count the channels ``peer``'s flushes visit (the list's one element)."""
    visits = [0]
    inner = peer._flush_channel

    def counted(ch: Any, now: float, out: list[tuple[bytes, Any]]) -> None:
        visits[0] += 1
        inner(ch, now, out)

    peer._flush_channel = counted  # type: ignore[method-assign]  # count calls
    return visits


def test_a_channel_that_becomes_ready_is_served_on_the_next_flush() -> None:
    """A leecher lacks one chunk that none of its three peers has: all its
    channels are idle and its flushes visit none of them.  Then one peer gets
    the chunk and sends its HAVE: the leecher's very next flush visits that
    channel only and REQUESTs the chunk from it.  (Without the mark that a
    datagram sets on its channel, the flush visits nothing and asks nobody.)"""
    cfg = PeerConfig(chunk_size=CS, seed=7)
    data = bytes(range(256)) * (N * CS // 256)
    me = ("10.0.0.1", 6778)
    others = [("10.0.0.2", 6778), ("10.0.0.3", 6778), ("10.0.0.4", 6778)]
    leecher = _partial(data, cfg)
    nodes = {me: leecher} | {a: _partial(data, cfg) for a in others}
    now = 0.0
    for a in others:
        leecher.connect(a, now)
    for _ in range(20):  # handshakes, HAVEs: until nothing moves
        now += 0.01
        if not _exchange(nodes, now) and len(leecher.established) == 3:
            break
    assert len(leecher.established) == 3 and not leecher.download.inflight.count()
    visits = _counting(leecher)
    assert leecher.datagrams_to_send(now) == [] and visits[0] == 0  # all idle: none visited

    ready = nodes[others[1]]  # it gets the chunk from elsewhere and announces it
    ready.content.store_chunk(MISSING, data[MISSING * CS:(MISSING + 1) * CS])
    ready.announcer.log([MISSING])
    have = ready.datagrams_to_send(now)
    assert [a for _, a in have] == [me]  # its HAVE
    for d, _ in have:
        leecher.datagram_received(d, others[1], now)
    sent = leecher.datagrams_to_send(now)
    assert visits[0] == 1  # the marked channel only
    assert _requests(leecher, sent, others[1]) == [(MISSING, MISSING + 1)]
    assert not _requests(leecher, sent, others[0]) and not _requests(leecher, sent, others[2])


def test_deadlines_fire_without_an_event_before_them() -> None:
    """No datagram and no timer between two flushes: an unanswered handshake
    is still sent again after its back-off (2 s), and PEX_REQ again after 5 s."""
    cfg = PeerConfig(chunk_size=CS, seed=3, pex_connect=True)
    data = bytes(N * CS)
    tree = make_tree(data, cfg)
    lone = Peer(Content(tree, MemoryStorage()), cfg)
    lone.connect(("10.0.0.9", 6778), 0.0)  # nobody there
    assert len(lone.datagrams_to_send(0.0)) == 1
    assert lone.datagrams_to_send(1.9) == []
    assert len(lone.datagrams_to_send(2.0)) == 1  # the back-off passed: sent again

    a, b = ("10.0.0.1", 6778), ("10.0.0.2", 6778)
    # both lack the same chunk: nothing to ask, nothing in flight, the size known
    nodes = {a: _partial(data, cfg), b: _partial(data, dataclasses.replace(cfg, seed=4))}
    leecher = nodes[a]
    leecher.connect(b, 0.0)
    now = 0.0
    while now < 0.1:
        now += 0.01
        _exchange(nodes, now)
    assert len(leecher.established) == 1 and not leecher.download.complete
    leecher.handle_timer(now)  # (every channel visited once more)
    leecher.datagrams_to_send(now)
    pex_reqs = []
    for t in (2.0, 4.9, 5.0, 5.1):
        sent = leecher.datagrams_to_send(now + t)  # the seeder stays silent meanwhile
        msgs = [m for d, _ in sent for m in C.decode_raw(d, leecher.ctx)[1]]
        pex_reqs.append(sum(m[0] == MsgType.PEX_REQ for m in msgs))
    assert pex_reqs == [0, 0, 1, 0]  # PEX_REQ 5 s after the one sent when the channel opened


def _digest_run(run: Any, dirty: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str, int]:
    """(hash of every datagram's bytes and endpoints, hash of the results, channel visits)."""
    return digest(run, monkeypatch, (Peer, "DIRTY_SET", dirty), (Peer, "_flush_channel"))


@pytest.mark.parametrize("name,run", [
    ("flash crowd", lambda: S.run(S.flash_crowd(10, 48 * CS, seed=1), seed=1)),
    ("uniform arrivals, 3 % loss", lambda: lossy_flash(8, 48 * CS, 0.03, 5, "uniform")),
    ("VoD, vod picker", lambda: vod("vod", 6, 3.0, 2)),
    ("VoD, std-vod picker", lambda: vod("std-vod", 6, 3.0, 2)),
])
def test_swarms_send_the_same_bytes_with_and_without_the_dirty_set(
        name: str, run: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Simulated swarms (flash crowd; uniform arrivals over lossy uplinks:
    request timeouts and the end game; VoD with deadlines and the fast set)
    send the same datagrams, byte for byte and in the same order, and end
    with the same results, whether flushes visit only marked channels or
    every channel; and the dirty set visited fewer channels."""
    bytes_on, results_on, visits_on = _digest_run(run, True, monkeypatch)
    bytes_off, results_off, visits_off = _digest_run(run, False, monkeypatch)
    assert (bytes_on, results_on) == (bytes_off, results_off), name
    assert visits_on < 0.8 * visits_off, (visits_on, visits_off)
