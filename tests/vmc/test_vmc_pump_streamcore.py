"""CorePump drives any :class:`deliverykit.protocol.StreamCore`, not only the sharing core:
a small line-echo core with an idle timer on real loopback sockets; a core that raises on an
input is counted and only that connection is closed; the sharing core is a StreamCore."""

from __future__ import annotations

import asyncio
from collections.abc import Hashable
from dataclasses import dataclass

from deliverykit.protocol import StreamClose, StreamWrite, is_stream_core
from vmc.aio.pump import CorePump
from vmc.core.http import HttpSharingCore


@dataclass(frozen=True, slots=True)
class Idle:
    """A connection was closed for idleness."""

    conn: Hashable


@dataclass(frozen=True, slots=True)
class Note:
    """A core-specific output (neither a write nor a close)."""

    text: str


class LineUpper:
    """Answers every line upper-cased; closes a connection idle for ``idle`` s (its one timer);
    raises on a line b"boom" (a core bug, for the pump to contain); emits a Note per line."""

    def __init__(self, idle: float) -> None:
        self.idle = idle
        self.last: dict[Hashable, float] = {}
        self.buf: dict[Hashable, bytes] = {}
        self.out: list[object] = []
        self.events: list[object] = []
        self.taken = 0

    def connection_made(self, conn: Hashable, now: float) -> None:
        self.last[conn], self.buf[conn] = now, b""

    def data_received(self, conn: Hashable, data: bytes, now: float) -> None:
        self.last[conn] = now
        self.buf[conn] += data
        while b"\n" in self.buf[conn]:
            line, _, self.buf[conn] = self.buf[conn].partition(b"\n")
            if line == b"boom":
                raise RuntimeError("boom")
            self.out.append(StreamWrite(conn, line.upper() + b"\n"))
            self.out.append(Note(line.decode()))

    def writable(self, conn: Hashable, n: int, now: float) -> None:
        self.taken += n

    def connection_lost(self, conn: Hashable, now: float) -> None:
        self.last.pop(conn, None)
        self.buf.pop(conn, None)

    def to_send(self, now: float) -> list[object]:
        out, self.out = self.out, []
        return out

    def get_timer(self, now: float) -> float | None:
        return min((t + self.idle for t in self.last.values()), default=None)

    def handle_timer(self, now: float) -> None:
        for conn, t in list(self.last.items()):
            if t + self.idle <= now:
                del self.last[conn]
                self.out.append(StreamClose(conn))
                self.events.append(Idle(conn))

    def next_event(self) -> object | None:
        return self.events.pop(0) if self.events else None


async def _line(reader: asyncio.StreamReader) -> bytes:
    return await asyncio.wait_for(reader.readline(), 10)


async def test_the_pump_drives_another_stream_core_with_its_timer() -> None:
    core = LineUpper(idle=0.3)
    notes: list[object] = []
    pump = await CorePump(core=core, on_output=notes.append).start()
    try:
        r, w = await asyncio.open_connection(*pump.address)
        w.write(b"hello\nwor")
        await w.drain()
        assert await _line(r) == b"HELLO\n"
        w.write(b"ld\n")
        assert await _line(r) == b"WORLD\n"
        # Silent from now on: the core's timer closes the connection (EOF; 10 s safety bound).
        assert await asyncio.wait_for(r.read(), 10) == b""
        assert isinstance(core.next_event(), Idle)
        assert notes == [Note("hello"), Note("world")]
        assert core.taken == len(b"HELLO\nWORLD\n")
        assert pump.counters == {"core_errors": 0, "unhandled_outputs": 0}
        w.close()
    finally:
        await pump.close()


async def test_a_core_that_raises_costs_one_connection_not_the_pump() -> None:
    core = LineUpper(idle=30)
    pump = await CorePump(core=core).start()  # no on_output: the Notes are counted
    try:
        r1, w1 = await asyncio.open_connection(*pump.address)
        r2, w2 = await asyncio.open_connection(*pump.address)
        w1.write(b"boom\n")
        assert await asyncio.wait_for(r1.read(), 10) == b""  # that connection is closed
        w2.write(b"still\n")
        assert await _line(r2) == b"STILL\n"  # the other one is served on
        assert pump.counters["core_errors"] == 1
        assert pump.counters["unhandled_outputs"] == 1
        w1.close()
        w2.close()
    finally:
        await pump.close()


def test_the_sharing_core_is_a_stream_core() -> None:
    assert is_stream_core(HttpSharingCore())
