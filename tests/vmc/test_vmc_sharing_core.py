"""The sans-IO sharing core (issue 19 item 2): vmc.core.sharing's decisions (admit, next_step) and
vmc.core.machine's SharingMachine, driven directly with typed inputs and the time, as the simulator
and the asyncio proxy drive them (no sockets: the core has none)."""

from __future__ import annotations

from deliverykit.protocol import DatagramCore
from vmc.core.http import Close, HttpSharingCore, Write
from vmc.core.linger import HalfClose
from vmc.core.machine import (
    Admitted,
    Detached,
    Drained,
    Fetch,
    MachineConfig,
    OriginData,
    OriginError,
    OriginHead,
    Patched,
    Request,
    Respond,
    Send,
    SharingMachine,
)
from vmc.core.reasons import NotShared
from vmc.core.session import SharedObject
from vmc.core.sharing import Admit, Sharing, Step, next_step
from vmc.core.stats import Stats

URI = "http://origin:80/obj?size=100000"
SIZE = 100_000
ETAG = b'"abc"'
HEAD = (
    (b"content-length", b"100000"),
    (b"etag", ETAG),
    (b"last-modified", b"Sat, 01 Jan 2000 00:00:00 GMT"),
)


def _drain(m: SharingMachine, now: float = 0.0) -> tuple[list, list]:
    actions = m.actions_to_send(now)
    events = []
    while (ev := m.next_event()) is not None:
        events.append(ev)
    return actions, events


def _started(cfg: MachineConfig, sent: int) -> tuple[SharingMachine, int]:
    """Client "a" started the session; ``sent`` bytes of the body have arrived."""
    m = SharingMachine(cfg)
    m.input_received(Request("a", b"GET", URI), 0.0)
    (fetch,), _ = _drain(m)
    assert isinstance(fetch, Fetch) and not fetch.ranged and fetch.uri == URI
    m.input_received(OriginHead(fetch.fetch, 200, HEAD), 0.01)
    for off in range(0, sent, 10_000):
        m.input_received(OriginData(fetch.fetch, bytes(10_000)), 0.02 + off / 1e6)
        m.input_received(Drained("a", 10_000), 0.02 + off / 1e6)
    _drain(m)
    return m, fetch.fetch


def test_machine_has_the_core_protocols_shape_with_typed_inputs() -> None:
    m = SharingMachine()
    for name in ("actions_to_send", "get_timer", "handle_timer", "next_event", "input_received"):
        assert callable(getattr(m, name))
    assert not isinstance(m, DatagramCore)  # byte streams, not datagrams: docs/vmc-sim.md says why


def test_joiner_inside_the_window_is_served_from_memory() -> None:
    m, _ = _started(MachineConfig(window=1 << 20, disk_budget=0), 40_000)
    m.input_received(Request("b", b"GET", URI), 0.1)
    actions, events = _drain(m, 0.1)
    assert Admitted("b", events[0].key, "joined", 40_000) in events
    assert not [a for a in actions if isinstance(a, Fetch)]  # nothing from the origin
    (head,) = [a for a in actions if isinstance(a, Respond)]
    assert (head.client, head.status, head.length, head.first, head.total) == (
        "b",
        200,
        SIZE,
        0,
        SIZE,
    )
    assert (b"etag", ETAG) in head.headers and (
        b"age",
        b"0",
    ) in head.headers  # a reuse says its age
    assert sum(len(a.data) for a in actions if isinstance(a, Send) and a.client == "b") == 40_000


def test_joiner_past_the_window_without_disk_patches_its_prefix_by_range() -> None:
    m, _ = _started(MachineConfig(window=10_000, disk_budget=0), 40_000)
    m.input_received(Request("b", b"GET", URI), 0.1)
    actions, events = _drain(m, 0.1)
    assert [e for e in events if isinstance(e, Patched)] == [Patched("b", events[0].key, 0, 40_000)]
    (patch,) = [a for a in actions if isinstance(a, Fetch)]
    assert (patch.first, patch.end, patch.if_range) == (0, 40_000, ETAG)
    assert m.stats.origin_requests == 2


def test_joiner_past_the_window_with_a_disk_store_reads_its_prefix_from_disk() -> None:
    m, _ = _started(MachineConfig(window=10_000, disk_budget=1 << 20), 40_000)
    m.input_received(Request("b", b"GET", URI), 0.1)
    actions, events = _drain(m, 0.1)
    assert not [e for e in events if isinstance(e, Patched)] and not [
        a for a in actions if isinstance(a, Fetch)
    ]
    assert sum(len(a.data) for a in actions if isinstance(a, Send) and a.client == "b") == 40_000


