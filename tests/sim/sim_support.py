"""Small DatagramCores for the simulator's own tests: a recorder and timer-driven senders."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from deliverykit.sim import Host, NodeSpec, Simulation


class Recorder:
    """Records (arrival time, data, source) of every datagram; sends nothing."""

    def __init__(self) -> None:
        self.got: list[tuple[float, bytes, Any]] = []

    def datagram_received(self, data: bytes, addr: Any, now: float) -> None:
        self.got.append((now, data, addr))

    def datagrams_to_send(self, now: float) -> list[tuple[bytes, Any]]:
        return []

    def get_timer(self, now: float) -> float | None:
        return None

    def handle_timer(self, now: float) -> None:
        pass

    def next_event(self) -> object | None:
        return None


class Sender(Recorder):
    """Sends ``count`` datagrams of ``size`` bytes to ``dst``: ``burst`` of them at
    once every ``every`` seconds from its arrival (one timer, the core protocol way)."""

    def __init__(self, dst: Any, count: int, size: int, every: float = 0.0, burst: int = 0) -> None:
        super().__init__()
        self.dst, self.count, self.size, self.every = dst, count, size, every
        self.burst = burst or count
        self.left = count
        self.out: list[tuple[bytes, Any]] = []
        self.next: float | None = None

    def start(self, now: float) -> None:
        self.next = now

    def datagrams_to_send(self, now: float) -> list[tuple[bytes, Any]]:
        out, self.out = self.out, []
        return out

    def get_timer(self, now: float) -> float | None:
        return self.next if self.left else None

    def handle_timer(self, now: float) -> None:
        for _ in range(min(self.burst, self.left)):
            seq = self.count - self.left
            self.out.append((seq.to_bytes(4, "big") + bytes(self.size - 4), self.dst))
            self.left -= 1
        self.next = now + self.every


class App:
    """Application: cores from a name -> factory map; Senders start on arrival."""

    def __init__(self, factories: dict[str, Callable[[], Any]],
                 actions: Callable[[Simulation], None] | None = None) -> None:
        self.factories = factories
        self.cores: dict[str, Any] = {}

    def make_core(self, node: NodeSpec, addr: Any, sim: Simulation) -> Any:
        core = self.cores[node.name] = self.factories[node.name]()
        return core

    def on_start(self, host: Host) -> None:
        if isinstance(host.core, Sender):
            host.core.start(host.sim.now)

    def on_event(self, host: Host, event: object) -> None:
        pass

    def on_stop(self, host: Host) -> None:
        pass

    def done(self, sim: Simulation) -> bool:
        return False
