"""Session 15: the fixed start-up's base pairs, and the hole rule's share test
(``ReceiverCC.HOLE_OWN``).

The base pairs: the sender cannot send its first pair sooner, nor pairs more often,
without a base packet leaving before the due time the receiver's clock gives it (the
receiver's offset is the windowed minimum of arrival less due time, so one early
packet would bias every later queueing delay): the pair leaves back to back at its
odd packet's due time, 53 ms and 124 ms into the session for the first two.

The share test: the hole rule (``HOLE_SLACK``) takes a loss for loss on the link only
while our packets alone fill the busy link, judged from the last 64 back-to-back
spacings (``HOLE_SHARE``).  Our own packets lost on that link leave holes of one
packet time among those spacings, and four of them switched the rule off (r387 and
r500 of the 1,000-receiver draw, seed 0, at 1.4-2 % random loss).  With
``HOLE_OWN`` the spacings across packets of ours declared lost are left out of the
share; another flow's packets still count.  The first tests drive the real
ReceiverCC through a small path (a FIFO link with a drop-tail queue, chosen packets
lost after the link, optionally another flow on the link); the last replays crowd
receivers in the simulator (tests/m2c/crowd.py).
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable

import crowd
import pytest

from m2c.core.events import Join, Leave
from m2c.core.groups import make_schedule
from m2c.core.receiver_cc import ReceiverCC
from m2c.core.session import SenderCore, describe_session
from m2c.experiments.many import draw_links, ideal_s

PACKET_BITS = 1500 * 8
SIZE = 4_000_000


def _schedule():
    # the simulator's session: 256 kb/s to 8 Mb/s of 1,500-byte packets, TSD 2 s, K 2
    return make_schedule("wave", min_rate=256e3 / PACKET_BITS, max_rate=8e6 / PACKET_BITS,
                         tsd=2.0, k=2)


# --- the base pairs ------------------------------------------------------------------

def test_base_pairs_leave_back_to_back_at_their_odd_packets_due_time():
    """The crowd's session (as m2c.sim builds it): the base group's packets leave in
    pairs, both at the odd packet's due time, in one timer run (back to back), the
    even one first; no base packet leaves before the due time the receiver's pair
    model gives it (``ReceiverCC.on_packet``: the odd one's), none later.  The first
    pair is due at 53 ms, the second at 124 ms (the base group at R_min Q^K = 28.4
    pkt/s at the slot start): what the fixed start-up waits for."""
    sd = describe_session("x", 2_000_000, "0" * 64, session=1, fec_seed=1,
                          min_rate=256e3 / PACKET_BITS, max_rate=8e6 / PACKET_BITS,
                          tsd=2.0, k=2, symbol_size=1428)
    sender = SenderCore(sd, lambda off, n: bytes(n), quantum=0.0)
    sched = sender.file.seq.schedule
    sender.start(0.0)
    base = sd.groups[0]
    base_addr = (str(base[0]), int(base[1]))
    runs: list[tuple[float, list[int]]] = []  # (time, base PSNs sent in that run)
    now = 0.0
    psn = 0
    while now < 2.5:
        sender.handle_timer(now)
        out = sender.datagrams_to_send(now)
        sent = [p for p in range(psn, psn + sum(a == base_addr for _, a in out))]
        psn += len(sent)
        if sent:
            runs.append((now, sent))
        nxt = sender.get_timer(now)
        assert nxt is not None and nxt >= now
        now = nxt if nxt > now else now + 1e-9
    assert runs[0] == (sched.time_of(0, 1), [0, 1])
    assert runs[1] == (sched.time_of(0, 3), [2, 3])
    assert 0.052 < runs[0][0] < 0.054 and 0.123 < runs[1][0] < 0.125
    for t, psns in runs:
        assert len(psns) == 2 and psns[0] % 2 == 0 and psns[1] == psns[0] + 1
        assert t == sched.time_of(0, psns[1])  # the receiver's due time for both
    gaps = [b[0] - a[0] for a, b in zip(runs, runs[1:])]
    assert all(0.065 < g < 0.095 for g in gaps)  # 2 / (21.3 .. 28.4 pkt/s)


# --- the share test ----------------------------------------------------------------

def _path(cc: ReceiverCC, until: float, link_bps: float, *,
          lose: Callable[[int, int, int], bool], other_pps: float = 0.0,
          queue: int = 25, down: float = 0.03, join_delay: float = 0.01) -> None:
    """One receiver behind a FIFO link of ``link_bps`` (``queue`` packets, drop-tail),
    the sender at the branch point: a packet is forwarded when the receiver's join
    was in effect as it left, crosses ``down`` s and the link, and is lost after the
    link if ``lose(channel, psn, packets queued ahead of it)``; ``other_pps``: another
    flow's packets on the link, evenly spaced (they use it, nobody receives them)."""
    sched = cc.schedule
    member: dict[int, float] = {}
    heap: list[tuple[float, int, str, int, int]] = []
    seq = 0

    def push(t: float, kind: str, ch: int, psn: int) -> None:
        nonlocal seq
        heapq.heappush(heap, (t, seq, kind, ch, psn))
        seq += 1

    def sent(ch: int, psn: int) -> float:
        return sched.time_of(ch, psn + 1 if ch == 0 and psn % 2 == 0 else psn)

    def apply(t: float, events: list[Join | Leave]) -> None:
        for e in events:
            if isinstance(e, Join):
                member.setdefault(e.channel, t + join_delay)
            else:
                member.pop(e.channel, None)

    for c in range(sched.channels + 1):
        push(sent(c, 0), "send", c, 0)
    if other_pps > 0:
        push(0.0, "other", -1, 0)
    departures: deque[float] = deque()
    step = PACKET_BITS / link_bps

    def enqueue(at_link: float) -> tuple[float, int] | None:
        while departures and departures[0] <= at_link:
            departures.popleft()
        if len(departures) >= queue:
            return None
        ahead = len(departures)
        out = max(at_link, departures[-1] if departures else at_link) + step
        departures.append(out)
        return out, ahead

    apply(0.0, cc.start(0.0))
    while heap:
        timer = cc.next_timer()
        if timer is not None and timer <= heap[0][0]:
            apply(timer, cc.on_timer(timer))
            continue
        now, _, kind, ch, psn = heapq.heappop(heap)
        if now > until:
            break
        if kind == "other":
            push(now + 1 / other_pps, "other", -1, 0)
            enqueue(now + down)
        elif kind == "send":
            push(sent(ch, psn + 1), "send", ch, psn + 1)
            if ch in member and member[ch] <= now:
                got = enqueue(now + down)
                if got is not None and not lose(ch, psn, got[1]):
                    push(got[0], "arrive", ch, psn)
        elif ch in member:
            apply(now, cc.on_packet(now, ch, psn))


def _losing(start: float, every: int, count: int, cc: ReceiverCC
            ) -> tuple[Callable[[int, int, int], bool], list[tuple[int, int]]]:
    """Lose ``count`` packets after the link, ``every`` forwarded packets apart, from
    ``start`` s (sender time) on, each one only while 3 or more packets are queued
    ahead of it (a busy link: the packets around it leave back to back)."""
    chosen: list[tuple[int, int]] = []
    n = 0

    def lose(ch: int, psn: int, ahead: int) -> bool:
        nonlocal n
        if len(chosen) >= count or cc.schedule.time_of(ch, psn) < start:
            return False
        n += 1
        if n >= every and ahead >= 3:
            n = 0
            chosen.append((ch, psn))
            return True
        return False

    return lose, chosen


Judged = dict[tuple[int, int], tuple[bool, float, float]]
"""lost packet -> (taken for loss on the link, the share over every one of the last 64
spacings, the share over those not across a packet of ours declared lost)"""


def _classified(cc: ReceiverCC) -> Judged:
    """Record, per lost packet the hole rule judged, whether it was taken for loss on
    the link and the share test's inputs (wraps the instance's ``_link_holes``, which
    it leaves as it is)."""
    seen: Judged = {}
    judge = cc._link_holes

    def record(channel: int) -> int:
        lost = list(cc.loss.last_lost)
        sp = list(cc._spacings)
        t = sorted(sp)[len(sp) // 10] if sp else 0.0
        kept = [s for s, a in zip(sp, cc._spacing_at) if a not in cc._own_holes]
        found = judge(channel)
        for i, m in enumerate(lost):
            seen[(channel, m)] = (i < found, len(sp) * t / sum(sp) if sp else 0.0,
                                  len(kept) * t / sum(kept) if kept else 0.0)
        return found

    cc._link_holes = record  # type: ignore[method-assign]  # records what the rule found
    return seen


def _busy_run(monkeypatch, own: bool, every: int, other_pps: float = 0.0
              ) -> tuple[ReceiverCC, list[tuple[int, int]], Judged]:
    monkeypatch.setattr(ReceiverCC, "HOLE_OWN", own)
    cc = ReceiverCC(_schedule(), pairs=True)
    lose, chosen = _losing(1.0, every, 5, cc)
    seen = _classified(cc)
    # 5 Mb/s: the jump joins up to the pairs' estimate and the link stays busy
    _path(cc, 2.5, 5e6, lose=lose, other_pps=other_pps)
    assert len(chosen) == 5 and all(c in seen for c in chosen)
    return cc, chosen, seen


@pytest.mark.parametrize("every", [12, 16])
def test_own_holes_no_longer_switch_the_hole_rule_off(monkeypatch, every):
    """Five packets lost after a busy link, ``every`` packets apart: each leaves a hole
    of one packet time among the last 64 spacings.  Without ``HOLE_OWN`` some of the
    later ones find the share test failed (our own holes read as another flow's
    packets) and are taken for congestion; with it each one is loss on the link, the
    share over every spacing below ``HOLE_SHARE`` where the rule was off before."""
    share = ReceiverCC.HOLE_SHARE
    cc0, chosen0, seen0 = _busy_run(monkeypatch, False, every)
    cc1, chosen1, seen1 = _busy_run(monkeypatch, True, every)
    assert chosen0 == chosen1
    assert all(seen1[c][0] for c in chosen1)
    missed = [c for c in chosen0 if not seen0[c][0]]
    assert missed and seen0[chosen0[0]][0]
    for c in missed:
        assert seen0[c][1] < share  # the share test switched the rule off
        assert seen1[c][1] < share <= seen1[c][2]  # our own holes were what failed it
    assert cc1.link_losses >= cc0.link_losses + len(missed)


def test_another_flows_holes_still_switch_it_off(monkeypatch):
    """The same losses with another flow on the link (40 pkt/s, a tenth of it): its
    packets sit between ours that all arrived, so with ``HOLE_OWN`` the share test
    still fails (without our own holes too) and none of the five is taken for loss
    on the link."""
    cc, chosen, seen = _busy_run(monkeypatch, True, 12, other_pps=40.0)
    assert not any(seen[c][0] for c in chosen)
    assert all(seen[c][2] < ReceiverCC.HOLE_SHARE for c in chosen)
    assert cc.link_losses == 0


@pytest.mark.parametrize("name,off,on_below", [("r387", 1.1267, 1.10), ("r500", 1.1318, 1.13)])
def test_crowd_receivers_replayed_alone(monkeypatch, name, off, on_below):
    """r387 (5.90 Mb/s, 26 ms, 1.36 %) and r500 (5.69 Mb/s, 47 ms, 1.99 %) of the
    1,000-receiver draw (4 MB, seed 0) alone: off, as in the crowd (848517b's file);
    on, the random loss that halved the window with the link at the best layer set
    (r387 at 1.74 s, r500 at 5.20 s: four own holes among the last 64 spacings) is
    loss on the link, and each finishes sooner."""
    links = draw_links(1000, 0)
    rate, delay, loss = crowd.link(name, links)
    ideal = ideal_s(SIZE, rate, delay, loss)
    ratios = []
    for own in (False, True):
        monkeypatch.setattr(ReceiverCC, "HOLE_OWN", own)
        res = crowd.replay(name, SIZE)
        t = res.receivers[0].completion_s
        assert t is not None
        ratios.append(t / ideal)
    assert ratios[0] == pytest.approx(off, abs=5e-5)
    assert ratios[1] < on_below and ratios[1] < ratios[0] - 0.005
