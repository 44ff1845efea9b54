"""The one core protocol's stream shape (:class:`deliverykit.protocol.StreamCore`): what it
names, what satisfies it, and that its outputs are values (frozen, comparable)."""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable

import pytest

from deliverykit.protocol import (
    DatagramCore,
    StreamClose,
    StreamCore,
    StreamWrite,
    is_datagram_core,
    is_stream_core,
)


class Echo:
    """The smallest StreamCore: echoes every stream's bytes, closes a stream on b"bye"."""

    def __init__(self) -> None:
        self.out: list[object] = []
        self.open: set[Hashable] = set()

    def connection_made(self, conn: Hashable, now: float) -> None:
        self.open.add(conn)

    def data_received(self, conn: Hashable, data: bytes, now: float) -> None:
        self.out.append(StreamWrite(conn, data))
        if data == b"bye":
            self.out.append(StreamClose(conn))

    def writable(self, conn: Hashable, n: int, now: float) -> None:
        pass

    def connection_lost(self, conn: Hashable, now: float) -> None:
        self.open.discard(conn)

    def to_send(self, now: float) -> list[object]:
        out, self.out = self.out, []
        return out

    def get_timer(self, now: float) -> float | None:
        return None

    def handle_timer(self, now: float) -> None:
        pass

    def next_event(self) -> object | None:
        return None


def test_a_stream_core_is_recognised_and_a_datagram_core_is_not_one() -> None:
    echo = Echo()
    assert is_stream_core(echo) and isinstance(echo, StreamCore)
    assert not is_datagram_core(echo)

    class OnlyDatagrams:
        def datagram_received(self, data: bytes, addr: Hashable, now: float) -> None: ...
        def datagrams_to_send(self, now: float) -> list[tuple[bytes, Hashable]]:
            return []
        def get_timer(self, now: float) -> float | None:
            return None
        def handle_timer(self, now: float) -> None: ...
        def next_event(self) -> object | None:
            return None

    assert is_datagram_core(OnlyDatagrams()) and isinstance(OnlyDatagrams(), DatagramCore)
    assert not is_stream_core(OnlyDatagrams())


def test_a_core_missing_one_method_is_not_a_stream_core() -> None:
    class NoBackPressure(Echo):
        writable = None  # type: ignore[assignment]  # breaks the Protocol on purpose

    assert is_stream_core(Echo())
    assert not is_stream_core(NoBackPressure())


def test_outputs_are_frozen_values() -> None:
    core = Echo()
    core.connection_made(1, 0.0)
    core.data_received(1, b"bye", 0.5)
    assert core.to_send(0.5) == [StreamWrite(1, b"bye"), StreamClose(1)]
    assert core.to_send(0.5) == []
    with pytest.raises(dataclasses.FrozenInstanceError):
        StreamWrite(1, b"x").data = b"y"  # type: ignore[misc]  # frozen: must raise