def test_a_client_that_takes_nothing_is_detached_and_the_others_go_on() -> None:
    cfg = MachineConfig(window=1 << 20, disk_budget=0, queue_limit=20_000, send_window=10_000)
    m = SharingMachine(cfg)
    m.input_received(Request("a", b"GET", URI), 0.0)
    (fetch,), _ = _drain(m)
    m.input_received(OriginHead(fetch.fetch, 200, HEAD), 0.0)
    m.input_received(Request("b", b"GET", URI), 0.0)
    _drain(m)
    for i in range(6):  # "a" drains everything, "b" nothing
        m.input_received(OriginData(fetch.fetch, bytes(10_000)), 0.1 * i)
        m.input_received(Drained("a", 10_000), 0.1 * i)
    _, events = _drain(m)
    assert [e.client for e in events if isinstance(e, Detached)] == ["b"]
    assert m.stats.detached == 1


def test_origin_break_resumes_from_the_live_edge_for_every_sharer() -> None:
    m, fid = _started(MachineConfig(window=1 << 20, disk_budget=0), 30_000)
    m.input_received(OriginError(fid, "connection reset"), 0.5)
    actions, _ = _drain(m, 0.5)
    (resume,) = [a for a in actions if isinstance(a, Fetch)]
    assert (resume.first, resume.end, resume.if_range) == (30_000, None, ETAG)
    assert m.stats.stream_retries == 1


def test_unshareable_head_is_relayed_and_the_next_request_fetches_again() -> None:
    m = SharingMachine(MachineConfig(disk_budget=0))
    m.input_received(Request("a", b"GET", URI), 0.0)
    (fetch,), _ = _drain(m)
    m.input_received(OriginHead(fetch.fetch, 200, (*HEAD, (b"cache-control", b"no-store"))), 0.0)
    _, events = _drain(m)
    assert events[0].mode == "passthrough" and m.stats.not_shared[NotShared.NO_STORE] == 1
    m.input_received(Request("b", b"GET", URI), 0.1)
    actions, _ = _drain(m)
    assert [type(a) for a in actions] == [Fetch]


def test_request_during_the_pending_head_waits_for_it_then_joins() -> None:
    m = SharingMachine(MachineConfig(join_wait=10.0))
    m.input_received(Request("a", b"GET", URI), 0.0)
    (fetch,), _ = _drain(m)
    m.input_received(Request("b", b"GET", URI), 0.001)
    assert _drain(m) == ([], []) and m.get_timer(0.001) == 10.001
    m.input_received(OriginHead(fetch.fetch, 200, HEAD), 0.002)
    _, events = _drain(m)
    assert [(e.client, e.mode) for e in events if isinstance(e, Admitted)] == [
        ("a", "origin"),
        ("b", "joined"),
    ]
    assert m.get_timer(0.002) is None


def test_admit_passes_through_what_cannot_be_shared() -> None:
    sharing = Sharing(Stats(), window=1 << 20, buffer_budget=0)
    up, host = ("origin", 80), b"origin:80"
    assert sharing.admit(b"GET", [], "k", up, host, 0.0).kind is Admit.START
    head = sharing.admit(b"HEAD", [], "k", up, host, 0.0)  # nothing live to answer it from
    assert head.kind is Admit.PASSTHROUGH and head.reason is NotShared.SHAREABLE
    auth = sharing.admit(b"GET", [(b"authorization", b"x")], "k", up, host, 0.0)
    assert auth.kind is Admit.PASSTHROUGH and auth.reason is NotShared.AUTHORIZATION
    off = Sharing(Stats(), window=1 << 20, buffer_budget=0, sharing=False)
    assert off.admit(b"GET", [], "k", up, host, 0.0).reason is NotShared.SHARING_OFF


def test_next_step_table() -> None:
    s = SharedObject("k", URI, ("origin", 80), b"/obj", [(b"host", b"origin:80")], window=10_000)
    s.take_head(
        200, list(HEAD), [], Sharing(Stats(), 1, 0).head_verdict(200, list(HEAD), 0.0), 0.0, 0.0
    )
    for _ in range(4):
        s.buffer.append(bytes(10_000))  # 40,000 received; the window holds [30,000, 40,000)
    assert next_step(s, 35_000, SIZE, 1 << 20, False) is Step.WINDOW
    assert next_step(s, 0, SIZE, 1 << 20, False) is Step.PATCH_AND_FOLLOW
    assert next_step(s, 0, SIZE, 0, False) is Step.PATCH  # no patch budget: chase the edge by Range
    assert next_step(s, 0, SIZE, 1 << 20, True) is Step.PATCH  # detached: on its own
    assert next_step(s, 40_000, SIZE, 1 << 20, False) is Step.LIVE
    s.move(s.state.__class__.FAILED, "broke")
    assert next_step(s, 40_000, SIZE, 1 << 20, False) is Step.FAILED


def test_a_body_complete_before_the_origins_end_is_kept_for_later_requests() -> None:
    # The last byte arrived and the only reader took it before the origin's end of message was
    # seen (on sockets the end comes a read later): the object is whole, so it is DONE and kept on
    # disk, not abandoned for lack of readers (found by CorePump on loopback).
    m, _ = _started(MachineConfig(window=10_000, disk_budget=1 << 20), SIZE)
    _, events = _drain(m, 0.5)
    m.input_received(Request("b", b"GET", URI), 1.0)
    actions, events = _drain(m, 1.0)
    assert not [a for a in actions if isinstance(a, Fetch)]
    assert [(e.client, e.mode) for e in events if isinstance(e, Admitted)] == [("b", "joined")]


