"""asyncio UDP drivers for every CoreCast role (the only code that reads a clock
or touches a socket).  Each node pumps its sans-IO core, a
:class:`deliverykit.protocol.DatagramCore`, through :class:`deliverykit.aio.CoreDriver`
(datagrams in, datagrams out, one timer at the core's own deadline); the
core's outputs are routed to the node's sockets by destination (LISP data 4341
vs control 4342, multicast, the other address family).  Per-destination counters
record what went on each link, in bytes on the wire (UDP payload + IPv4/UDP
headers), for the paper's equations 3 and 5.

No root needed: the ITR's inside interface is a UDP socket that receives whole
inner IP packets as datagram payloads (a TUN device in spirit); LISP data and
control use ordinary UDP sockets on ports 4341/4342 of each node's own
127.x address.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import ipaddress
import socket
import sys
from collections import defaultdict
from collections.abc import Callable, Collection, Sequence

from corecast.aio.http import request, serve
from corecast.core.client import Client
from corecast.core.etr import Etr
from corecast.core.itr import Itr
from corecast.core.mapserver import MapServer
from corecast.core.register import Registrar
from corecast.core.source import Source
from deliverykit.aio import CoreDriver
from deliverykit.protocol import DatagramCore, SockAddr

#: a datagram a core hands its driver, to a socket address (deliverykit.protocol.Outgoing;
#: ``(host, port)`` from every role)
Datagram = tuple[bytes, SockAddr]


def wire_overhead(host: str) -> int:
    """IP + UDP header bytes the kernel adds to a datagram sent to ``host``."""
    return 28 if ipaddress.ip_address(host).version == 4 else 48


def _canon(host: str) -> str:
    """An address as recvfrom reports it (IPv6 compressed), so set lookups match."""
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return host


class LinkCounters:
    """Packets and bytes on the wire per destination host; at most ``max_hosts``
    hosts get their own row, later ones are summed under ``"other"``."""

    def __init__(self, max_hosts: int = 4096) -> None:
        self.packets: dict[str, int] = defaultdict(int)
        self.bytes: dict[str, int] = defaultdict(int)
        self._overhead: dict[str, int] = {}
        self.max_hosts = max_hosts

    def add(self, host: str, payload_len: int) -> None:
        self.add_many(host, 1, payload_len)

    def add_many(self, host: str, packets: int, payload_bytes: int) -> None:
        """``packets`` datagrams to ``host`` carrying ``payload_bytes`` in all."""
        oh = self._overhead.get(host)
        if oh is None:
            oh = wire_overhead(host)
            if len(self._overhead) < self.max_hosts:
                self._overhead[host] = oh
            else:
                host = "other"
        self.packets[host] += packets
        self.bytes[host] += payload_bytes + packets * oh

    def snapshot(self) -> dict[str, tuple[int, int]]:
        return {h: (self.packets[h], self.bytes[h]) for h in self.packets}


class Endpoint:
    """A UDP socket pumped with recvmmsg/sendmmsg (deliverykit.aio), with the
    small transport-like surface the nodes use."""

    def __init__(self, ep) -> None:
        self.ep = ep

    def sendto(self, data: bytes, addr: SockAddr) -> None:
        self.ep.sendto(data, addr)

    def close(self) -> None:
        self.ep.close()

    def get_extra_info(self, key: str):
        return self.ep.local_addr if key == "sockname" else None

    @property
    def stats(self) -> dict:
        return self.ep.stats


async def bind(host: str, port: int, cb: Callable[[bytes, tuple], None]) -> Endpoint:
    """Bind ``host:port`` and call ``cb(data, addr)`` for every datagram."""

    def on_batch(items: list, now: float) -> None:
        for data, addr in items:
            cb(data, addr)

    return open_endpoint((host, port), on_batch)


class Router:
    """The transport a node's :class:`CoreDriver` sends through: ``send_many`` hands
    the core's datagrams to the node, which picks the socket for each."""

    __slots__ = ("route",)

    def __init__(self, route: Callable[[Sequence[Datagram]], None]) -> None:
        self.route = route

    def send_many(self, items: Sequence[Datagram]) -> None:
        self.route(items)


