"""Fewer channel visits per datagram, the same bytes (docs/sim.md, "Fewer
flushes per datagram (session 15)").

A flush visits a channel only when something may have given it something to
say.  Since session 15 three events no longer do it on their own: a datagram
of ACKs, HAVEs, REQUESTs and CANCELs that tells nothing new (a REQUEST only
queues DATA, which every flush sends), the one DATA that verifies its chunk
(the chunk leaves flight into ``have``: nothing freed for the pickers; the
end game's CANCELs elsewhere mark their channels), and a channel's own
datagram (only unfinished HAVEs, a handshake still wanted or requests keep
it marked).  These tests drive real ``Peer``
objects with the bytes they send each other (sans-IO, in memory), and whole
simulated swarms against the reference that visits every channel on every
flush (``Peer.DIRTY_SET = False``): the same datagrams, byte for byte.
"""

from __future__ import annotations

from typing import Any

import pytest

from swift.core.config import PeerConfig
from swift.core.content import Content, MemoryStorage
from swift.core.peer import Peer
from swift.wire import codec as C
from swift.wire.constants import MsgType
from tests.swift.swarm_digest import lossy_flash, vod
from tests.swift.swift_support import make_tree
from tests.swift.test_swift_dirty_set import CS, MISSING, N, _counting, _digest_run, _exchange

ME = ("10.0.0.1", 6778)
OTHERS = [("10.0.0.2", 6778), ("10.0.0.3", 6778), ("10.0.0.4", 6778)]


def _partial(data: bytes, cfg: PeerConfig) -> Peer:
    """A peer that holds every chunk but ``MISSING`` and the last one."""
    content = Content(make_tree(data, cfg), MemoryStorage(data))
    content.have.set_range(0, MISSING)
    content.have.set_range(MISSING + 1, N - 1)
    return Peer(content, cfg)


