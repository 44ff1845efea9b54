"""M2C's sender and receiver are DatagramCores (deliverykit/protocol.py): datagrams in
with the time, datagrams out, one timer, events out; no clock, no socket in m2c/core."""

from __future__ import annotations

import ast
import hashlib
import math
import pathlib
import random

import pytest

from deliverykit.protocol import is_datagram_core
from m2c.core.events import Join, Leave
from m2c.core.session import (
    CLOSE_GRACE,
    Decoded,
    EndReason,
    ReceiverCore,
    Recovered,
    SenderCore,
    SessionEnded,
    describe_session,
)
from m2c.wire import codec

SRC = "10.0.0.1"


def _session(size: int = 60_000, seed: int = 1):
    data = random.Random(seed).randbytes(size)
    sd = describe_session("f.bin", size, hashlib.sha256(data).hexdigest(), session=77,
                          fec_seed=5, interface=SRC, min_rate=30.0, max_rate=3000.0,
                          tsd=0.5, k=2)
    return sd, data


def _sender(sd, data, **kw) -> SenderCore:
    return SenderCore(sd, lambda off, n: data[off:off + n], **kw)


def test_both_cores_implement_the_protocol():
    """Methods and signatures: the protocol's positional calls, extras optional."""
    import inspect

    from deliverykit.protocol import DatagramCore
    from m2c.core.groups import WaveSchedule
    from m2c.core.stream import StreamReceiverCore, StreamSenderCore

    sd, data = _session()
    s = WaveSchedule(30.0, 1500.0, tsd=0.5, k=2)
    groups = [(f"239.1.1.{1 + i}", 5000 + i) for i in range(s.channels + 1)]
    cores = [_sender(sd, data), ReceiverCore(sd, source=SRC), StreamSenderCore(s, groups, 1),
             StreamReceiverCore(s, 1)]
    for core in cores:
        assert is_datagram_core(core)
        for name in ("datagram_received", "datagrams_to_send", "get_timer", "handle_timer",
                     "next_event"):
            want = [q for q in inspect.signature(getattr(DatagramCore, name)).parameters
                    if q != "self"]
            have = list(inspect.signature(getattr(core, name)).parameters.values())
            assert [q.name for q in have[:len(want)]] == want, (core, name)
            assert all(q.default is not inspect.Parameter.empty for q in have[len(want):])


def test_m2c_core_reads_no_clock_and_touches_no_socket():
    banned = {"time", "socket", "asyncio", "selectors", "datetime"}
    core = pathlib.Path(__file__).resolve().parents[2] / "m2c" / "core"
    for path in sorted(core.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module.split(".")[0]]
            assert not banned & set(names), f"{path.name} imports {banned & set(names)}"


def test_sender_emits_each_packet_at_its_due_time_to_its_group():
    """Every packet leaves at its due time, but an even base-group PSN, which leaves
    with its odd successor at that one's due time (back-to-back pairs, so a receiver
    can measure its bottleneck), the even one first."""
    sd, data = _session()
    snd = _sender(sd, data, quantum=0.0)
    assert snd.get_timer(0.0) is None  # not started: no timer, nothing to send
    t0 = 1000.0
    snd.start(t0)
    groups = {(g, int(p)): ch for ch, (g, p) in enumerate(sd.groups)}
    sched = sd.schedule()
    now, got, pairs = t0, 0, 0
    for _ in range(100_000):  # a safety bound
        if now >= t0 + 2.0:
            break
        deadline = snd.get_timer(now)
        assert deadline is not None and deadline >= now
        now = deadline
        snd.handle_timer(now)
        base = []
        for wire, addr in snd.datagrams_to_send(now):
            pkt = codec.decode(wire, session=sd.session)
            assert groups[addr] == pkt.group  # (group_ip, port) of the packet's channel
            held = pkt.group == 0 and pkt.psn % 2 == 0
            due = t0 + sched.time_of(pkt.group, pkt.psn + held)
            assert due <= now + 1e-9 and (snd.quantum > 0 or due >= now - 1e-9)
            if pkt.group == 0:
                base.append(pkt.psn)
            got += 1
        if len(base) == 2:
            assert base[1] == base[0] + 1 and base[0] % 2 == 0  # a pair, even first
            pairs += 1
    assert got == snd.sent > 0
    assert pairs >= 20  # the base group's ~21-38 packets/s for 2 s, in pairs
    # the close-session packets continue the base group's PSNs
    close = [codec.decode(w, session=sd.session) for w, _ in snd.close_packets()]
    assert all(p.close_session and p.data_less and p.group == 0 for p in close)
    assert close[0].psn == snd.base[1] + 1


