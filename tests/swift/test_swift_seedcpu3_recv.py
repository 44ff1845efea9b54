"""``sendside_recv`` (C, deliverykit/csrc/swift.c; twin swift._fast.py_sendside_recv):
the send side of one ACK (:meth:`SendSide.on_ack`, LEDBAT included) or HAVE
(:meth:`SendSide.delivered_by_have`) in one call, per libswift ``HAVE i, ACK i``
datagram a seeder receives (issue 15).  The C version must leave exactly the
state the methods leave: DATA in flight (and its order), RACK's newest, the
RTTs, pacing, the ambiguous set and every LEDBAT attribute, for random
sequences of DATA sent (bursts at one instant, chunks sent again), ACKs
(stale, of chunks already acknowledged, of ranges wider than the flight,
past the content, with delay samples that read negative) and HAVEs (bins,
DATA older than a congestion timeout), and decline (-1, nothing changed)
while loss repair has chunks in flight."""

from __future__ import annotations

import math

import pytest
from hypothesis import example, given, settings, strategies as st

from deliverykit.fastpath import have_c
from swift._fast import ledbat_on_ack, py_ledbat_on_ack, py_sendside_recv, sendside_recv
from swift.core.binmap import Binmap
from swift.core.ledbat import Ledbat
from swift.core.sendside import SendSide

needs_c = pytest.mark.skipif(not have_c(), reason="the C extension is not built")

#: chunks past any content the test sends (a 32-bit chunk number)
FAR = 2**32 - 2


def _side(slow_start: bool) -> SendSide:
    return SendSide(4096, 1024, slow_start, Binmap())


def _state(s: SendSide) -> tuple[object, ...]:
    led = s.ledbat
    lv = {k: (list(v) if hasattr(v, "maxlen") else v) for k, v in vars(led).items()}
    return (list(s.data_out.items()), list(s.send_log), s.send_seq, s.acked_sent, s.acked_seq,
            s.acked_rtt, sorted(s.ambiguous), s.pace_at, s.pace_rtt, sorted(s.retried),
            dict(s.lost_at), s.reo_mult, s.reo_clean, s.served, sorted(lv.items()))


def _same_types(a: SendSide, b: SendSide) -> None:
    """Equal values must also be of the same types (a float stays a float)."""
    for x, y in ((a.acked_sent, b.acked_sent), (a.acked_seq, b.acked_seq),
                 (a.acked_rtt, b.acked_rtt), (a.pace_rtt, b.pace_rtt)):
        assert type(x) is type(y)
    for k, v in vars(a.ledbat).items():
        assert type(v) is type(vars(b.ledbat)[k]), k


#: one step: (kind, chunk, count, seconds since the last step, delay sample, arrival)
steps = st.lists(st.tuples(
    st.sampled_from(["send", "send", "send", "ack", "ack", "have", "retry", "unretry"]),
    st.one_of(st.integers(0, 7), st.integers(0, 40), st.just(FAR)),
    st.sampled_from([1, 1, 1, 2, 4, 8, 64]),
    st.sampled_from([0.0, 0.0, 0.0003, 0.002, 0.05, 0.4, 3.0]),
    st.sampled_from([0, 1, 4000, 123_456, 2**63 - 1, 2**63, 2**64 - 1]),
    st.sampled_from(["none", "early", "late", "future"])), max_size=80)


def _run(seq: list[tuple[str, int, int, float, int, str]], slow_start: bool,
         fast: object, ref: object) -> None:
    """``fast`` on one SendSide, ``ref`` on another, as Peer._dispatch calls
    them (the method when -1); the states compared after every step."""
    a, b = _side(slow_start), _side(slow_start)
    now = 1000.0
    for kind, c, n, dt, delay, arr in seq:
        now += dt
        if kind == "send":
            for s in (a, b):
                s.on_sent(c, 1024 if c != 40 else 300, now)
            continue
        if kind in ("retry", "unretry"):  # loss repair sent c again / finished with it
            for s in (a, b):
                if kind == "retry":
                    s.retried.add(c)
                else:
                    s.retried.discard(c)
            continue
        lo, hi = c, c + n
        if kind == "ack":
            arrived = {"none": None, "early": now - 0.0001, "late": now - 5.0,
                       "future": now + 1.0}[arr]
            args = (lo, hi, delay, now, arrived)
        else:
            args = (lo, hi, None, now, None)
        before = _state(a)
        ra = fast(a, *args)  # type: ignore[operator]  # the function under test
        rb = ref(b, *args)  # type: ignore[operator]  # its twin
        assert ra == rb
        if ra < 0:  # declined: nothing changed, the method runs
            assert _state(a) == before
            assert a.retried
            for s in (a, b):
                if kind == "ack":
                    s.on_ack(lo, hi, delay, now, args[4])
                else:
                    s.delivered_by_have(lo, hi, now)
        else:
            assert ra == 0
        assert _state(a) == _state(b)
        _same_types(a, b)