def _idle_swarm() -> tuple[bytes, dict[Any, Peer], float]:
    """A leecher and three peers, every one lacking chunk ``MISSING`` and the
    last chunk: established, every flush drained, nothing in flight.  A HAVE
    alone waits 5 s after the channel's last one."""
    cfg = PeerConfig(chunk_size=CS, seed=7, have_interval=5.0)
    data = bytes(range(256)) * (N * CS // 256)
    nodes = {a: _partial(data, cfg) for a in [ME, *OTHERS]}
    now = 0.0
    for a in OTHERS:
        nodes[ME].connect(a, now)
    for _ in range(40):  # handshakes, HAVEs, the HAVE interval: until nothing moves
        now += 0.03
        if not _exchange(nodes, now) and len(nodes[ME].established) == 3:
            break
    leecher = nodes[ME]
    assert len(leecher.established) == 3 and not leecher.download.inflight.count()
    assert leecher.datagrams_to_send(now) == []
    return data, nodes, now


def _dgram(sender: Peer, to: Any, msgs: list[Any]) -> bytes:
    """One datagram of ``msgs`` on ``sender``'s channel to ``to``."""
    ch = next(c for c in sender.channels.values() if c.addr == to)
    (d,) = sender._pack(ch, ch.remote_id, msgs)
    return d


def test_old_news_and_requests_visit_no_channel() -> None:
    """An ACK or HAVE of chunks the peer announced before gives its channel
    nothing to ask, and a REQUEST only queues DATA (for upload_data, which
    every flush runs): the next flush visits no channel (before session 15,
    every datagram marked its channel).  A HAVE of the chunk the leecher
    lacks still marks the channel, and that flush REQUESTs it."""
    _, nodes, now = _idle_swarm()
    leecher, peer = nodes[ME], nodes[OTHERS[0]]
    visits = _counting(leecher)
    old = [C.Have(s, t) for s, t in peer._specs(0, 1)]
    old += [C.Ack(s, t, 5) for s, t in peer._specs(1, 2)]
    leecher.datagram_received(_dgram(peer, ME, old), OTHERS[0], now)
    assert leecher.datagrams_to_send(now) == [] and visits[0] == 0
    ask = [C.Request(s, t) for s, t in peer._specs(2, 3)]
    leecher.datagram_received(_dgram(peer, ME, ask), OTHERS[0], now)
    assert leecher.datagrams_to_send(now) == [] and visits[0] == 0  # (the peer holds chunk 2)

    peer.content.store_chunk(MISSING, bytes(CS))  # (its bytes do not matter here)
    lacked = [C.Have(s, t) for s, t in peer._specs(MISSING, MISSING + 1)]
    leecher.datagram_received(_dgram(peer, ME, lacked), OTHERS[0], now)
    sent = leecher.datagrams_to_send(now)
    assert visits[0] == 1 and [a for _, a in sent] == [OTHERS[0]]
    msgs = C.decode_raw(sent[0][0], leecher.ctx)[1]
    assert [m[0] for m in msgs] == [MsgType.REQUEST]


def test_a_verified_chunk_frees_nothing_and_its_ack_goes_once() -> None:
    """The leecher asks one peer for a chunk it lacks and gets it.  Its DATA
    takes the chunk out of flight into ``have``: not a chunk freed for the
    pickers, so the next flush visits the DATA's channel only (before
    session 15 it visited every channel; the other two have no HAVE due for
    5 s), and sends the ACK.  A channel that sent an ACK (and the HAVE riding
    with it) is not visited again by the flush after."""
    data, nodes, now = _idle_swarm()
    leecher, peer = nodes[ME], nodes[OTHERS[1]]
    peer.content.store_chunk(MISSING, data[MISSING * CS:(MISSING + 1) * CS])
    have = [C.Have(s, t) for s, t in peer._specs(MISSING, MISSING + 1)]
    leecher.datagram_received(_dgram(peer, ME, have), OTHERS[1], now)
    for d, _ in leecher.datagrams_to_send(now):  # the REQUEST
        peer.datagram_received(d, ME, now)
    now += 0.01
    data_dgrams = peer.datagrams_to_send(now)
    assert len(data_dgrams) == 1 and leecher.download.inflight.has(MISSING)
    leecher.download.freed()  # (the REQUEST's own mark in flight, read)
    visits = _counting(leecher)
    leecher.datagram_received(data_dgrams[0][0], OTHERS[1], now)
    assert leecher.content.have.has(MISSING) and not leecher.download.inflight.has(MISSING)
    assert not leecher.download.freed()
    sent = leecher.datagrams_to_send(now)
    assert visits[0] == 1
    assert [a for _, a in sent] == [OTHERS[1]]
    kinds = [m[0] for m in C.decode_raw(sent[0][0], leecher.ctx)[1]]
    assert MsgType.ACK in kinds
    assert leecher.datagrams_to_send(now) == [] and visits[0] == 1  # not visited again


@pytest.mark.parametrize("name,run", [
    ("VoD, vod picker, eq. 3", lambda: vod("vod", 4, 6.0, 0)),
    ("VoD, linear picker", lambda: vod("linear", 5, 4.0, 1)),
    ("flash crowd, 5 % loss: end game", lambda: lossy_flash(12, 64 * CS, 0.05, 3)),
])
def test_more_swarms_send_the_same_bytes_with_fewer_visits(
        name: str, run: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Swarms beside test_swift_dirty_set's four (the paper's vod picker with
    eq. 3's limit, a linear VoD swarm, a lossy flash crowd with the end
    game's copies and CANCELs) send the same datagrams, byte for byte and in
    the same order, and end with the same results, whether flushes visit
    only marked channels or every channel; and the marked ones are fewer
    than a third of every channel."""
    bytes_on, results_on, visits_on = _digest_run(run, True, monkeypatch)
    bytes_off, results_off, visits_off = _digest_run(run, False, monkeypatch)
    assert (bytes_on, results_on) == (bytes_off, results_off)
    assert visits_on * 3 < visits_off
