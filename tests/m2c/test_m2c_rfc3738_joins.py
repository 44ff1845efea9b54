"""The ``webrc-rfc`` controller follows every MUST of RFC 3738 3.2.3.6 (join the
next higher layer) and 3.2.2.6 (slow start), unlike ``webrc``, whose join
logic is shortened for short transfers (first review, finding 5).

Sans-IO: a discrete-event run with a fake clock, one sender schedule, a
receiver behind an optional drop-tail bottleneck; every epoch is checked
against 3.2.3.6's rules as they stood *before* the receiver decided."""

from __future__ import annotations

import heapq
import math

import pytest

from m2c.core.events import Join, Leave
from m2c.core.groups import WaveSchedule
from m2c.core.receiver_cc import CONTROLLERS, ReceiverCC, WebrcRfcController, reqn


def run(capacity: float | None, duration: float, qlen: int = 25, delay: float = 0.01,
        controller: str = "webrc-rfc", sched=None, base_late: float = 0.0):
    """Returns (receiver, per-epoch checks, joins, webrc-style violations)."""
    s = sched or WaveSchedule(10.0, 1000.0, tsd=1.0, k=2)
    rx = ReceiverCC(s, controller=controller)
    events: list = []
    seq = 0

    def push(t, kind, data):
        nonlocal seq
        heapq.heappush(events, (t, seq, kind, data))
        seq += 1

    nxt = {}
    for ch in range(s.channels + 1):
        nxt[ch] = 0
        push(s.time_of(ch, 0), "send", ch)
    net: set[int] = set()
    busy, qtimes = 0.0, []
    for ev in rx.start(0.0):
        push(0.005 + base_late, "join", ev.channel)
    push(rx.next_timer(), "timer", None)
    joins, breaks = [], []
    while events:
        now, _, kind, data = heapq.heappop(events)
        if now > duration:
            break
        if kind == "send":
            p = nxt[data]
            nxt[data] = p + 1
            push(s.time_of(data, p + 1), "send", data)
            if data not in net:
                continue
            if capacity is None:
                push(now + delay, "recv", (data, p))
                continue
            qtimes = [t for t in qtimes if t > now]
            if len(qtimes) >= qlen:
                continue
            busy = max(busy, now) + 1 / capacity
            qtimes.append(busy)
            push(busy + delay, "recv", (data, p))
        elif kind == "recv":
            rx.on_packet(now, *data)
        elif kind == "join":
            net.add(data)
        else:
            ts = rx.sender_time(now)
            before = {"pending": set(rx.pending), "loss_event": now < rx.loss_event_until,
                      "base": rx.base_seen}
            out = rx.on_timer(now)
            new = [e.channel for e in out if isinstance(e, Join)]
            if len(new) > 1:
                breaks.append(("more than one join in an epoch", now, new))
            if new:
                # the level once this epoch's leaves (quiescence, join timeouts) are done
                lvl = 0
                while lvl < s.levels and s.channel_of_level(lvl + 1, ts) in rx.joined - {new[0]}:
                    lvl += 1
                # JOINING: a join still pending once this epoch's leaves are done (a
                # leave of the joining channel ends JOINING, 3.2.3.3; so does a join
                # timeout, 3.2.3.7)
                left = {e.channel for e in out if isinstance(e, Leave)}
                why = ["joining"] if before["pending"] - left else []
                if before["loss_event"]:
                    why.append("loss_event")
                if not before["base"]:
                    why.append("before the first base packet")
                if s.level_of_channel(new[0], ts) != lvl + 1:
                    why.append("not the next higher layer")
                elif s.cum_rate(lvl + 1, ts) > rx.target_rate() * (1 + 1e-9):
                    why.append("TRATE below the rate after the join")
                if why:
                    breaks.append((why, now, new))
                joins.append((now, new[0]))
            for e in out:
                if isinstance(e, Leave):
                    net.discard(e.channel)
                else:
                    push(now + 0.005, "join", e.channel)
            push(rx.next_timer(), "timer", None)
    return rx, joins, breaks


def test_registered_and_webrc_left_as_it_was():
    assert CONTROLLERS["webrc-rfc"] is WebrcRfcController
    assert CONTROLLERS["webrc"].__name__ == "WebrcController"
    rx, joins, breaks = run(None, 3.0, controller="webrc")
    # webrc keeps its shortcuts: several joins in one start-up epoch, or joins
    # while another is pending (this is what webrc-rfc must never do)
    assert breaks


