"""Every corecast role is a deliverykit.protocol.DatagramCore with real deadlines.

Driven only through the protocol's five methods (datagram_received,
datagrams_to_send, get_timer, handle_timer, next_event), by an in-memory pump
that delivers datagrams instantly and runs each core's timer at its deadline
(the simulator and the asyncio driver do the same with links and a loop).
"""

from __future__ import annotations

import ipaddress
from collections import deque

import pytest

from corecast.core.client import Client
from corecast.core.etr import Etr
from corecast.core.events import (
    ChannelFinished,
    ClientJoined,
    ClientLeft,
    MappingInstalled,
    Registered,
    RegistrationAccepted,
    SenderRejected,
)
from corecast.core.itr import Itr
from corecast.core.mapcache import MapCache
from corecast.core.mapserver import MapServer, Site
from corecast.core.maptrie import parse_prefix
from corecast.core.register import Registrar, RegistrarConfig
from corecast.core.source import Source, pattern_media
from corecast.core.xtr import Xtr
from corecast.wire import codec as c
from corecast.wire.lispctl import MapReply, decode_control, ecm_unwrap, encode_map_reply
from deliverykit.protocol import is_datagram_core

A = ipaddress.ip_address
CC = [parse_prefix("10.255.0.0/16")]
CHAN = "10.255.0.1"
SRC_EID = "10.0.0.1"
ITR_INSIDE = ("10.0.0.254", 9341)
ITR_RLOC = "192.0.2.100"
ETR_RLOC = "192.0.2.1"
CLIENT = ("10.1.0.7", 5000)


def drive(nodes: dict[tuple[str, int], object], until: float, max_steps: int = 100_000,
          sends_from: dict[tuple[str, int], tuple[str, int]] | None = None
          ) -> tuple[list[tuple[float, object]], float]:
    """Run ``nodes`` (address -> core) in virtual time up to ``until``: datagrams
    arrive instantly at the core bound to their destination (host, port) (or to the
    core whose host matches), timers run at their deadlines; a core sends from its
    own address or the one ``sends_from`` names.  Returns the events (time, event)
    and the end time."""
    by_host = {a[0]: core for a, core in nodes.items()}
    addr_of = {id(core): (sends_from or {}).get(a, a) for a, core in nodes.items()}
    events: list[tuple[float, object]] = []
    now = 0.0
    wire: deque[tuple[bytes, tuple[str, int], tuple[str, int]]] = deque()
    for _ in range(max_steps):
        for core in nodes.values():
            while out := core.datagrams_to_send(now):  # type: ignore[attr-defined]  # any core
                wire.extend((d, addr_of[id(core)], dst) for d, dst in out)
            while (e := core.next_event()) is not None:  # type: ignore[attr-defined]  # any core
                events.append((now, e))
        if wire:
            data, src, dst = wire.popleft()
            core = nodes.get(dst) or by_host.get(dst[0])
            if core is not None:
                core.datagram_received(data, src, now)  # type: ignore[attr-defined]  # any core
            continue
        due = [(t, core) for core in nodes.values()
               if (t := core.get_timer(now)) is not None]  # type: ignore[attr-defined]  # any core
        if not due:
            return events, now
        t = min(d for d, _ in due)
        if t > until:
            return events, until
        now = max(now, t)
        for d, core in due:
            if d <= now:
                core.handle_timer(now)  # type: ignore[attr-defined]  # any core
    raise AssertionError("the cores did not settle (a timer that never moves on?)")


def chain(chunks: int | None = 20, **itr_kw) -> tuple[Source, Itr, Etr, Client]:
    """Source -> ITR -> ETR -> client, the ITR's map-cache static."""
    src = Source(SRC_EID, ITR_INSIDE, heartbeat_timeout=float("inf"))
    base = pattern_media(CHAN)
    src.add_channel(CHAN, media=(lambda s, n: base(s, n) if chunks is None or s < chunks
                                 else None))
    mc = MapCache()
    mc.load_static(f"10.1.0.0/16 {ETR_RLOC}")
    itr = Itr(ITR_RLOC, CC, mc, data_port=4341, **itr_kw)
    itr.inside.add((SRC_EID, 54341))
    etr = Etr(CC, eids=[parse_prefix("10.1.0.0/16")],
              trusted_rlocs=[parse_prefix(ITR_RLOC + "/32")])
    client = Client(accept={ETR_RLOC})
    return src, itr, etr, client


