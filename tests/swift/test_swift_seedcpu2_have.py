"""A seeder's HAVE handling in ``Peer._dispatch`` (issue 15): the single-chunk
HAVE (and ACK) of static content (libswift's ``HAVE i``) sets the peer's binmap
inline instead of through :meth:`RemoteHave.add`, and the implicit CANCEL
calls :meth:`RangeQueue.remove` only when something is queued in the
HAVE's range.  Both must leave exactly the state the methods leave:
checked against a second seeder driven through those methods, for random
sequences of REQUESTs, HAVEs and ACKs (one chunk, runs, beyond the content's
end, repeats)."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st
from swift_support import take_over_channel

from swift.core.channel import Channel
from swift.core.content import Content, MemoryStorage
from swift.core.merkle import MerkleTree
from swift.core.peer import Peer, PeerConfig
from swift.wire.constants import HashFunc, MsgType

SEED, LEECH = ("10.0.0.1", 20000), ("10.0.0.2", 20001)
CS = 1024
N = 37  # chunks: not a power of two, so HAVEs past the end get clamped
DATA = bytes(range(256)) * (N * CS // 256) + b"x" * 100  # N + 1 chunks, the last short


def _pair(seeding: bool = True) -> tuple[Peer, Channel]:
    """A peer (a seeder, or a leecher with nothing yet: then it counts who has
    what in its availability) and its channel to a leecher the test plays."""
    tree = MerkleTree.build([DATA[i:i + CS] for i in range(0, len(DATA), CS)],
                            HashFunc.SHA1, chunk_size=CS)
    content = (Content.seeded(tree, MemoryStorage(DATA)) if seeding else
               Content(MerkleTree.for_root(tree.root_hash, HashFunc.SHA1, chunk_size=CS),
                       MemoryStorage()))
    s = Peer(content, PeerConfig.libswift(chunk_size=CS, seed=1))
    leech = Peer(Content(MerkleTree.for_root(tree.root_hash, HashFunc.SHA1, chunk_size=CS),
                         MemoryStorage()), PeerConfig.libswift(chunk_size=CS, seed=2))
    ch = take_over_channel(s, leech, 1000.0, SEED, LEECH)
    s._dirty.marked.clear()  # what the handshake marked: only the HAVEs' marks compared
    return s, ch


def _state(p: Peer, ch: Channel) -> tuple[object, ...]:
    up = ch.send.upload
    queued = []
    while (c := up.pop()) is not None:  # drains: call last
        queued.append(c)
    avail = p._avail
    counts = None if avail is None else [avail.count(c) for c in range(N + 40)]
    return (list(ch.remote.have.ranges()), ch.remote.some, ch.remote.top, counts,
            ch in p._dirty.marked, queued)


def _news(p: Peer, ch: Channel, lo: int, hi: int) -> None:
    """The peer announced ``[lo, hi)``: :meth:`RemoteHave.add`, and the mark
    the flush reads: news of a chunk we lack (a seeder lacks none; news of
    a chunk we hold gives the channel nothing to ask, docs/sim.md session 16)."""
    if ch.remote.add(lo, hi, p._avail, None) and (
            not p._seeder and p.content.have.find_empty(lo, hi) is not None):
        p._dirty.mark(ch)


ops = st.lists(st.tuples(st.sampled_from(["req", "have", "have1", "ack", "ack1"]),
                         st.integers(0, N + 20), st.integers(1, 9)), max_size=40)


@settings(max_examples=150, deadline=None)
@given(ops, st.booleans())
def test_dispatch_have_matches_remote_add(seq: list[tuple[str, int, int]], seeding: bool) -> None:
    a, cha = _pair(seeding)  # through Peer._dispatch
    b, chb = _pair(seeding)  # through the methods the inline path replaces
    assert (a._avail is None) == seeding
    n_chunks = a.content.n_chunks
    limit = a._seed_n or n_chunks or (1 << 40)
    for kind, lo, n in seq:
        hi = lo + (1 if kind in ("have1", "ack1") else n)
        specs = a.chunk_specs.specs(lo, hi, clip=False)
        if kind == "req":
            a._dispatch(cha, [(int(MsgType.REQUEST), s, e, None, None) for s, e in specs], 1000.0)
            if n_chunks is not None:
                chb.send.upload.push(max(0, lo), min(hi, n_chunks))
            continue
        if kind in ("ack", "ack1"):  # one datagram per spec: no HAVE of it before
            for s, e in specs:
                a._dispatch(cha, [(2, s, e, 5000, None)], 1000.0)
                clo, chi = b.chunk_specs.to_chunks(s, e)
                _news(b, chb, clo, min(chi, limit))
                chb.send.on_ack(clo, chi, 5000, 1000.0, b._ack_arrived)
            continue
        a._dispatch(cha, [(3, s, e, None, None) for s, e in specs], 1000.0)
        for s, e in specs:
            clo, chi = b.chunk_specs.to_chunks(s, e)
            _news(b, chb, clo, min(chi, limit))
            chb.send.upload.remove(clo, chi)
    assert _state(a, cha) == _state(b, chb)


def test_single_chunk_have_sets_and_cancels() -> None:
    """The plain case, spelled out: a queued chunk, then its one-chunk HAVE."""
    p, ch = _pair()
    p._dispatch(ch, [(int(MsgType.REQUEST), 3, 3, None, None)], 1000.0)
    p._dispatch(ch, [(int(MsgType.REQUEST), 5, 5, None, None)], 1000.0)
    assert ch.send.upload.size == 2
    assert not ch.remote.have.has(3)
    p._dispatch(ch, [(3, 3, 3, None, None)], 1000.0)
    after = list(ch.remote.have.ranges())
    assert ch.remote.have.has(3) and not ch.remote.have.has(2) and not ch.remote.have.has(4)
    assert ch.remote.some and ch.remote.top >= 4
    assert ch.send.upload.size == 1 and ch.send.upload.pop() == 5
    p._dispatch(ch, [(3, N + 6, N + 6, None, None)], 1000.0)  # past the end: nothing
    assert list(ch.remote.have.ranges()) == after


sends = st.lists(st.tuples(st.sampled_from(["sent", "ack", "have"]), st.integers(0, 7),
                           st.sampled_from([0.0, 0.001, 0.05, 0.4, 1.2])), max_size=60)


def _send_state(ch: Channel) -> tuple[object, ...]:
    sd, led = ch.send, ch.send.ledbat
    return (list(sd.data_out.items()), sd.acked_sent, sd.acked_seq, sorted(sd.retried),
            led.flightsize, led.last_ack, led.cto, led.srtt, led.cwnd)


@settings(max_examples=150, deadline=None)
@given(sends)
def test_dispatch_have_retires_as_delivered_by_have(seq: list[tuple[str, int, float]]) -> None:
    """HAVEs and ACKs of one chunk while DATA is in flight: after every step
    the sending state (in-flight log, newest acknowledged, LEDBAT) is what
    calling ``on_ack``, ``RemoteHave.add``, ``RangeQueue.remove`` and
    ``delivered_by_have`` directly leaves (ACKs move the newest
    acknowledged, time moves past congestion timeouts)."""
    a, cha = _pair()
    b, chb = _pair()
    for ch in (cha, chb):  # what the handshake leecher was sent: acknowledged
        for c in list(ch.send.data_out):
            ch.send.on_ack(c, c + 1, 5000, 1000.0, None)
    now = 1000.0
    for kind, c, dt in seq:
        now += dt + 0.001
        if kind == "sent":
            cha.send.on_sent(c, CS, now)
            chb.send.on_sent(c, CS, now)
        elif kind == "ack":
            a._dispatch(cha, [(2, c, c, 5000, None)], now)
            chb.send.on_ack(c, c + 1, 5000, now, None)
            _news(b, chb, c, min(c + 1, N + 1))
        else:
            a._dispatch(cha, [(3, c, c, None, None)], now)
            _news(b, chb, c, c + 1)
            chb.send.upload.remove(c, c + 1)
            if chb.send.data_out:
                chb.send.delivered_by_have(c, c + 1, now)
        assert _send_state(cha) == _send_state(chb)
    assert _state(a, cha) == _state(b, chb)