@needs_c
@settings(max_examples=400, deadline=None)
@given(steps, st.booleans())
@example([], True)  # nothing at all
@example([("ack", 3, 1, 0.0, 4000, "none"), ("have", 3, 1, 0.0, 0, "none")], True)  # empty flight
@example([("send", 3, 1, 0.0, 0, "none"), ("send", 4, 1, 0.001, 0, "none"),
          ("ack", 4, 1, 0.01, 4000, "early"), ("ack", 4, 1, 0.01, 4000, "early"),  # held
          ("ack", 3, 1, 0.01, 4000, "none"),  # stale: sent before the newest acknowledged
          ("ack", FAR, 1, 0.0, 2**64 - 1, "none")], False)  # outside the content
@example([("send", 5, 1, 0.0, 0, "none"), ("send", 6, 1, 0.0, 0, "none"),
          ("send", 5, 1, 0.0, 0, "none"),  # sent again in flight: ambiguous (Karn)
          ("ack", 5, 1, 0.02, 9, "early"), ("have", 0, 8, 3.0, 0, "none")], True)
@example([("send", 7, 1, 0.0, 0, "none"), ("retry", 7, 1, 0.0, 0, "none"),
          ("ack", 7, 1, 0.01, 5, "none"), ("send", 8, 1, 0.0, 0, "none"),
          ("have", 8, 1, 0.0, 0, "none")], False)  # loss repair: declined
@example([("send", 1, 1, 0.0, 0, "none"), ("send", 2, 1, 0.0, 0, "none"),
          ("send", 3, 1, 0.0, 0, "none"), ("ack", 0, 64, 0.01, 7, "late")], True)  # wide
@example([("send", 1, 1, 0.0, 0, "none"), ("send", 2, 1, 0.0, 0, "none"),  # one instant:
          ("ack", 2, 1, 0.01, 7, "none"), ("ack", 1, 1, 0.0, 7, "none")], True)  # send order
@example([("send", 1, 1, 0.0, 0, "none"), ("send", 2, 1, 0.0, 0, "none"),
          ("ack", 2, 1, 0.01, 7, "none"), ("have", 1, 1, 0.0, 0, "none")], True)
@example([("send", 1, 1, 0.0, 0, "none"), ("send", 2, 1, 0.0, 0, "none"),  # pacing's RTT
          ("ack", 1, 1, 0.01, 7, "early"), ("ack", 2, 1, 0.01, 7, "early")], True)
def test_c_sendside_recv_equals_the_methods(seq, slow_start) -> None:
    assert sendside_recv is not py_sendside_recv
    _run(seq, slow_start, sendside_recv, py_sendside_recv)


@settings(max_examples=100, deadline=None)
@given(steps, st.booleans())
def test_twin_is_the_methods(seq, slow_start) -> None:
    """The twin (what DELIVERYKIT_PURE=1 runs) against the methods called directly."""
    def methods(s: SendSide, lo: int, hi: int, delay: int | None, now: float,
                arrived: float | None) -> int:
        if s.retried:
            return -1
        if delay is None:
            assert s.delivered_by_have(lo, hi, now) == 0
        else:
            assert s.on_ack(lo, hi, delay, now, arrived) == 0
        return 0
    _run(seq, slow_start, py_sendside_recv, methods)


@pytest.mark.parametrize("fn", [pytest.param(sendside_recv, marks=needs_c), py_sendside_recv])
@pytest.mark.parametrize("lo, hi, delay", [
    (1, 2, 4000.0),  # a delay that is not an int
    (1, 2, -1), (1, 2, 1 << 64),  # one outside what a 64-bit field decodes to
    (0, 1 << 63, 5), (1 << 63, (1 << 63) + 1, 5), (0, 1 << 64, None),  # bin64 / byte64 reach
    (-1, 2, 5), (-1, 2, None), (3, 1, 5), (3, 1, None),  # negative, reversed
    (1.0, 2, 5)])  # not ints
def test_declines_what_it_does_not_cover(fn, lo, hi, delay) -> None:
    """-1 and nothing changed; the method then takes it (a peer's HAVE or ACK
    of a 64-bit bin must not raise where the method would not)."""
    s, ref = _side(True), _side(True)
    for side in (s, ref):
        side.on_sent(1, 1024, 1.0)
        side.on_sent(2, 1024, 1.0)
    before = _state(s)
    assert fn(s, lo, hi, delay, 1.1, None) == -1
    assert _state(s) == before
    if isinstance(lo, int) and isinstance(delay, int | None):
        for side in (s, ref):
            if delay is None:
                side.delivered_by_have(lo, hi, 1.1)
            else:
                side.on_ack(lo, hi, delay, 1.1)
        assert _state(s) == _state(ref)


def test_retires_old_data_by_have_through_on_delivered() -> None:
    """A HAVE covering DATA older than a congestion timeout retires it (LEDBAT's
    flight shrinks, no delay sample): the C version calls Ledbat.on_delivered."""
    s = _side(False)
    s.on_sent(1, 1024, 1.0)
    s.on_sent(2, 1024, 1.0)
    s.on_sent(3, 1024, 5.0)
    assert sendside_recv(s, 0, 4, None, 5.0, None) == 0
    assert list(s.data_out) == [3]
    assert s.ledbat.flightsize == 1024 and s.ledbat.last_ack == 5.0
    assert s.ledbat.acks == 0