def test_unconstrained_start_up_ends_at_the_top_rate_with_ssr_trr():
    rx, joins, breaks = run(None, 20.0)
    assert breaks == []
    ctl = rx.ctl
    assert ctl.exits == ["max-rate"]  # not a false MRTT exit from a slow wave's wait
    assert ctl.ssr != math.inf
    assert rx.loss.lost == 0
    # it still reaches the top: one join at a time is slower, not capped
    s = rx.schedule
    assert max(s.level_of_channel(ch, rx.sender_time(t)) or 0 for t, ch in joins) >= s.levels - 1


def test_max_rate_exit_sets_ssr_to_max_ssminr_trr_and_reqn_to_trr():
    s = WaveSchedule(10.0, 1000.0, tsd=1.0, k=2)
    c = WebrcRfcController(s, 0.05)
    c.on_epoch(0.0, 500.0, 500.0, 0.1)
    trr = c.trr
    c.on_max_rate(0.0, 0.1)
    assert c.ssr == max(c.ssminr, trr) and c.exits == ["max-rate"]
    assert reqn(0.1, c.lossp) == pytest.approx(trr, rel=1e-3)
    c.on_max_rate(1.0, 0.1)  # only while SSR_P = infinity
    assert c.exits == ["max-rate"]


def test_mrtt_and_loss_exits_use_p_times_trr():
    s = WaveSchedule(10.0, 1000.0, tsd=1.0, k=2)
    for how in ("mrtt", "loss"):
        c = WebrcRfcController(s, 0.05)
        c.on_epoch(0.0, 400.0, 400.0, 0.1)
        trr = c.trr
        c.on_mrtt_increase(0.0, 0.1) if how == "mrtt" else c.on_loss_event(0.0, 0.1)
        assert c.exits == [how]
        assert c.ssr == max(c.ssminr, c.p * trr)


def test_deep_queue_ends_start_up_on_the_mrtt_increase_before_any_loss():
    """A 100-packet queue fills as the receiver climbs: each new wave's first
    packet waits longer behind it; start-up ends on that, with no loss yet."""
    rx, joins, breaks = run(300.0, 10.0, qlen=100)
    assert breaks == []
    # the first exit recorded: before any loss or lag (later losses are the
    # ordinary probing once SSR_P is finite)
    assert rx.mrtt_exits == 1 and rx.ctl.exits == ["mrtt"]


@pytest.mark.slow
def test_bottleneck_run_keeps_every_must():
    rx, joins, breaks = run(200.0, 40.0)
    assert breaks == []
    assert rx.ctl.exits[0] in ("loss", "lag", "mrtt")
    assert rx.loss_events > 0 and rx.ctl.ssr != math.inf
    s = rx.schedule
    late = [s.cum_rate(s.level_of_channel(ch, rx.sender_time(t)) or 0, rx.sender_time(t))
            for t, ch in joins if t > 20]
    assert late and max(late) < 3 * 200.0


def test_no_join_before_the_first_base_packet():
    """The base group's first packet comes 2 s late: nothing is joined until then
    (3.2.3.6, first rule), and the base join counts as JOINING."""
    rx, joins, breaks = run(None, 4.0, base_late=2.0)
    assert breaks == []
    assert joins and min(t for t, _ in joins) > 2.0


def test_joining_blocks_joins_until_the_first_packet_or_the_timeout():
    s = WaveSchedule(10.0, 1000.0, tsd=1.0, k=2)
    rx = ReceiverCC(s, controller="webrc-rfc")
    rx.start(0.0)
    t = 0.0
    p = 0
    while t < 1.0:  # the base group only: anchor the clock, see the base packet
        t = s.time_of(0, p) + 0.01
        rx.on_packet(t, 0, p)
        p += 1
    assert rx.base_seen and not rx.joining
    out = rx.on_timer(rx.next_timer())
    (j,) = [e for e in out if isinstance(e, Join)]
    assert rx.joining
    for _ in range(5):  # the joined wave sends nothing: no other join, epoch after epoch
        now = rx.next_timer()
        while s.time_of(0, p) + 0.01 < now:
            rx.on_packet(s.time_of(0, p) + 0.01, 0, p)
            p += 1
        assert not [e for e in rx.on_timer(now) if isinstance(e, Join)]
    assert rx.joining