def open_endpoint(addr: tuple[str, int], on_batch: Callable[[list, float], None]) -> Endpoint:
    """A batched UDP endpoint on ``addr``; a busy or foreign address is one clear OSError."""
    from deliverykit.aio import open_udp

    host, port = addr
    try:
        return Endpoint(open_udp((host, port), on_batch))
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            why = "in use by another process (stop it, or choose another address or port)"
        elif exc.errno == errno.EADDRNOTAVAIL:
            why = "not an address of this host"
        else:
            why = exc.strerror or str(exc)
        raise OSError(exc.errno, f"cannot bind UDP {_hostport_text(host, port)}: {why}") from None


def _hostport_text(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


#: Node.close: how many times a task still running is cancelled, and how long
#: each round waits for it (s)
CLOSE_CANCEL_ROUNDS = 5
CLOSE_ROUND_S = 1.0


class Node:
    """Base: owned transports and core drivers, tasks, clean close."""

    def __init__(self) -> None:
        self.transports: list[Endpoint] = []
        self.drivers: list[CoreDriver] = []
        self.tasks: list[asyncio.Task] = []
        self.links = LinkCounters()
        self.send_errors = 0
        self._closed_sockets: dict[str, int] = {}

    def now(self) -> float:
        return asyncio.get_running_loop().time()

    def drive(self, core: DatagramCore, route: Callable[[Sequence[Datagram]], None],
              on_event: Callable[[object], None] | None = None) -> CoreDriver:
        """A :class:`CoreDriver` for ``core`` whose datagrams go to ``route``
        (closed with the node); :meth:`started` drains it and arms its timer."""
        router = Router(route)
        driver = CoreDriver(core, router, on_event=on_event)
        self.drivers.append(driver)
        return driver

    def started(self) -> None:
        """The sockets exist: drain every core and arm its timer."""
        for d in self.drivers:
            d.kick()

    async def close(self) -> None:
        for d in self.drivers:
            d.close()
        self.drivers.clear()
        pending = {t for t in self.tasks if not t.done()}
        # Python 3.11's asyncio.wait_for can swallow a cancellation that lands as its
        # inner await completes (gh-86296): the heartbeat loop's timed request once ran on
        # after cancel(). Timed awaits now go through deliverykit.deadline.within, and a
        # task that still goes on after cancel() is asked again, a bounded number of times
        try:
            for _ in range(CLOSE_CANCEL_ROUNDS):
                if not pending:
                    break
                for t in pending:
                    t.cancel()
                _, pending = await asyncio.wait(pending, timeout=CLOSE_ROUND_S)
            for t in self.tasks:
                if t.done():
                    with contextlib.suppress(asyncio.CancelledError):
                        await t  # a task's own failure surfaces here
            if pending:
                raise RuntimeError(f"{len(pending)} task(s) of {type(self).__name__} did not "
                                   f"stop after {CLOSE_CANCEL_ROUNDS} cancellations")
        finally:  # the sockets are closed whatever the tasks did
            for tr in self.transports:
                tr.close()
            self._closed_sockets = self.socket_stats()
            self.tasks.clear()
            self.transports.clear()

    def socket_stats(self) -> dict[str, int]:
        """Summed socket counters of every transport (kept after close): datagrams the
        kernel refused or a full buffer dropped are counted here, never lost silently."""
        out = {"rx_packets": 0, "tx_packets": 0, "tx_dropped": 0, "socket_errors": 0,
               "handler_errors": 0}
        for tr in self.transports:
            for k in out:
                out[k] += tr.stats.get(k, 0)
        if not self.transports:
            return dict(self._closed_sockets) or out
        return out

    def _sendto(self, tr: Endpoint, data: bytes, dst: SockAddr,
                count: bool) -> None:
        stats = tr.stats
        dropped = stats["tx_dropped"]
        try:
            tr.sendto(data, dst)
        except OSError:
            self.send_errors += 1
            return
        if stats["tx_dropped"] != dropped:  # the kernel refused it (counted by the endpoint)
            self.send_errors += 1
            return
        if count:
            self.links.add(dst[0], len(data))


class ItrNode(Node):
    """ITR: inside UDP socket (inner IP packets), LISP data and control sockets.

    The control socket feeds the core's ``datagram_received`` (LISP control
    only: no remote address is an inside one here); the inside socket feeds
    ``receive_batch`` (the batch fast path); the core's timer (Map-Request
    retransmissions) runs at its deadline.  ``tick`` is kept for callers: the
    cores have real deadlines now, nothing is polled."""

    def __init__(self, itr: Itr, inside: tuple[str, int], tick: float = 0.25) -> None:
        super().__init__()
        self.itr = itr
        self.inside = inside
        self.tick = tick
        self.rloc = str(ipaddress.ip_address(itr.rloc))

    async def start(self) -> None:
        self.driver = self.drive(self.itr, self._route)
        # the inside interface: a recvmmsg batch goes through Algorithm 1 in one
        # ItrTable.batch call (C fast path or its twin)
        self.t_inside = open_endpoint(self.inside, self._on_inside)
        self.t_data = await bind(self.rloc, 0, lambda d, a: None)
        self.t_ctl = open_endpoint((self.rloc, self.itr.control_port), self.driver.on_batch)
        self.itr.control_port = self.t_ctl.get_extra_info("sockname")[1]  # if 0 was asked
        self.transports += [self.t_inside, self.t_data, self.t_ctl]
        self.started()

    def _on_inside(self, items: list, now: float) -> None:
        self.itr.receive_batch(items, now)
        self.driver.kick()

    def _route(self, out: Sequence[Datagram]) -> None:
        dp = self.itr.data_port
        for data, dst in out:
            if dst[1] == dp:
                self._sendto(self.t_data, data, dst, True)
            else:
                self._sendto(self.t_ctl, data, dst, False)


class XtrNode(ItrNode):
    """xTR (:class:`corecast.core.xtr.Xtr`): the ITR's sockets plus a LISP data
    socket on ``rloc:data_port`` whose packets the ETR side decapsulates (and reads
    echo-nonce / Locator-Status-Bits from); its encapsulated packets leave from
    that socket too.  Inner packets are delivered natively (UDP payload to the
    inner destination address and port)."""

    def __init__(self, xtr, inside: tuple[str, int], data_port: int, tick: float = 0.25) -> None:
        super().__init__(xtr.itr, inside, tick)
        self.xtr = xtr
        self.data_port = data_port
        self.delivered = [0, 0]

    async def start(self) -> None:
        xtr = self.xtr
        self.driver = self.drive(xtr, self._route)
        self.t_inside = open_endpoint(self.inside, self._on_inside)
        self.t_data = open_endpoint((self.rloc, self.data_port), self._on_data)
        self.t_out = await bind(self.rloc, 0, lambda d, a: None)
        self.t_ctl = open_endpoint((self.rloc, self.itr.control_port), self.driver.on_batch)
        self.itr.control_port = self.t_ctl.get_extra_info("sockname")[1]
        self.transports += [self.t_inside, self.t_data, self.t_out, self.t_ctl]
        self.started()

    def _on_inside(self, items: list, now: float) -> None:
        self.xtr.receive_batch(items, now)
        self.driver.kick()

    def _on_data(self, items: list, now: float) -> None:
        for data, addr in items:
            self._deliver(data, addr)
        self.driver.kick()  # echo-nonce and LSB state may have moved the timer

    def _deliver(self, data: bytes, addr: tuple) -> None:
        # delivered packets go to inner (sender-chosen) addresses: summed in
        # ``delivered`` [packets, wire bytes], never a LinkCounters row per address
        # (LinkCounters rows are the LISP links to RLOCs)
        smr_port = self.xtr.smr_port
        resolver = self.itr.map_resolver
        for payload, dst in self.xtr.handle_data(data, addr, self.now()):
            if dst == resolver:  # a Map-Request (RFC 9302 sec. 7.2): from the control socket
                self._sendto(self.t_ctl, payload, dst, False)
                continue
            if dst[1] == smr_port and dst[0] == addr[0]:  # an SMR back to the sending RLOC
                self._sendto(self.t_out, payload, dst, True)
                continue
            try:
                self.t_out.sendto(payload, dst)
            except OSError:
                self.send_errors += 1
                continue
            self.delivered[0] += 1
            self.delivered[1] += len(payload) + wire_overhead(dst[0])


class EtrNode(Node):
    """ETR: LISP data socket (4341), control socket (4342) for Map-Notify, and
    an output socket for the unicast packets to clients."""

    def __init__(self, etr: Etr, rloc: str, registrar: Registrar | None = None,
                 data_port: int = 4341, control_port: int = 4342, tick: float = 0.1,
                 mcast_if: str | None = None, out6: str | None = None) -> None:
        super().__init__()
        #: local address to deliver to client EIDs of the other family than the RLOC's
        #: (default: the wildcard of that family, when the host has it)
        self.out6 = out6
        self.t_other: Endpoint | None = None
        #: local address on the intra-domain side for multicast delivery: Linux sends
        #: multicast out of the interface owning a socket's bound source address, so
        #: the group traffic needs its own socket with IP_MULTICAST_IF
        self.mcast_if = mcast_if
        self.t_mc: Endpoint | None = None
        self.etr = etr
        self.rloc = rloc
        self.registrar = registrar
        self.data_port = data_port
        self.control_port = control_port
        self.tick = tick
        self.received = LinkCounters()

    async def start(self) -> None:
        self.driver = self.drive(self.etr, self._route)
        self.t_out = await bind(self.rloc, 0, lambda d, a: None)
        self.t_data = open_endpoint((self.rloc, self.data_port), self._on_data)
        self.transports += [self.t_out, self.t_data]
        rloc_v6 = ipaddress.ip_address(self.rloc).version == 6
        other = "0.0.0.0" if rloc_v6 else (self.out6 or "::")
        try:
            self.t_other = await bind(other, 0, lambda d, a: None)
            self.transports.append(self.t_other)
        except OSError:  # that family is disabled on this host
            self.t_other = None
        if self.mcast_if is not None:
            self.t_mc = await bind(self.mcast_if, 0, lambda d, a: None)
            self.t_mc.ep.sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF,
                                         socket.inet_aton(self.mcast_if))
            self.transports.append(self.t_mc)
        if self.registrar is not None:
            reg = self.registrar
            # a Map-Request's reply goes to the ITR-RLOC the request names: only a trusted
            # one, or anyone could aim our Map-Replies at any address
            reg.allow = self._trusted_host
            # the registrar's timer sends the first Map-Register now, then at its deadlines
            self.reg_driver = self.drive(reg, self._route_control)
            self.t_ctl = open_endpoint((self.rloc, self.control_port), self.reg_driver.on_batch)
            self.transports.append(self.t_ctl)
        self.started()

    def _trusted_host(self, host: str) -> bool:
        return self.etr.trusts(ipaddress.ip_address(host).packed)

    def _route_control(self, out: Sequence[Datagram]) -> None:
        for data, dst in out:
            self._sendto(self.t_ctl, data, dst, False)

    def _on_data(self, items: list, now: float) -> None:
        for data, addr in items:
            self.received.add(addr[0], len(data))
        self.driver.on_batch(items, now)

    def _route(self, out: Sequence[Datagram]) -> None:
        for payload, dst in out:
            a = ipaddress.ip_address(dst[0])
            if self.t_mc is not None and a.is_multicast:
                tr = self.t_mc
            elif (a.version == 6) != (":" in self.rloc) and self.t_other is not None:
                tr = self.t_other
            else:
                tr = self.t_out
            self._sendto(tr, payload, dst, True)