@needs_c
def test_c_refuses_broken_state() -> None:
    s = _side(True)
    s.data_out = []  # type: ignore[assignment]  # the broken state under test
    with pytest.raises(TypeError):
        sendside_recv(s, 1, 2, 5, 1.0, None)
    s = _side(True)
    s.on_sent(1, 1024, 1.0)
    s.data_out[1] = ("x", 1024, 1)  # type: ignore[assignment]  # a broken entry
    with pytest.raises(TypeError):
        sendside_recv(s, 1, 2, 5, 1.0, None)
    with pytest.raises(AttributeError):
        sendside_recv(object(), 1, 2, 5, 1.0, None)
    with pytest.raises(TypeError):
        sendside_recv(s, 1, 2, 5)  # type: ignore[call-arg]  # arity checked
    assert math.isfinite(s.ledbat.cwnd)


def test_peer_takes_an_ack_of_a_64_bit_bin() -> None:
    """With bin64 addressing an ACK or HAVE may name chunks up to 2**63 (bin
    2**63 - 1): Peer._dispatch must take it as the methods do (sendside_recv
    declines it; at 2a18f16 the C raised OverflowError from the datagram)."""
    import dataclasses

    from swift_support import take_over_channel

    from swift.core.content import Content, MemoryStorage
    from swift.core.merkle import MerkleTree
    from swift.core.peer import Peer, PeerConfig
    from swift.wire.constants import ChunkAddressing, HashFunc

    cs = 1024
    data = bytes(range(256)) * 40
    tree = MerkleTree.build([data[i:i + cs] for i in range(0, len(data), cs)], HashFunc.SHA1,
                            chunk_size=cs)

    def cfg(seed: int) -> PeerConfig:
        return dataclasses.replace(PeerConfig.libswift(chunk_size=cs, seed=seed),
                                   addressing=ChunkAddressing.BIN64)

    seeder = Peer(Content.seeded(tree, MemoryStorage(data)), cfg(1))
    leech = Peer(Content(MerkleTree.for_root(tree.root_hash, HashFunc.SHA1, chunk_size=cs),
                         MemoryStorage()), cfg(2))
    ch = take_over_channel(seeder, leech, 1000.0, ("10.0.0.1", 20000), ("10.0.0.2", 20001))
    ch.send.on_sent(3, cs, 999.9)
    top = (1 << 63) - 1
    assert seeder.chunk_specs.to_chunks(top, top) == (0, 1 << 63)
    seeder._dispatch(ch, [(3, top, top, None, None), (2, top, top, 5000, None)], 1000.0)
    assert not ch.send.data_out  # retired by the method
    assert ch.remote.have.is_filled_range(0, 10)


class _Watched(Ledbat):
    """A Ledbat whose window is a property (a data descriptor on the type):
    every write must reach the setter, as in the twin."""

    def __init__(self) -> None:
        self.writes = 0
        super().__init__(mss=1024, slow_start=True)

    @property
    def cwnd(self) -> float:  # type: ignore[override]  # a property over the attribute
        return self._cwnd

    @cwnd.setter
    def cwnd(self, v: float) -> None:
        self._cwnd = v
        self.writes += 1


def _ledbat_state(led: Ledbat) -> list[tuple[str, object]]:
    return sorted((k, list(v) if hasattr(v, "maxlen") else v) for k, v in vars(led).items())


@needs_c
@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.floats(0.0001, 0.2), st.sampled_from([0, 1024, 8192]),
                          st.booleans()), min_size=1, max_size=40))
def test_c_ledbat_on_ack_with_a_property_on_the_type(acks) -> None:
    """ledbat_on_ack (and so sendside_recv) reads and writes the Ledbat's
    attributes through the generic attribute calls: a subclass with a
    property among them gets the same result as the twin, through the
    property, and so does a plain Ledbat used in between.  (A shortcut
    through the instance dict, which would break this, was measured in
    session 13 and dropped: docs/swift-perf.md.)"""
    assert ledbat_on_ack is not py_ledbat_on_ack
    a, b = _Watched(), _Watched()
    pa, pb = Ledbat(mss=1024), Ledbat(mss=1024)
    now = 1000.0
    for delay, n, with_rtt in acks:
        now += 0.001
        for led in (a, b, pa, pb):
            led.on_send(n, now)
        rtt = 2 * delay if with_rtt else None
        ledbat_on_ack(a, delay, n, now, rtt)
        ledbat_on_ack(pa, delay, n, now, rtt)
        py_ledbat_on_ack(b, delay, n, now, rtt)
        py_ledbat_on_ack(pb, delay, n, now, rtt)
        assert _ledbat_state(a) == _ledbat_state(b)
        assert _ledbat_state(pa) == _ledbat_state(pb)
        assert a.writes == b.writes > 0