def _transfer(sd, data, receivers: list[ReceiverCore], until: float = 60.0,
              drop=lambda pkt_no: False):
    """A minimal driver in virtual time: every datagram reaches every receiver
    that has joined its group, 10 ms later."""
    snd = _sender(sd, data, quantum=0.0)
    snd.start(0.0)
    for r in receivers:
        r.start(0.0)
    joined = [set() for _ in receivers]
    events = [[] for _ in receivers]
    out = [bytearray(sd.size) for _ in receivers]
    inflight: list[tuple[float, bytes, tuple]] = []
    now, n, rounds = 0.0, 0, 0

    def drain(i, r):
        while (e := r.next_event()) is not None:
            events[i].append(e)
            if isinstance(e, Join):
                joined[i].add(e.channel)
            elif isinstance(e, Leave):
                joined[i].discard(e.channel)
            elif isinstance(e, Decoded):
                out[i][e.offset:e.offset + len(e.data)] = e.data

    for i, r in enumerate(receivers):
        drain(i, r)
    while now < until and not all(r.done for r in receivers):
        rounds += 1
        assert rounds < 1_000_000, "the cores' timers do not move on"
        timers = [t for t in [snd.get_timer(now)] + [r.get_timer(now) for r in receivers]
                  if t is not None]
        nxt = min(timers + [inflight[0][0]] if inflight else timers)
        now = max(now, nxt)
        while inflight and inflight[0][0] <= now:
            _, wire, addr = inflight.pop(0)
            ch = [tuple((g, int(p))) for g, p in sd.groups].index(addr)
            for i, r in enumerate(receivers):
                if ch in joined[i]:
                    r.datagram_received(wire, (SRC, 4000), now)
                    drain(i, r)
        if (t := snd.get_timer(now)) is not None and t <= now:
            snd.handle_timer(now)
        for wire, addr in snd.datagrams_to_send(now):
            n += 1
            if not drop(n):
                inflight.append((now + 0.01, wire, addr))
        for i, r in enumerate(receivers):
            if (t := r.get_timer(now)) is not None and t <= now:
                r.handle_timer(now)
                drain(i, r)
    return snd, events, out


def test_receivers_recover_the_file_from_the_sender_core():
    sd, data = _session()
    rx = [ReceiverCore(sd, source=SRC, progress_interval=None) for _ in range(2)]
    snd, events, out = _transfer(sd, data, rx, drop=lambda n: n % 7 == 0)
    for r, ev, o in zip(rx, events, out):
        assert r.file.complete and bytes(o) == data
        assert isinstance(ev[0], Join) and ev[0].channel == 0  # start joins the base group
        assert sum(isinstance(e, Join) for e in ev) > 1  # and climbs
        assert isinstance(ev[-1], Recovered)
        assert r.get_timer(ev[-1].at) is None  # done: no timer
        m = r.metrics(ev[-1].at)
        assert m.loss > 0 and m.gput > 0


def test_receiver_drops_foreign_source_and_garbage_without_raising():
    sd, data = _session()
    r = ReceiverCore(sd, source=SRC)
    r.start(0.0)
    assert r.next_event() == Join(0)
    snd = _sender(sd, data, quantum=0.0)
    snd.start(0.0)
    snd.handle_timer(0.0)
    wire, _ = snd.datagrams_to_send(1.0)[0]
    r.datagram_received(wire, ("10.9.9.9", 4000), 0.1)
    r.datagram_received(b"\x00" * 5, (SRC, 4000), 0.1)
    assert (r.foreign_source, r.rejected, r.packets) == (1, 1, 0)
    r.datagram_received(wire, (SRC, 4000), 0.1, channel=1 if codec.decode(wire).group == 0
                        else 0)
    assert r.wrong_group == 1