def test_every_role_is_a_datagram_core():
    src, itr, etr, client = chain()
    ms = MapServer([])
    reg = Registrar(RegistrarConfig(("10.1.0.0/16",), (ETR_RLOC,), ("192.0.2.9", 4342), b"k"))
    xtr = Xtr(Itr(ITR_RLOC, CC), Etr(CC))
    for core in (src, itr, etr, client, ms, reg, xtr):
        assert is_datagram_core(core), type(core).__name__


def test_source_to_client_through_the_protocol_only():
    src, itr, etr, client = chain(chunks=20)
    # the source sends the inner packets from its EID; the ITR takes them as inside traffic
    src.itr_inside = ITR_INSIDE
    src.join(CHAN, CLIENT[0], CLIENT[1], True, 0.0)
    nodes = {(SRC_EID, 54341): src, ITR_INSIDE: itr, (ETR_RLOC, 4341): etr, CLIENT: client}
    events, end = drive(nodes, until=10.0, sends_from={ITR_INSIDE: (ITR_RLOC, 4341)})
    assert client.received == 20 and client.stats()["lost"] == 0
    media = pattern_media(CHAN)
    got = {s: d for s, d in client.digests.items()}
    assert len(got) == 20 and media(0, 1188) != media(1, 1188)
    assert itr.counters["payload_copies"] == 20 and itr.counters["header_copies"] == 20
    assert etr.counters["unicast_out"] == 20
    kinds = [type(e) for _t, e in events]
    assert kinds[0] is ClientJoined and ChannelFinished in kinds
    # paced by the timer at the channel's rate (1,200 B at 384 kb/s: 25 ms), not polled
    assert client.first_at == 0.0 and client.last_at == pytest.approx(19 * 0.025)
    assert src.get_timer(end) is None  # finished; subscribers never time out here


def test_source_timer_is_the_next_chunk_and_the_next_expiry():
    s = Source(SRC_EID, ITR_INSIDE, heartbeat_timeout=10.0)
    assert s.get_timer(0.0) is None
    s.add_channel(CHAN, start=2.0)
    s.streaming = False
    assert s.get_timer(0.0) is None  # held until start_streaming
    s.join(CHAN, "10.1.0.1", 5000, True, 0.0)
    t = s.get_timer(0.0)
    assert t is not None and 10.0 < t < 10.001  # just after last_seen + timeout
    s.start_streaming(3.0)
    assert s.get_timer(3.0) == 3.0
    s.handle_timer(3.0)
    out = s.datagrams_to_send(3.0)
    assert [d for _p, d in out] == [ITR_INSIDE, ITR_INSIDE]  # payload + one header
    assert s.datagrams_to_send(3.0) == []
    assert s.get_timer(3.0) == pytest.approx(3.025)
    s.streaming = False
    s.heartbeat(CHAN, "10.1.0.1", 5000, 4.0)
    t = s.get_timer(4.0)
    assert t is not None and 14.0 < t < 14.001
    assert isinstance(s.next_event(), ClientJoined) and s.next_event() is None
    s.handle_timer(t)
    ev = s.next_event()
    assert isinstance(ev, ClientLeft) and ev.reason == "timeout"
    assert s.get_timer(t) is None


def test_itr_retransmits_map_requests_at_their_deadline_and_installs_the_reply():
    itr = Itr(ITR_RLOC, CC, MapCache(), map_resolver=("192.0.2.200", 4342), seed=1)
    itr.inside.add(("10.0.0.1", 1))
    assert itr.get_timer(0.0) is None
    inner = c.build_ip(A("10.0.0.1").packed, A("10.2.0.5").packed, 17,
                       c.build_udp(1000, 2000, b"x"))
    itr.datagram_received(inner, ("10.0.0.1", 1), 5.0)
    (req, dst), = itr.datagrams_to_send(5.0)
    assert dst == ("192.0.2.200", 4342)
    t = itr.get_timer(5.0)
    assert t is not None and 6.0 <= t < 6.001  # RFC 9301 5.3: once a second
    itr.handle_timer(5.5)  # early: nothing due
    assert itr.datagrams_to_send(5.5) == []
    itr.handle_timer(t)
    (req2, dst2), = itr.datagrams_to_send(t)
    assert dst2 == dst and itr.counters["map_requests_sent"] == 2
    # the Map-Reply (from anyone not inside: the control port) releases the packet
    _ip, _sport, _d, inner_req = ecm_unwrap(decode_control(req2))
    nonce = decode_control(inner_req).nonce
    from corecast.wire.lispctl import EidRecord, LocatorRecord

    rec = EidRecord(ipaddress.ip_network("10.2.0.0/16"),
                    (LocatorRecord(A("192.0.2.2"), 1, 100, 255, 0, True, False, True),), 1)
    itr.datagram_received(encode_map_reply(MapReply(nonce, (rec,))), ("192.0.2.200", 4342), t)
    (enc, to), = itr.datagrams_to_send(t)
    assert to == ("192.0.2.2", 4341) and enc.endswith(inner)
    assert isinstance(itr.next_event(), MappingInstalled)
    assert itr.get_timer(t) is None