def test_http_core_answers_garbage_with_400_and_a_close() -> None:
    core = HttpSharingCore()
    core.connection_made("c", 0.0)
    core.data_received("c", b"NOT HTTP AT ALL\r\n\r\n", 0.0)
    out = core.to_send(0.0)
    assert isinstance(out[0], Write) and out[0].data.startswith(b"HTTP/1.1 400 ")
    assert out[-1] == HalfClose("c")  # a lingering close (vmc/core/linger.py)
    core.data_received("c", b"", 0.1)  # the client's end
    assert core.to_send(0.1) == [Close("c")]


def test_http_core_passes_a_request_body_on_never_drops_it() -> None:
    # Once answered 501 (the machine had no body to pass on); now the body goes with the
    # pass-through fetch (tests/vmc/test_vmc_core_bodies.py has the rest).
    core = HttpSharingCore()
    core.connection_made("c", 0.0)
    core.data_received(
        "c", b"POST http://o:80/x HTTP/1.1\r\nHost: o:80\r\nContent-Length: 3\r\n\r\nabc", 0.0
    )
    (f,) = [o for o in core.to_send(0.0) if isinstance(o, Fetch)]
    assert f.method == b"POST" and f.body == b"abc"


def test_http_core_serves_a_get_through_the_machine() -> None:
    core = HttpSharingCore()
    core.connection_made("c", 0.0)
    core.data_received(
        "c", b"GET http://origin:80/obj?size=100000 HTTP/1.1\r\nHost: origin:80\r\n\r\n", 0.0
    )
    (fetch,) = core.to_send(0.0)
    # keyed and fetched by the proxy's normalised URI (the default port dropped)
    assert isinstance(fetch, Fetch) and fetch.uri == "http://origin/obj?size=100000"
    core.origin_received(OriginHead(fetch.fetch, 200, HEAD), 0.01)
    core.origin_received(OriginData(fetch.fetch, bytes(SIZE)), 0.02)
    core.writable("c", 1 << 20, 0.03)
    data = b"".join(o.data for o in core.to_send(0.03) if isinstance(o, Write))
    assert data.startswith(b"HTTP/1.1 200 ") and b"content-length: 100000" in data.lower()
    assert b'etag: "abc"' in data.lower()  # the origin's fields go along (its validator above all)
    assert data.endswith(bytes(1000)) and len(data.split(b"\r\n\r\n", 1)[1]) == SIZE


def test_a_kept_object_is_served_by_another_machine_from_its_copy() -> None:
    """``vmc proxy --workers``: the machine that fetched an object says it kept it (``Kept``),
    another machine adopts that copy and answers from it with no origin request; a machine
    fetching the key itself refuses the copy."""
    from vmc.core.machine import Finish, Kept, OriginEnd

    body = bytes(i % 251 for i in range(SIZE))
    cached = HEAD + ((b"cache-control", b"max-age=60"),)
    a = SharingMachine(MachineConfig())
    a.input_received(Request("a", b"GET", URI), 0.0)
    (fetch,), _ = _drain(a)
    a.input_received(OriginHead(fetch.fetch, 200, cached), 0.01)
    for off in range(0, SIZE, 10_000):
        a.input_received(OriginData(fetch.fetch, body[off:off + 10_000]), 0.02)
        a.input_received(Drained("a", 10_000), 0.02)
    a.input_received(OriginEnd(fetch.fetch), 0.03)
    kept = [x for x in _drain(a, 0.03)[0] if isinstance(x, Kept)]
    assert len(kept) == 1 and kept[0].copy.key in a.sharing.finished
    assert kept[0].copy.length == SIZE and kept[0].disk.complete

    b = SharingMachine(MachineConfig())
    assert b.adopt_finished(kept[0].copy, kept[0].disk)
    b.input_received(Request("c", b"GET", URI), 0.5)
    actions, _ = _drain(b, 0.5)
    assert not [x for x in actions if isinstance(x, Fetch)]  # nothing from the origin
    (head,) = [x for x in actions if isinstance(x, Respond)]
    assert (head.status, head.length) == (200, SIZE)
    sent = b"".join(x.data for x in actions if isinstance(x, Send))
    while not any(isinstance(x, Finish) for x in actions):
        b.input_received(Drained("c", len(sent)), 0.5)
        actions, _ = _drain(b, 0.5)
        sent += b"".join(x.data for x in actions if isinstance(x, Send))
    assert sent == body

    c = SharingMachine(MachineConfig())  # fetching it itself: keeps its own session
    c.input_received(Request("d", b"GET", URI), 0.0)
    _drain(c)
    assert not c.adopt_finished(kept[0].copy, kept[0].disk)