def test_receiver_idle_timeout_is_its_timer():
    sd, _ = _session()
    r = ReceiverCore(sd, source=SRC, progress_interval=None, where="lo")
    r.start(10.0)
    now = 10.0
    while not r.done:
        t = r.get_timer(now)
        assert t is not None and t >= now
        now = t
        r.handle_timer(now)
    assert now == pytest.approx(10.0 + r.idle_timeout)
    evs = []
    while (e := r.next_event()) is not None:
        evs.append(e)
    assert isinstance(evs[-1], SessionEnded) and evs[-1].reason is EndReason.IDLE
    assert "no packet of this session arrived" in evs[-1].text and "lo" in evs[-1].text


def test_close_session_flag_ends_the_session_after_the_grace():
    sd, data = _session(size=2_000_000)
    r = ReceiverCore(sd, source=SRC, progress_interval=None)
    r.start(0.0)
    snd = _sender(sd, data, quantum=0.0)
    snd.start(0.0)
    snd.handle_timer(0.0)
    for wire, _ in snd.datagrams_to_send(0.05):
        r.datagram_received(wire, (SRC, 1), 0.06)
    r.handle_timer(0.06)
    for wire, _ in snd.close_packets():
        r.datagram_received(wire, (SRC, 1), 0.07)
    assert r.closed and r.get_timer(0.07) <= 0.07 + CLOSE_GRACE
    now = 0.07
    while not r.done:
        now = r.get_timer(now)
        r.handle_timer(now)
    assert r.end_reason is EndReason.CLOSED and math.isclose(now, 0.07 + CLOSE_GRACE)


async def test_the_socket_drivers_pump_the_same_cores(tmp_path):
    """On loopback, MulticastSender/MulticastReceiver run SenderCore/ReceiverCore
    through deliverykit.aio.CoreDriver: the receiver's timers are the core's."""
    import asyncio
    import os
    import secrets

    from deliverykit.aio import CoreDriver
    from m2c.aio.driver import MulticastReceiver, MulticastSender, make_session

    src = tmp_path / "src.bin"
    src.write_bytes(os.urandom(80_000))
    sd = make_session(str(src), group=f"239.186.{1 + secrets.randbelow(250)}.1",
                      port=30000 + 100 * secrets.randbelow(300), min_rate=30.0,
                      max_rate=3000.0, tsd=0.5, k=2)
    snd = MulticastSender(sd, str(src))
    rx = MulticastReceiver(sd, str(tmp_path / "out"))
    assert isinstance(snd.core, SenderCore) and isinstance(rx.core, ReceiverCore)
    stop = asyncio.Event()
    task = asyncio.create_task(snd.send(duration=30, stop=stop))
    try:
        res = await rx.receive(timeout=25)
    finally:
        stop.set()
        sent = await task
    assert res.ok, res.end
    assert (tmp_path / "out").read_bytes() == src.read_bytes()
    assert isinstance(rx._driver, CoreDriver) and rx._driver.stats["timers"] > 0
    assert rx._driver.stats["core_errors"] == 0
    assert res.joins == rx.core.joins >= 2 and res.trace == list(rx.core.trace)
    assert sent.packets == snd.core.sent + 3  # and the 3 close-session packets