class MapServerNode(Node):
    def __init__(self, ms: MapServer, addr: str, port: int = 4342) -> None:
        super().__init__()
        self.ms = ms
        self.addr = addr
        self.port = port
        self._old_style_noted: set[tuple[str, str]] = set()  # (site, source) already logged

    async def start(self) -> None:
        self.driver = self.drive(self.ms, self._route, on_event=self._on_event)
        self.t = open_endpoint((self.addr, self.port), self.driver.on_batch)
        self.transports.append(self.t)
        self.started()

    def _route(self, out: Sequence[Datagram]) -> None:
        for data, dst in out:
            self._sendto(self.t, data, dst, False)

    def _on_event(self, ev: object) -> None:
        """One stderr line per (site, source) whose Key ID bytes are RFC 6833's (e.g. OOR)."""
        from corecast.core.events import OldStyleKeyId

        if not isinstance(ev, OldStyleKeyId) or (ev.site, ev.source) in self._old_style_noted:
            return
        self._old_style_noted.add((ev.site, ev.source))
        key = ev.old_key_id if ev.old_key_id in self._site_keys(ev.site) else "(its only key)"
        print(f"mapserver: {ev.source} (site {ev.site}) writes RFC 6833's 16-bit Key ID "
              f"{ev.old_key_id} (Key ID 0, Algorithm {ev.old_key_id}); accepted with the site's "
              f"key {key} (counter auth_old_style_key_id)", file=sys.stderr, flush=True)

    def _site_keys(self, name: str) -> dict[int, bytes]:
        return next((s.keys for s in self.ms.sites if s.name == name), {})