def test_itr_control_port_never_forwards_an_inner_packet():
    """Only the inside addresses send packets to forward: the same packet from a
    remote on the control port is a malformed control message, counted and dropped."""
    mc = MapCache()
    mc.load_static(f"10.1.0.0/16 {ETR_RLOC}")
    itr = Itr(ITR_RLOC, CC, mc)
    inner = c.build_ip(A("10.0.0.1").packed, A("10.1.0.5").packed, 17,
                       c.build_udp(1000, 2000, b"x"))
    itr.datagram_received(inner, ("198.51.100.7", 4342), 0.0)
    assert itr.datagrams_to_send(0.0) == [] and itr.counters["drop_malformed"] == 1
    itr.inside.add(("10.0.0.1", 1))
    itr.datagram_received(inner, ("10.0.0.1", 1), 0.0)
    assert [d for _p, d in itr.datagrams_to_send(0.0)] == [(ETR_RLOC, 4341)]


def test_registration_runs_on_the_registrars_timer():
    key = b"secret"
    ms = MapServer([Site("s1", {0: key}, (ipaddress.ip_network("10.1.0.0/16"),))])
    reg = Registrar(RegistrarConfig(("10.1.0.0/16",), (ETR_RLOC,), ("192.0.2.9", 4342), key,
                                    interval=60.0))
    nodes = {("192.0.2.9", 4342): ms, (ETR_RLOC, 4342): reg}
    events, _end = drive(nodes, until=130.0)
    kinds = [(t, type(e)) for t, e in events]
    assert (0.0, RegistrationAccepted) in kinds and (0.0, Registered) in kinds
    # re-registered every interval (60 s), by deadline
    assert [t for t, k in kinds if k is Registered] == [0.0, 60.0, 120.0]
    assert reg.get_timer(130.0) == 180.0


def test_registrar_back_off_when_nobody_answers():
    reg = Registrar(RegistrarConfig(("10.1.0.0/16",), (ETR_RLOC,), ("192.0.2.9", 4342), b"k"))
    sent = []
    now = 0.0
    for _ in range(5):
        t = reg.get_timer(now)
        assert t is not None
        now = t
        reg.handle_timer(now)
        sent += [now] * len(reg.datagrams_to_send(now))
    assert sent == [0.0, 1.0, 3.0, 7.0, 15.0]  # 1, 2, 4, 8 s back-off


def test_client_counts_and_reports_strangers_once():
    cl = Client(accept={ETR_RLOC})
    from corecast.core.source import rtp_packet

    cl.datagram_received(rtp_packet(1, 0, 1, b"m"), ("198.51.100.1", 9), 0.0)
    cl.datagram_received(rtp_packet(2, 0, 1, b"m"), ("198.51.100.1", 9), 0.0)
    cl.datagram_received(rtp_packet(3, 0, 1, b"m"), (ETR_RLOC, 40000), 0.0)
    assert cl.rejected == 2 and cl.received == 1
    assert cl.next_event() == SenderRejected("198.51.100.1") and cl.next_event() is None
    assert cl.get_timer(0.0) is None and cl.datagrams_to_send(0.0) == []