def test_stream_cores_carry_buffers_without_sockets():
    """The sequencer API's cores (m2c/core/stream.py): buffers sent through
    StreamSenderCore come out of StreamReceiverCore as BufferReady events; the
    asyncio StreamSender/StreamReceiver are built on them."""
    from m2c.aio.stream import StreamReceiver, StreamSender
    from m2c.core.events import BufferReady
    from m2c.core.groups import WaveSchedule
    from m2c.core.stream import StreamReceiverCore, StreamSenderCore

    s = WaveSchedule(30.0, 1500.0, tsd=0.5, k=2)
    groups = [(f"239.1.1.{1 + i}", 5000 + i) for i in range(s.channels + 1)]
    tx = StreamSenderCore(s, groups, 9, pdu_size=100, quantum=0.0)
    rx = StreamReceiverCore(s, 9, source=SRC)
    assert is_datagram_core(tx) and is_datagram_core(rx)
    assert isinstance(StreamSender(s, groups, 9).core, StreamSenderCore)
    assert isinstance(StreamReceiver(s, groups, 9, print).core, StreamReceiverCore)
    tx.start(0.0)
    rx.start(0.0)
    joined: set[int] = set()
    got: list[BufferReady] = []

    def drain():
        while (e := rx.next_event()) is not None:
            if isinstance(e, Join):
                joined.add(e.channel)
            elif isinstance(e, Leave):
                joined.discard(e.channel)
            elif isinstance(e, BufferReady):
                got.append(e)

    drain()
    assert joined == {0}
    now = 0.0
    for i in range(12):
        cap = tx.seq.capacity(0.5)
        assert tx.send(bytes([i]) * (cap * 100), 0.5) > 0
        end = tx.window_end()
        for _ in range(100_000):  # a safety bound
            timers = [t for t in (tx.get_timer(now), rx.get_timer(now)) if t is not None]
            nxt = min(timers) if timers else end
            if nxt >= end:
                break
            now = max(now, nxt)
            for wire, addr in tx.datagrams_to_send(now):
                ch = groups.index(addr)
                if ch in joined:
                    rx.datagram_received(wire, (SRC, 1), now + 0.005, channel=ch)
                    drain()
            if (t := rx.get_timer(now)) is not None and t <= now:
                rx.handle_timer(now)
                drain()
        now = end
    rx.stop()
    drain()
    assert not joined  # stop leaves every group
    late = [b for b in got if b.buffer_id >= 6]
    assert late and all(len(b.prefix) > 0 and set(b.prefix) == {b.buffer_id} for b in late)
    assert max(len(joined_b.prefix) for joined_b in late) > 100  # more than the base group


def test_a_timer_run_at_its_deadline_always_moves_the_deadline_on():
    """Float sums: (0.7 + 0.1) - 0.7 < 0.1.  A receiver started at 0.7 with 0.1 s
    progress reports and idle timeout must act at the deadline it asked for, not
    ask for the same instant again (the simulator would stop it as stuck)."""
    assert (0.7 + 0.1) - 0.7 < 0.1
    sd, _ = _session()
    r = ReceiverCore(sd, source=SRC, idle_timeout=0.1, slot_timeout=0.1,
                     progress_interval=0.1)
    r.start(0.7)
    now = 0.7
    for _ in range(100):
        if r.done:
            break
        t = r.get_timer(now)
        assert t is not None and t >= now
        now = t
        r.handle_timer(now)
        nxt = r.get_timer(now)
        assert r.done or nxt > now, "asked for the same instant again"
    assert r.done and r.end_reason is EndReason.IDLE


@pytest.mark.parametrize("t0", [0.7, 1000.3, 12345.678901, 86400.1])
def test_the_senders_act_at_every_deadline_they_ask_for(t0):
    """At the deadline get_timer gave, the sender sends or sequences: it never asks
    for the same instant again with nothing done (float: t0 + due vs now - t0)."""
    from m2c.core.groups import WaveSchedule
    from m2c.core.stream import StreamSenderCore

    sd, data = _session()
    s = WaveSchedule(30.0, 1500.0, tsd=0.5, k=2)
    groups = [(f"239.1.1.{1 + i}", 5000 + i) for i in range(s.channels + 1)]
    stream = StreamSenderCore(s, groups, 1, pdu_size=100, quantum=0.0)
    stream.start(t0)
    stream.send(b"x" * 100 * stream.seq.capacity(1.0), 1.0)
    for core in (_sender(sd, data, quantum=0.0), stream):
        if isinstance(core, SenderCore):
            core.start(t0)
        now, sent = t0, 0
        for _ in range(3000):
            t = core.get_timer(now)
            if t is None:
                break
            assert t >= now
            now = t
            horizon = getattr(core, "_horizon", None)
            core.handle_timer(now)
            sequenced = getattr(core, "_horizon", None) != horizon  # one buffer per run
            out = core.datagrams_to_send(now)
            sent += len(out)
            nxt = core.get_timer(now)
            assert out or sequenced or nxt is None or nxt > now, f"nothing done at {now!r}"
        assert sent > 100