class SourceNode(Node):
    """Source: paced sending, HTTP subscription service, heartbeat expiry.
    In source-as-ITR mode (``source.itr`` set) it also owns a LISP control socket."""

    def __init__(self, source: Source, addr: str, http_port: int = 0,
                 expire_every: float = 1.0) -> None:
        super().__init__()
        self.source = source
        self.addr = addr
        self.http_port = http_port
        self.expire_every = expire_every
        self.server: asyncio.AbstractServer | None = None
        self.running = asyncio.Event()
        #: join/heartbeat/leave only for the EID the request comes from (see _http)
        self.peer_must_be_eid = True
        #: requests refused because their EID was not their source address
        self.refused = 0

    async def start(self, stream: bool = True) -> None:
        """Bind, serve subscriptions and (``stream``) start pacing the channels; the
        core's timer paces the chunks, expires silent subscribers and, in
        source-as-ITR mode, retransmits Map-Requests."""
        self.source.streaming = False  # until start_streaming
        # subscriptions the application made before the node had a clock (e.g. at
        # time 0) are timed from now: the core's heartbeat deadlines are on this clock
        now = self.now()
        for ch in self.source.channels.values():
            for sub in ch.dst.values():
                sub.last_seen = max(sub.last_seen, now)
        self.t = await bind(self.addr, 0, lambda d, a: None)
        self.transports.append(self.t)
        self.driver = self.drive(self.source, self._route, on_event=self._on_event)
        itr = self.source.itr
        if itr is not None:
            self.t_ctl = open_endpoint((self.addr, itr.control_port), self.driver.on_batch)
            itr.control_port = self.t_ctl.get_extra_info("sockname")[1]
            self.transports.append(self.t_ctl)
        self.server = await serve(self.addr, self.http_port, self._http)
        self.http_port = self.server.sockets[0].getsockname()[1]
        self.started()
        if stream:
            self.start_streaming()

    def start_streaming(self) -> None:
        self.source.start_streaming(self.now())
        if self.source.next_deadline() is None:
            self.running.set()  # nothing to stream
        self.driver.kick()

    def _on_event(self, ev: object) -> None:
        from corecast.core.events import ChannelFinished

        if isinstance(ev, ChannelFinished) and self.source.next_deadline() is None:
            self.running.set()

    def _route(self, out: Sequence[Datagram]) -> None:
        itr = self.source.itr
        for data, dst in out:
            if itr is not None and itr.map_resolver is not None and dst == itr.map_resolver:
                self._sendto(self.t_ctl, data, dst, False)
            else:
                self._sendto(self.t, data, dst, True)

    async def _http(self, method: str, path: str, body: dict, peer: str = "") -> tuple[int, dict]:
        if method == "GET" and path == "/channels":
            return 200, {"channels": [
                {"eid": str(ipaddress.ip_address(c.eid)), "bitrate": c.bitrate,
                 "chunk_size": c.chunk_size, "subscribers": len(c.dst), "seq": c.seq}
                for c in self.source.channels.values()]}
        if method != "POST" or path not in ("/join", "/leave", "/heartbeat"):
            return 404, {"error": "unknown endpoint"}
        try:
            chan, eid, port = str(body["channel"]), str(body["eid"]), int(body["port"])
            if self.peer_must_be_eid and _canon(eid) != _canon(peer):
                # the stream goes to EID:port: only the EID itself may ask for it, or anyone
                # could aim the stream at any address (counted in ``refused``)
                self.refused += 1
                return 403, {"error": f"eid {eid} is not the address this request came from"}
            now = self.now()
            try:
                if path == "/join":
                    self.source.join(chan, eid, port, bool(body.get("corecast", True)), now)
                    return 200, {"ok": True, "heartbeat_timeout": self.source.heartbeat_timeout}
                if path == "/heartbeat":
                    ok = self.source.heartbeat(chan, eid, port, now)
                    return (200 if ok else 404), {"ok": ok}
                ok = self.source.leave(chan, eid, port)
                return (200 if ok else 404), {"ok": ok}
            finally:  # the subscriber deadlines moved
                self.driver.kick()
        except (KeyError, ValueError, TypeError) as exc:
            return 400, {"error": str(exc)}

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()
        await super().close()


