"""The resume backoff on the sharing machine's timer (the proxy waits ``resume_backoff * n`` s
before the n-th resume; the machine asked at once): a stream that broke off is resumed from its
live edge by Range + If-Range when the backoff has passed, not before; 0 (the default, the
simulator's) resumes at once as before; a session abandoned meanwhile is not resumed."""

from __future__ import annotations

from vmc.core.events import ClientGone, Fetch, OriginData, OriginError, OriginHead, Request
from vmc.core.machine import MachineConfig, SharingMachine

URI = "http://origin/obj"
HEAD = ((b"content-length", b"100000"), (b"etag", b'"e"'))


def _broken(cfg: MachineConfig) -> SharingMachine:
    m = SharingMachine(cfg)
    m.input_received(Request("a", b"GET", URI), 0.0)
    (f,) = m.actions_to_send(0.0)
    assert isinstance(f, Fetch)
    m.input_received(OriginHead(f.fetch, 200, HEAD), 0.0)
    m.input_received(OriginData(f.fetch, bytes(30_000)), 0.1)
    m.actions_to_send(0.1)
    m.input_received(OriginError(f.fetch, "reset"), 1.0)
    return m


def _fetches(m: SharingMachine, now: float) -> list[Fetch]:
    return [a for a in m.actions_to_send(now) if isinstance(a, Fetch)]


def test_a_resume_waits_for_its_backoff() -> None:
    m = _broken(MachineConfig(resume_backoff=0.5, disk_budget=0))
    assert _fetches(m, 1.0) == []
    assert m.get_timer(1.0) == 1.5
    m.handle_timer(1.4)
    assert _fetches(m, 1.4) == []
    m.handle_timer(1.5)
    (r,) = _fetches(m, 1.5)
    assert r.first == 30_000 and r.end is None and r.if_range == b'"e"'
    assert m.stats.stream_retries == 1


def test_without_backoff_the_resume_is_asked_at_once() -> None:
    m = _broken(MachineConfig(disk_budget=0))
    (r,) = _fetches(m, 1.0)
    assert r.first == 30_000


def test_a_session_abandoned_during_the_backoff_is_not_resumed() -> None:
    m = _broken(MachineConfig(resume_backoff=0.5, disk_budget=0))
    m.input_received(ClientGone("a"), 1.2)
    m.actions_to_send(1.2)
    m.handle_timer(1.5)
    assert _fetches(m, 1.5) == [] and m.get_timer(1.5) is None
