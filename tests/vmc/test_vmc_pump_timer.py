"""The pump's one loop timer and its reports of bytes taken, per request (issue 17, CPU per
request): a deadline that moves later on every input (an idle timeout) keeps the armed loop
timer instead of a new TimerHandle per input, ``handle_timer`` is still only called once the
core's deadline has passed and the idle close still happens; ``writable`` reports exactly the
bytes each client took, with many idle clients beside the busy one."""

from __future__ import annotations

import asyncio
from collections.abc import Hashable

from test_vmc_pump_streamcore import Idle, LineUpper

from vmc.aio.pump import CorePump


class Recorded(LineUpper):
    """LineUpper that records, at each ``handle_timer``, how far its own deadline was."""

    def __init__(self, idle: float) -> None:
        super().__init__(idle)
        self.early: list[float] = []
        self.fired = 0
        self.per_conn: dict[Hashable, int] = {}

    def handle_timer(self, now: float) -> None:
        self.fired += 1
        due = self.get_timer(now)
        if due is not None and due > now:
            self.early.append(due - now)
        super().handle_timer(now)

    def writable(self, conn: Hashable, n: int, now: float) -> None:
        super().writable(conn, n, now)
        self.per_conn[conn] = self.per_conn.get(conn, 0) + n


async def _line(reader: asyncio.StreamReader) -> bytes:
    return await asyncio.wait_for(reader.readline(), 10)


async def test_a_later_deadline_keeps_the_armed_timer_and_never_fires_early() -> None:
    core = Recorded(idle=0.5)
    pump = await CorePump(core=core).start()
    loop = asyncio.get_running_loop()
    armed = 0
    call_later = loop.call_later

    def counting(delay: float, cb, *args):  # type: ignore[no-untyped-def]  # same as call_later
        nonlocal armed
        armed += cb == pump._on_timer  # the pump's own timer (wait_for arms others)
        return call_later(delay, cb, *args)

    loop.call_later = counting  # type: ignore[method-assign]  # count timers
    try:
        r, w = await asyncio.open_connection(*pump.address)
        for i in range(200):  # each line moves the idle deadline later
            w.write(b"x%d\n" % i)
            assert await _line(r) == b"X%d\n" % i
        # silent from now on: the idle close comes (EOF; 10 s safety bound)
        assert await asyncio.wait_for(r.read(), 10) == b""
        assert isinstance(core.next_event(), Idle)
        assert core.early == []  # never asked to handle a deadline that had not passed
        # before: one TimerHandle per input (> 200); now re-armed only when it fires early
        assert armed < 50, armed
        w.close()
    finally:
        loop.call_later = call_later  # type: ignore[method-assign]  # restore
        await pump.close()


async def test_writable_reports_each_clients_bytes_with_idle_clients_beside() -> None:
    core = Recorded(idle=30)
    pump = await CorePump(core=core).start()
    try:
        idle = [await asyncio.open_connection(*pump.address) for _ in range(100)]
        busy = [await asyncio.open_connection(*pump.address) for _ in range(3)]
        for k, (r, w) in enumerate(busy):
            for i in range(20):
                w.write(b"c%d-%d\n" % (k, i))
                assert await _line(r) == b"C%d-%d\n" % (k, i)
        sent = {k: sum(len(b"C%d-%d\n" % (k, i)) for i in range(20)) for k in range(3)}
        taken = sorted(n for n in core.per_conn.values())
        assert taken == sorted(sent.values())
        assert core.taken == sum(sent.values())
        for _, w in idle + busy:
            w.close()
    finally:
        await pump.close()
