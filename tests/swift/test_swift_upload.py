"""Upload side (swift/core/upload.py) and the data structures its hot path
uses: the request queue's CANCEL/HAVE removal, single-chunk binmap updates
(every ACK), and HAVE retiring DATA whose ACK was lost (RFC 7574 3.8, 8.7)."""

import os

from hypothesis import given, settings, strategies as st

from swift.core.binmap import Binmap
from swift.core.content import Content, MemoryStorage
from swift.core.merkle import MerkleTree
from swift.core.peer import Peer, PeerConfig
from swift.core.sendside import RangeQueue
from swift.wire import codec as C

SEED, LEECH = ("10.0.0.1", 6778), ("10.0.0.2", 6778)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["push", "pop", "remove"]),
                          st.integers(0, 200), st.integers(0, 40)), max_size=60))
def test_range_queue_matches_a_list(ops) -> None:
    q, model = RangeQueue(500), []
    for op, lo, ln in ops:
        if op == "push":
            room = max(0, 500 - len(model))
            q.push(lo, lo + ln)
            model.extend(range(lo, lo + min(ln, room)))
        elif op == "pop":
            got = q.pop()
            assert got == (model.pop(0) if model else None)
        else:
            q.remove(lo, lo + ln)
            model = [c for c in model if not lo <= c < lo + ln]
        assert len(q) == len(model)
    assert [q.pop() for _ in range(len(model))] == model


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 5000), st.integers(0, 3)), max_size=80),
       st.integers(0, 5000))
def test_binmap_single_chunk_updates_match_a_set(ops, probe) -> None:
    """set_range/reset_range of one chunk take the C descent (binmap_set1)."""
    m, model = Binmap(), set()
    for val, lo, ln in ops:
        if val:
            m.set_range(lo, lo + ln)
            model.update(range(lo, lo + ln))
        else:
            m.reset_range(lo, lo + ln)
            model.difference_update(range(lo, lo + ln))
    for c in list(model)[:50] + [probe]:
        assert m.has(c) == (c in model)
    want = next((c for c in range(probe, 5100) if c in model), None)
    assert m.find_filled(probe, 5100) == want


def _pair(n_chunks: int = 64):
    cfg = PeerConfig()
    data = os.urandom(n_chunks * cfg.chunk_size)
    cs = cfg.chunk_size
    tree = MerkleTree.build([data[i:i + cs] for i in range(0, len(data), cs)], cfg.hash_func, cs)
    s = Peer(Content.seeded(tree, MemoryStorage(data)), cfg)
    lp = Peer(Content(MerkleTree.for_root(tree.root_hash, cfg.hash_func, cs), MemoryStorage()), cfg)
    return s, lp


def _exchange(a: Peer, b: Peer, now: float, lose_replies: bool = False) -> None:
    for d, dst in a.datagrams_to_send(now):
        if dst == LEECH:
            b.datagram_received(d, SEED, now)
    for d, dst in b.datagrams_to_send(now):
        if dst == SEED and not lose_replies:
            a.datagram_received(d, LEECH, now)


def test_have_retires_data_whose_ack_was_lost() -> None:
    s, lp = _pair()
    lp.connect(SEED, 0.0)
    now = 0.0
    for _ in range(6):  # handshake and the first requests/DATA
        now += 0.01
        _exchange(s, lp, now)
    ch = next(iter(s.channels.values()))
    assert ch.state == "est"
    # the leecher's ACKs (and everything else it sends) are lost: DATA
    # stays in flight at the seeder ...
    for _ in range(3):
        now += 0.01
        _exchange(s, lp, now, lose_replies=True)
    assert ch.send.data_out
    flight, acks = ch.send.ledbat.flightsize, ch.send.ledbat.acks
    got = [c for c in ch.send.data_out if lp.content.have.has(c)]
    assert got
    retired = sum(ch.send.data_out[c][1] for c in got)
    # ... until a HAVE covers it: what is older than 1.5 smoothed RTTs
    # leaves flight without a delay sample; the rest stays
    lch = next(iter(lp.channels.values()))
    now += 2.0
    young = max(ch.send.data_out) + 1
    ch.send.data_out[young] = (now, 1100)  # "sent just now": not retired
    ch.send.ledbat.flightsize += 1100
    msgs = [C.Have(x, y) for c in got + [young] for x, y in lp._specs(c, c + 1)]
    s.datagram_received(C.encode_datagram(lp.ctx, lch.remote_id, msgs), LEECH, now)
    assert ch.send.ledbat.acks == acks
    assert ch.send.ledbat.flightsize == flight + 1100 - retired
    assert not any(c in ch.send.data_out for c in got)
    assert young in ch.send.data_out