def test_xtr_echo_nonce_deadline_is_the_request_timeout():
    mc = MapCache()
    mc.load_static(f"10.1.0.0/16 {ETR_RLOC} echo")
    itr = Itr(ITR_RLOC, CC, mc)
    itr.inside.add(("10.0.0.1", 1))
    xtr = Xtr(itr, Etr(CC), echo_nonce=True, echo_interval=10.0, echo_timeout=3.0, seed=1)
    inner = c.build_ip(A("10.0.0.1").packed, A("10.1.0.5").packed, 17,
                       c.build_udp(1000, 2000, b"x"))
    xtr.datagram_received(inner, ("10.0.0.1", 1), 0.0)
    assert len(xtr.datagrams_to_send(0.0)) == 1
    t = xtr.get_timer(0.0)
    assert t == 0.0  # never verified and sent to just now: the request starts at once
    xtr.handle_timer(t)
    assert xtr.counters["echo_requests_started"] == 1
    assert xtr.get_timer(0.0) == 3.0  # then the echo's deadline
    xtr.handle_timer(3.0)  # no packet came back: not unreachable, just not verified
    assert xtr.next_event() is None
    t = xtr.get_timer(3.0)
    assert t is None or t > 3.0


def test_map_request_deadline_tracks_many_pending_eids_exactly():
    """The ITR's timer is the earliest retransmission over every pending EID (kept
    incrementally): checked against a plain scan after each step of a run with
    EIDs queued at different times, resolved, given up and held down."""
    import random

    mc = MapCache(request_interval=1.0, max_retries=2, holddown=5.0)
    itr = Itr(ITR_RLOC, CC, mc, map_resolver=("192.0.2.200", 4342), seed=3)
    itr.inside.add(("10.0.0.1", 1))
    rnd = random.Random(5)

    def scan() -> float | None:
        times = [t for p in mc.pending.values() if (t := mc._request_at(p)) is not None]
        return min(times, default=None)

    now = 0.0
    for step in range(400):
        now += rnd.choice([0.0, 0.1, 0.3, 1.0, 2.5])
        what = rnd.random()
        if what < 0.6:
            dst = A(f"10.9.{rnd.randrange(4)}.{rnd.randrange(1, 30)}").packed
            inner = c.build_ip(A("10.0.0.1").packed, dst, 17, c.build_udp(1, 2, b"x"))
            itr.datagram_received(inner, ("10.0.0.1", 1), now)
        elif what < 0.7 and mc.pending:
            eid = rnd.choice(list(mc.pending))
            mc.add(eid, 32, [(A("192.0.2.7").packed, 1, 100)], now + 60.0)
            mc.install_records([], now)  # releases what the new entry covers
        t = itr.get_timer(now)
        assert t == scan(), step
        if t is not None and t <= now + 1.0:
            now = max(now, t)
            itr.handle_timer(now)
            assert itr.get_timer(now) == scan()
        itr.datagrams_to_send(now)


async def test_itr_node_runs_its_timer_only_when_a_request_is_due():
    """On sockets (loopback): the ITR node pumps its core through CoreDriver and polls
    nothing; idle, its timer never runs; a packet to an unmapped EID sends a
    Map-Request at once and the retransmission at the core's deadline, a second
    later (RFC 9301 5.3)."""
    import asyncio
    import random
    import socket
    import time

    from corecast.aio.nodes import ItrNode
    from deliverykit.aio import CoreDriver

    b = random.randint(100, 250)
    resolver = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    resolver.bind((f"127.{b}.9.9", 0))
    resolver.setblocking(False)
    itr = Itr(f"127.{b}.9.1", CC, MapCache(), map_resolver=resolver.getsockname(),
              control_port=0, seed=1)
    node = ItrNode(itr, (f"127.{b}.9.1", 0))
    await node.start()
    loop = asyncio.get_running_loop()
    try:
        assert isinstance(node.driver, CoreDriver) and node.tasks == []
        await asyncio.sleep(0.6)
        assert node.driver.stats["timers"] == 0  # nothing pending: no wake-ups at all
        inner = c.build_ip(A("10.0.0.1").packed, A("10.2.0.5").packed, 17,
                           c.build_udp(1000, 2000, b"x"))
        sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sender.sendto(inner, node.t_inside.get_extra_info("sockname"))
        sender.close()
        arrivals = []
        deadline = time.monotonic() + 10  # safety bound only
        while len(arrivals) < 2 and time.monotonic() < deadline:
            data = await asyncio.wait_for(loop.sock_recv(resolver, 2048), 10)
            arrivals.append((time.monotonic(), data))
        assert len(arrivals) == 2 and itr.counters["map_requests_sent"] == 2
        # a second apart (RFC 9301 5.3); the bound leaves room for this reader's own lag
        assert arrivals[1][0] - arrivals[0][0] >= 0.5
        assert node.driver.stats["timers"] >= 1
    finally:
        await node.close()
        resolver.close()