class ClientNode(Node):
    """Client: UDP receive socket plus the HTTP join/heartbeat/leave calls."""

    def __init__(self, eid: str, port: int, client: Client | None = None,
                 accept: Collection[str] | None = ()) -> None:
        super().__init__()
        self.eid = eid
        self.port = port
        self.client = client or Client()
        self.joined: tuple | None = None
        #: called after every batch of datagrams the client took
        self.on_receive: Callable[[], None] | None = None
        #: hosts the stream may come from (the domain's ETRs; the source is added by
        #: ``join``); datagrams from anyone else are counted in ``client.rejected``.
        #: None accepts every sender (explicit opt-out).  The client core checks it.
        self.client.accept = None if accept is None else {_canon(h) for h in accept}
        #: called once per rejected host (at most 16 hosts), e.g. to print a hint
        self.on_reject: Callable[[str], None] | None = None

    @property
    def accept(self) -> set[str] | None:
        return self.client.accept

    def _on_event(self, ev: object) -> None:
        from corecast.core.events import SenderRejected

        if isinstance(ev, SenderRejected) and self.on_reject is not None:
            self.on_reject(ev.host)

    def _on(self, items: list, now: float) -> None:
        received = self.client.received
        self.driver.on_batch(items, now)
        if self.on_receive is not None and self.client.received != received:
            self.on_receive()

    async def start(self) -> None:
        self.driver = self.drive(self.client, lambda out: None, on_event=self._on_event)
        self.t = open_endpoint((self.eid, self.port), self._on)
        self.transports.append(self.t)
        self.port = self.t.get_extra_info("sockname")[1]
        self.started()

    async def join(self, source: tuple[str, int], channel: str, corecast: bool = True,
                   heartbeat: float | None = None) -> dict:
        # the source may start streaming before its answer reaches us: accept it first
        accept, host = self.accept, _canon(source[0])
        added = accept is not None and host not in accept
        if accept is not None:
            accept.add(host)
        try:
            status, body = await request(*source, "POST", "/join", {
                "channel": channel, "eid": self.eid, "port": self.port, "corecast": corecast},
                local_host=self.eid)
            if status != 200:
                raise RuntimeError(f"join refused: {status} {body}")
        except BaseException:
            if added and accept is not None:
                accept.discard(host)
            raise
        self.joined = (source, channel)
        if heartbeat:
            async def beat() -> None:
                while True:
                    await asyncio.sleep(heartbeat)
                    with contextlib.suppress(OSError, asyncio.TimeoutError):
                        await request(*source, "POST", "/heartbeat", {
                            "channel": channel, "eid": self.eid, "port": self.port},
                            local_host=self.eid)

            self.tasks.append(asyncio.create_task(beat()))
        return body

    async def leave(self) -> bool:
        if self.joined is None:
            return False
        (host, port), channel = self.joined
        status, _ = await request(host, port, "POST", "/leave", {
            "channel": channel, "eid": self.eid, "port": self.port}, local_host=self.eid)
        self.joined = None
        return status == 200
