"""Timeouts in the sans-IO sharing core, on its one timer (what CorePump lacked beside the
proxy, docs/vmc-sim.md): a sharer that gets no live byte for ``stall_timeout`` and a client that
takes nothing for ``client_write_timeout`` are aborted with the proxy's wording, their sessions
released; both off (0) by default, so the simulator's runs are unchanged. No sockets: the core
has none; the time is passed in."""

from __future__ import annotations

from deliverykit.protocol import StreamClose
from vmc.core.events import Abort, CancelFetch, Drained, Fetch, OriginData, OriginHead, Request
from vmc.core.http import HttpSharingCore
from vmc.core.machine import MachineConfig, SharingMachine

URI = "http://origin:80/obj?size=1000000"
HEAD = ((b"content-length", b"1000000"), (b"etag", b'"e"'))


def _start(cfg: MachineConfig) -> tuple[SharingMachine, int]:
    m = SharingMachine(cfg)
    m.input_received(Request("a", b"GET", URI), 0.0)
    (fetch,) = m.actions_to_send(0.0)
    assert isinstance(fetch, Fetch)
    m.input_received(OriginHead(fetch.fetch, 200, HEAD), 0.0)
    m.actions_to_send(0.0)
    return m, fetch.fetch


def test_a_sharer_with_no_live_byte_for_stall_timeout_is_aborted() -> None:
    m, f = _start(MachineConfig(stall_timeout=2.0, disk_budget=0))
    m.input_received(OriginData(f, bytes(1000)), 0.5)
    m.input_received(Drained("a", 1000), 0.5)
    m.actions_to_send(0.5)
    assert m.get_timer(0.5) == 2.5  # waiting on the live stream since 0.5
    m.handle_timer(2.4)
    assert m.actions_to_send(2.4) == []
    m.handle_timer(2.5)
    out = m.actions_to_send(2.5)
    (abort,) = [a for a in out if isinstance(a, Abort)]
    assert abort.client == "a"
    assert "live stream stalled: no data for 2 s at 1000/1000000" in abort.why
    assert CancelFetch(f) in out  # the only reader left: the session is abandoned
    rec = m.stats.snapshot(10)["recent"][0]
    assert "stalled" in rec["error"]
    assert m.get_timer(2.5) is None and not m.readers


def test_a_byte_of_the_live_stream_restarts_the_stall_clock() -> None:
    m, f = _start(MachineConfig(stall_timeout=2.0, disk_budget=0))
    for t in (0.5, 2.0, 3.5):
        m.input_received(OriginData(f, bytes(100)), t)
        m.input_received(Drained("a", 100), t)
        assert m.get_timer(t) == t + 2.0
    m.handle_timer(5.0)
    assert not [a for a in m.actions_to_send(5.0) if isinstance(a, Abort)]
    assert "a" in m.readers


def test_a_client_that_takes_nothing_for_client_write_timeout_is_aborted() -> None:
    cfg = MachineConfig(client_write_timeout=1.0, send_window=4096, disk_budget=0)
    m, f = _start(cfg)
    m.input_received(OriginData(f, bytes(10_000)), 0.2)  # more than the send window: never drained
    assert m.get_timer(0.2) == 1.2
    m.input_received(OriginData(f, bytes(10_000)), 0.9)  # origin bytes are not client progress
    assert m.get_timer(0.9) == 1.2
    m.handle_timer(1.2)
    out = m.actions_to_send(1.2)
    (abort,) = [a for a in out if isinstance(a, Abort)]
    assert "write stalled: no progress for 1 s" in abort.why
    assert CancelFetch(f) in out
    assert "stalled" in m.stats.snapshot(10)["recent"][0]["error"]


def test_what_the_client_takes_restarts_the_write_clock() -> None:
    cfg = MachineConfig(client_write_timeout=1.0, send_window=4096, disk_budget=0)
    m, f = _start(cfg)
    m.input_received(OriginData(f, bytes(10_000)), 0.2)
    m.input_received(Drained("a", 100), 0.8)
    assert m.get_timer(0.8) == 1.8
    m.handle_timer(1.5)
    assert not [a for a in m.actions_to_send(1.5) if isinstance(a, Abort)]


def test_both_are_off_by_default_so_the_simulators_runs_are_unchanged() -> None:
    m, f = _start(MachineConfig(disk_budget=0))
    m.input_received(OriginData(f, bytes(1_000_000 // 2)), 0.5)
    assert m.get_timer(0.5) is None


def test_an_aborted_client_connection_is_reset_not_closed_after_its_unsent_bytes() -> None:
    """A close would wait for bytes a client that does not read never takes."""
    core = HttpSharingCore(MachineConfig(client_write_timeout=1.0, disk_budget=0))
    core.connection_made(1, 0.0)
    core.data_received(1, b"GET " + URI.encode() + b" HTTP/1.1\r\nhost: origin\r\n\r\n", 0.0)
    (fetch,) = core.to_send(0.0)
    assert isinstance(fetch, Fetch)
    core.origin_received(OriginHead(fetch.fetch, 200, HEAD), 0.0)
    core.origin_received(OriginData(fetch.fetch, bytes(300_000)), 0.1)
    core.to_send(0.1)
    deadline = core.get_timer(0.1)
    assert deadline is not None
    core.handle_timer(deadline)
    out = core.to_send(deadline)
    assert StreamClose(1, abort=True) in out
