"""The sharing machine's disk store: the protocol a store meets, and the simulator's in memory.

:class:`DiskStore` is what :class:`~vmc.core.machine.SharingMachine` asks of a store (the
proxy's :class:`vmc.aio.spill.DiskStore` keeps anonymous files; :class:`MemoryDisk` keeps bytes,
for the simulator); a copy is read back through :class:`Readable`. Re-exported by
:mod:`vmc.core.machine`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from vmc.core.session import DiskCopy

__all__ = ["DiskStore", "Evictable", "MemoryCopy", "MemoryDisk", "Readable"]


class Readable(DiskCopy, Protocol):
    """A disk copy the machine reads back (:class:`MemoryCopy`; the proxy's ``SpillFile``)."""

    @property
    def written(self) -> int:
        """Bytes ``[0, written)`` are on the copy."""

    def read(self, first: int, end: int) -> bytes:
        """Bytes ``[first, min(end, written))``."""


@runtime_checkable
class Evictable(Protocol):
    """A copy its store may evict under pressure (the proxy's ``SpillFile``): the machine
    says when it may (no reader left) and hears when it was (the object is forgotten)."""

    can_evict: Callable[[], bool]
    on_evict: Callable[[], None]


class DiskStore(Protocol):
    """Where bodies go to disk (:class:`MemoryDisk`; :class:`vmc.aio.spill.DiskStore`)."""

    def open(self, length: int) -> Any:
        """A :class:`Readable` copy for an object of ``length`` bytes, or None."""

    def finished(self, copy: Any) -> None:
        """``copy`` holds a whole object kept for reuse (evicted least recently used first)."""

    def touch(self, copy: Any) -> None:
        """``copy`` was just used."""


class MemoryDisk:
    """A disk store in memory, ``budget`` bytes at most (the simulator's; the proxy has files)."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.reserved = 0

    def open(self, length: int) -> MemoryCopy | None:
        if length <= 0 or self.reserved + length > self.budget:
            return None
        self.reserved += length
        return MemoryCopy(self, length)

    def finished(self, copy: Any) -> None:
        """Nothing to do: a whole copy stays until closed (the simulator's store never evicts)."""

    def touch(self, copy: Any) -> None:
        """Nothing to do (no eviction order)."""


@dataclass(eq=False)
class MemoryCopy:
    """One object's body in a :class:`MemoryDisk`, written in order from 0 (a :class:`DiskCopy`)."""

    store: MemoryDisk
    length: int
    data: bytearray = field(default_factory=bytearray)
    closed: bool = False

    @property
    def complete(self) -> bool:
        return not self.closed and len(self.data) == self.length

    def holds(self, first: int) -> bool:
        return not self.closed and 0 <= first < len(self.data)

    @property
    def written(self) -> int:
        return len(self.data)

    def write(self, offset: int, chunk: bytes) -> bool:
        if self.closed or offset != len(self.data):
            return False
        self.data += chunk
        return True

    def read(self, first: int, end: int) -> bytes:
        return bytes(self.data[first : min(end, len(self.data))])

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.store.reserved -= self.length
            self.data = bytearray()
