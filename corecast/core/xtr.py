"""An xTR: ITR and ETR in one process, with the data-plane reachability
mechanisms of RFC 9300 that need both (sans-IO).

* **Instance ID first** (RFC 9300 sections 5.3, 8): a packet of another
  instance is handed to the ETR core (which drops it, ``wrong_instance``)
  before its nonce, LSBs or Map-Versions are looked at.
* **Echo-nonce** (RFC 9300 section 10.1).  To check a path, the ITR side sets
  N and E with a 24-bit random nonce on every packet it sends to that RLOC
  while in the Echo-Nonce-request state -- started by :meth:`Xtr.tick` only
  toward ETRs known to do echo-noncing (the Map-Reply E-bit, a static
  ``echo`` line, or an echo request that RLOC sent us).  The ETR side, on a
  packet with N and E set, remembers the nonce; the next packet our ITR side
  sends to that RLOC carries it back with N set and E clear.  An echoed nonce
  that matches ours ends the request state (:class:`EchoNonceVerified`); if
  packets from that RLOC keep arriving but the nonce does not come back
  before ``echo_timeout``, the RLOC is reported unreachable
  (:class:`RlocUnreachable`) and marked down in map-cache entries that have
  another locator, for ``echo_holddown`` seconds (or until an echo verifies
  it).  An xTR that receives an echo request while requesting itself
  suspends its own request for ``echo_suspend`` seconds (shorter than
  ``echo_timeout``; the deadline moves past the suspension) and echoes.
  Echo state is created only for RLOCs we send to and for echo requests,
  LRU-evicted when ``max_peers`` is reached.  Only when enabled (the RFC
  allows it in closed deployments only); a random nonce is never sent with E
  clear otherwise.
* **Map-versioning** (RFC 9302, ``map_versioning=True``, ``map_version`` =
  this site's mapping version, 1..4095): packets to an EID whose cached
  mapping has a Map-Version carry the V-bit, our version as Source and theirs
  as Dest Map-Version (never for a Null Map-Version mapping, section 6.1).
  Received: a Dest Map-Version newer than ours, the Null one, or any V-bit
  packet when our own version is Null is dropped (sections 6.1, 7.1); an
  older one is delivered and the sending ITR gets a Solicit-Map-Request with
  the D-bit naming the destination EID -- only an ITR we sent data to within
  ``recent_tx`` (60 s), at most one per ``smr_interval`` (3 s) per RLOC and
  ``smr_per_second`` in all; after ``smr_retries`` (10) SMRs its stale
  packets are dropped and SMRs slow to one per ``smr_slow_interval`` (30 s)
  (RFC 9301 sections 5.2, 6.1; RFC 9302 section 7.1).  A Source Map-Version
  newer than our cached mapping of the source EID expires that mapping so it
  is asked for again (a Map-Request to the map-resolver, rate-limited per
  EID-Prefix, the mapping kept meanwhile), an older one drops the packet
  (section 7.2).
* **Instance IDs** (RFC 9300 section 8): the ITR core puts the I-bit and IID
  in every header (none for instance 0), the ETR core decapsulates only its
  own instance; both come from ``instance_id``.
* **Locator-Status-Bits** (RFC 9300 sections 5.3, 10): with ``local_rlocs``
  given (this site's locators in the order of its mapping), every header
  carries the L-bit and one bit per local locator (all up: the site does not
  monitor its own links further).  Received LSBs (8 bits with the I-bit,
  else 32) are applied to the Locator-Set of the map-cache entry of the
  inner source EID, compared with that entry's own state: a locator whose
  bit is 0 is marked down and avoided while another is up
  (:class:`LocatorStatusChanged`).
* Events are kept in a bounded deque (``max_events``): peers drive them.

Headers toward one RLOC are changed through ``Itr.headers_by_rloc``, which
the batch fast path (C and pure) honours; datagrams come and go as in
:class:`corecast.core.itr.Itr` and :class:`corecast.core.etr.Etr`.
"""

from __future__ import annotations

import ipaddress
import random
from collections import OrderedDict, deque
from dataclasses import dataclass

from corecast._fast import Frame
from corecast.core.driven import Address, Outbox, earliest, host_port, just_after
from corecast.core.etr import Etr
from corecast.core.events import (
    CorecastEvent,
    EchoNonceVerified,
    LocatorStatusChanged,
    RlocUnreachable,
)
from corecast.core.itr import Itr
from corecast.core.mapcache import MapEntry
from corecast.wire.codec import (
    FLAG_E,
    FLAG_I,
    FLAG_L,
    FLAG_N,
    FLAG_V,
    encode_lisp_data,
    make_lisp_data,
)
from corecast.wire.ip import DecodeError, decode_ip
from corecast.wire.lispctl import MapRequest, encode_map_request

Datagram = tuple[bytes, tuple[str, int]]


@dataclass(slots=True)
class _Peer:
    """Echo-nonce state toward one remote RLOC."""

    req_nonce: int | None = None  #: our nonce while in the Echo-Nonce-request state
    req_started: float = 0.0
    req_deadline: float = 0.0
    rx_during_req: int = 0  #: packets received from it since the request started
    suspended_until: float = 0.0
    echo_back: int | None = None  #: their nonce, to echo on our next packet
    last_tx: float = -1.0
    verified_at: float = float("-inf")
    #: it sent us an echo request (N+E): it does echo-noncing itself
    echo_capable: bool = False


class Xtr(Outbox):
    """ITR + ETR with echo-nonce, instance IDs and Locator-Status-Bits.

    A :class:`deliverykit.protocol.DatagramCore` for its LISP control port (as
    :class:`~corecast.core.itr.Itr`: addresses in ``itr.inside`` send inner
    packets); the LISP data port's datagrams come in by :meth:`data_received`, the
    inside interface's batches by :meth:`receive_batch`.  Its timer: the ITR's
    Map-Request retransmissions and the echo-nonce deadlines (a request to start,
    one timing out or resuming, an RLOC's hold-down ending)."""

    def __init__(
        self,
        itr: Itr,
        etr: Etr,
        echo_nonce: bool = False,
        echo_interval: float = 10.0,
        echo_timeout: float = 3.0,
        echo_suspend: float = 1.0,
        local_rlocs: tuple[str, ...] = (),
        max_peers: int = 4096,
        seed: int | None = None,
        map_versioning: bool = False,
        map_version: int = 0,
        smr_port: int = 4342,
        max_events: int = 1024,
        echo_holddown: float = 30.0,
        smr_interval: float = 3.0,
        smr_slow_interval: float = 30.0,
        smr_retries: int = 10,
        smr_per_second: float = 100.0,
        recent_tx: float = 60.0,
    ) -> None:
        if echo_nonce and echo_suspend >= echo_timeout:
            raise ValueError("echo_suspend must be shorter than echo_timeout")
        if not 0 <= map_version <= 4095:
            raise ValueError("Map-Version must be 1..4095 (0: null; RFC 9302 sec. 5)")
        if etr.instance_id is None:
            etr.instance_id = itr.instance_id
        elif etr.instance_id != itr.instance_id:
            raise ValueError("ITR and ETR of one xTR must be in the same instance")
        self.itr = itr
        self.etr = etr
        self.iid = itr.instance_id
        self.echo_nonce = echo_nonce
        self.echo_interval = echo_interval
        self.echo_timeout = echo_timeout
        self.echo_suspend = echo_suspend
        self.max_peers = max_peers
        self.echo_holddown = echo_holddown
        self._rng = random.Random(seed) if seed is not None else random.SystemRandom()
        self.lsb = (1 << len(local_rlocs)) - 1 if local_rlocs else None
        if local_rlocs and len(local_rlocs) > (8 if self.iid else 32):
            raise ValueError("more local locators than Locator-Status-Bits")
        #: echo-nonce state per remote RLOC (LRU order; idle ones evicted first)
        self.peers: OrderedDict[bytes, _Peer] = OrderedDict()
        #: RLOCs echo-nonce declared unreachable -> when they are tried again
        self.echo_down: dict[bytes, float] = {}
        #: bounded: remote peers drive it (LSB flips, echoes); the oldest are dropped
        self.events: deque[object] = deque(maxlen=max_events)
        self.counters = {"echo_requests_started": 0, "echo_requests_received": 0,
                         "echoes_sent": 0, "echoes_verified": 0, "echo_mismatch": 0,
                         "unreachable": 0, "lsb_changes": 0, "dropped_peers": 0,
                         "v_dropped_dest_newer": 0, "v_dropped_dest_null": 0,
                         "v_dropped_null_mapping": 0, "v_dest_stale": 0, "smr_sent": 0,
                         "v_source_newer": 0, "v_dropped_source_older": 0,
                         "v_dropped_dest_stale": 0, "smr_not_recent": 0, "smr_rate_limited": 0,
                         "echo_down_cleared": 0}
        itr.lisp_header = self._header()
        self._init_outbox()
        self.map_versioning = map_versioning
        self.map_version = map_version
        self.smr_port = smr_port
        # RFC 9301 sec. 6.1 / RFC 9302 sec. 7.1 outgoing SMRs: only to RLOCs we sent
        # data to within ``recent_tx`` s, one per ``smr_interval`` per RLOC, after
        # ``smr_retries`` one per ``smr_slow_interval`` (and stale packets dropped),
        # and at most ``smr_per_second`` in all (token bucket)
        self.smr_interval = smr_interval
        self.smr_slow_interval = smr_slow_interval
        self.smr_retries = smr_retries
        self.smr_per_second = smr_per_second
        self.recent_tx = recent_tx
        self._tx: OrderedDict[bytes, float] = OrderedDict()  #: RLOC -> last data sent
        self._smr_state: OrderedDict[bytes, list[float]] = OrderedDict()  #: RLOC -> [last, count]
        self._smr_tokens = smr_per_second
        self._smr_tokens_at = float("-inf")
        if map_versioning:
            mc = itr.mapcache
            mc.header_for = self._entry_header
            for _a, _l, entry in list(mc.trie.items()):
                mc.update(entry, lisp_header=self._entry_header(entry))

    # ----------------------------------------------------------------- headers

    def _header(self, nonce: int | None = None, echo: bool = False) -> bytes:
        return encode_lisp_data(make_lisp_data(
            nonce=nonce, echo=echo, instance_id=self.iid or None, lsb=self.lsb))

    def _entry_header(self, entry: MapEntry) -> bytes | None:
        """RFC 9302 section 4: V-bit, Source Map-Version (ours) and Dest Map-Version
        (the cached mapping's); none for a Null Map-Version mapping (section 6.1)."""
        if not entry.map_version:
            return None
        return encode_lisp_data(make_lisp_data(
            map_versions=(self.map_version, entry.map_version), instance_id=self.iid or None,
            lsb=self.lsb))

    def _refresh(self, rloc: bytes, p: _Peer, now: float) -> None:
        hdrs = self.itr.headers_by_rloc
        if p.echo_back is not None:
            hdrs[rloc] = self._header(p.echo_back, echo=False)
        elif p.req_nonce is not None and now >= p.suspended_until:
            hdrs[rloc] = self._header(p.req_nonce, echo=True)
        else:
            hdrs.pop(rloc, None)

    def _peer(self, rloc: bytes, create: bool = True) -> _Peer | None:
        """The state toward ``rloc``; created only when ``create`` (an RLOC we send
        to, an echo request) -- a full table evicts its least recently used peer
        that is not waiting for an echo of ours."""
        p = self.peers.get(rloc)
        if p is not None:
            if create:
                self.peers.move_to_end(rloc)
            return p
        if not create:
            return None
        if len(self.peers) >= self.max_peers:
            victim = None
            for k, q in self.peers.items():
                if q.req_nonce is None:
                    victim = k
                    break
            if victim is None:
                self.counters["dropped_peers"] += 1
                return None
            del self.peers[victim]
            self.itr.headers_by_rloc.pop(victim, None)
            self.counters["dropped_peers"] += 1
        p = self.peers[rloc] = _Peer()
        return p

    # ----------------------------------------------------------------- ITR side

    def _sent(self, out: list[Datagram], now: float) -> list[Datagram]:
        if not out or not (self.echo_nonce or self.map_versioning):
            return out
        dp = self.itr.data_port
        seen: set[str] = {dst[0] for _d, dst in out if dst[1] == dp}
        for host in seen:
            rloc = ipaddress.ip_address(host).packed
            if self.map_versioning:  # RFC 9301 sec. 6.1: SMRs go to RLOCs we send to
                self._tx[rloc] = now
                self._tx.move_to_end(rloc)
                if len(self._tx) > self.max_peers:
                    self._tx.popitem(last=False)
            if not self.echo_nonce:
                continue
            p = self._peer(rloc)
            if p is None:
                continue
            p.last_tx = now
            if p.echo_back is not None:
                p.echo_back = None  # echoed on the packets just sent
                self.counters["echoes_sent"] += 1
                self._refresh(rloc, p, now)
        return out

    def handle_inner(self, pkt: bytes, now: float) -> list[Datagram]:
        return self._sent(self.itr.handle_inner(pkt, now), now)

    def handle_batch(self, frames: list[Frame], now: float, l2: int = 0) -> list[Datagram]:
        return self._sent(self.itr.handle_batch(frames, now, l2), now)

    def handle_control(self, data: bytes, now: float) -> list[Datagram]:
        return self._sent(self.itr.handle_control(data, now), now)

    def request_echo(self, rloc: str, now: float) -> None:
        """Enter the Echo-Nonce-request state toward ``rloc`` now."""
        r = ipaddress.ip_address(rloc).packed
        p = self._peer(r)
        if p is None:
            return
        p.req_nonce = self._rng.getrandbits(24) or 1
        p.req_started = now
        p.req_deadline = now + self.echo_timeout
        p.rx_during_req = 0
        self.counters["echo_requests_started"] += 1
        self._refresh(r, p, now)

    def tick(self, now: float) -> list[Datagram]:
        """Map-Request retransmissions, plus echo-nonce timers: start a request toward
        RLOCs we send to whose path was not verified for ``echo_interval`` -- only
        ETRs known to do echo-noncing (Map-Reply E-bit, RFC 9300 sec. 10.1, or an
        xTR that sent us an echo request itself); give up
        (unreachable) after ``echo_timeout``; resume suspended requests; try RLOCs
        declared down again after ``echo_holddown``."""
        out = self.itr.tick(now)
        if not self.echo_nonce:
            return out
        for rloc, until in list(self.echo_down.items()):
            if now >= until:
                self._clear_down(rloc)
        capable = self.itr.mapcache.echo_rlocs
        for rloc, p in list(self.peers.items()):
            if p.req_nonce is None:
                if p.last_tx >= 0 and now - p.verified_at >= self.echo_interval \
                        and now - p.last_tx < self.echo_interval \
                        and (p.echo_capable or rloc in capable):
                    self.request_echo(str(ipaddress.ip_address(rloc)), now)
                continue
            if now >= p.req_deadline:
                if p.rx_during_req:
                    self.counters["unreachable"] += 1
                    ev = RlocUnreachable(str(ipaddress.ip_address(rloc)), p.req_nonce)
                    self.events.append(ev)
                    self._event(ev)
                    self._mark_down(rloc, now)
                p.req_nonce = None
                p.verified_at = now  # not again before echo_interval
            self._refresh(rloc, p, now)
        return out

    # ----------------------------------------------------------------- DatagramCore

    def datagram_received(self, data: bytes, addr: Address, now: float) -> None:
        if addr in self.itr.inside:
            self._queue(self.handle_inner(data, now))
        else:
            self._queue(self.handle_control(data, now))

    def data_received(self, data: bytes, addr: Address, now: float) -> None:
        """A datagram on the LISP data port (:meth:`handle_data`)."""
        self._queue(self.handle_data(data, host_port(addr), now))

    def receive_batch(self, frames: list[Frame], now: float, l2: int = 0) -> None:
        """A batch from the inside interface (:meth:`handle_batch`)."""
        self._queue(self.handle_batch(frames, now, l2))

    def get_timer(self, now: float) -> float | None:
        best = self.itr.get_timer(now)
        if not self.echo_nonce:
            return best
        best = earliest(best, min(self.echo_down.values(), default=None))
        capable = self.itr.mapcache.echo_rlocs
        for rloc, p in self.peers.items():
            if p.req_nonce is not None:  # times out, or resumes after a suspension
                t = p.req_deadline if p.suspended_until <= now else \
                    min(p.req_deadline, p.suspended_until)
            elif p.last_tx >= 0 and (p.echo_capable or rloc in capable):
                # a request starts once verified_at is echo_interval old, if we sent
                # to it within echo_interval by then (see tick)
                t = max(just_after(p.verified_at + self.echo_interval), now)
                if not t - p.last_tx < self.echo_interval:
                    continue
            else:
                continue
            if best is None or t < best:
                best = t
        return best

    def handle_timer(self, now: float) -> None:
        self._queue(self.tick(now))

    def next_event(self) -> CorecastEvent | None:
        ev = super().next_event()
        return ev if ev is not None else self.itr.next_event()

    def _mark_down(self, rloc: bytes, now: float) -> None:
        self.echo_down[rloc] = now + self.echo_holddown
        mc = self.itr.mapcache
        for _a, _l, entry in list(mc.trie.items()):
            if rloc in entry.rlocs and len(entry.rlocs) > 1:
                mc.update(entry, down=entry.down | {rloc})

    def _clear_down(self, rloc: bytes) -> None:
        """Hold-down over (or the path verified): the RLOC is used again, so
        echo-nonce (and LSBs) can judge it afresh."""
        if self.echo_down.pop(rloc, None) is None:
            return
        self.counters["echo_down_cleared"] += 1
        mc = self.itr.mapcache
        for _a, _l, entry in list(mc.trie.items()):
            if rloc in entry.down:
                mc.update(entry, down=entry.down - {rloc})

    # ----------------------------------------------------------------- ETR side

    def handle_data(self, data: bytes, src: tuple[str, int] | str, now: float
                    ) -> list[Datagram]:
        """A UDP/4341 payload from ``src`` (the outer source RLOC): the Instance ID
        first (a packet of another instance is dropped with no reachability
        processing, RFC 9300 sec. 5.3, 8), then reachability bits, then the ETR
        core decapsulates and delivers."""
        host = src if isinstance(src, str) else src[0]
        packed = ipaddress.ip_address(host).packed
        if not self.etr.trusts(packed):  # no reachability state from an untrusted RLOC either
            return self.etr.handle_data(data, now, packed)
        if len(data) >= 8 and self.etr.instance_ok(data):
            flags = data[0]
            if self.echo_nonce and self.peers:
                p = self.peers.get(ipaddress.ip_address(host).packed)
                if p is not None and p.req_nonce is not None:
                    p.rx_during_req += 1  # traffic from it while we wait for the echo
            if flags & FLAG_N:
                self._on_nonce(host, flags, int.from_bytes(data[1:4], "big"), now)
            if flags & FLAG_L:
                if flags & FLAG_I:  # RFC 9300 sec. 5.3: 8 LSBs with an Instance ID
                    self._on_lsb(host, data[7], 8, data[8:])
                else:
                    self._on_lsb(host, int.from_bytes(data[4:8], "big"), 32, data[8:])
            if self.map_versioning and flags & FLAG_V and not flags & FLAG_N:
                w = int.from_bytes(data[1:4], "big")
                ok, extra = self._on_versions(host, w >> 12, w & 0xFFF, data[8:], now)
                if not ok:
                    return extra
                return extra + self.etr.handle_data(data, now, packed)
        return self.etr.handle_data(data, now, packed)

    def _on_versions(self, host: str, src_v: int, dst_v: int, inner: bytes, now: float
                     ) -> tuple[bool, list[Datagram]]:
        """RFC 9302 sections 6.1, 7.1, 7.2: (deliver?, datagrams to send)."""
        c = self.counters
        if not self.map_version:
            c["v_dropped_null_mapping"] += 1
            return False, []
        if not dst_v:
            c["v_dropped_dest_null"] += 1
            return False, []
        try:
            ip = decode_ip(inner)
        except DecodeError:
            return True, []  # the ETR core counts it
        out: list[Datagram] = []
        if dst_v == self.map_version:
            if self._smr_state:
                self._smr_state.pop(ipaddress.ip_address(host).packed, None)
        else:
            if newer(dst_v, self.map_version):
                c["v_dropped_dest_newer"] += 1
                return False, []
            c["v_dest_stale"] += 1  # their mapping of us is old: solicit a new Map-Request
            if not self._stale_dest(host, ip.dst, now, out):
                c["v_dropped_dest_stale"] += 1
                return False, out
        if src_v:
            hit = self.itr.mapcache.trie.lookup(ip.src)
            if hit is not None and hit[1].map_version and src_v != hit[1].map_version:
                entry = hit[1]
                if newer(src_v, entry.map_version):
                    # ours is stale: "A Map-Request MUST be sent ... respecting
                    # rate-limitation" (sec. 7.2); the (unauthenticated) packet does
                    # not take the mapping away meanwhile
                    c["v_source_newer"] += 1
                    out += self.itr.refresh(ip.src, now)
                else:
                    c["v_dropped_source_older"] += 1
                    return False, out
        return True, out

    def _on_nonce(self, host: str, flags: int, nonce: int, now: float) -> None:
        if not self.echo_nonce:
            return
        rloc = ipaddress.ip_address(host).packed
        # state only for echo requests; an echo (N without E) matters only to a peer
        # we are requesting from (spoofed sources create nothing)
        p = self._peer(rloc, create=bool(flags & FLAG_E))
        if p is None:
            return
        if flags & FLAG_E:  # a request: echo it on our next packet to them
            self.counters["echo_requests_received"] += 1
            p.echo_back = nonce
            p.echo_capable = True
            if p.req_nonce is not None:  # both requesting: suspend ours a while
                p.suspended_until = now + self.echo_suspend
                # the wait for our echo starts again when the request resumes
                p.req_deadline = max(p.req_deadline, p.suspended_until + self.echo_timeout)
        elif p.req_nonce is not None:
            if nonce == p.req_nonce:
                self.counters["echoes_verified"] += 1
                ev = EchoNonceVerified(host, nonce, now - p.req_started)
                self.events.append(ev)
                self._event(ev)
                p.req_nonce = None
                p.verified_at = now
                self._clear_down(rloc)
            else:
                self.counters["echo_mismatch"] += 1
        self._refresh(rloc, p, now)

    def _stale_dest(self, host: str, eid: bytes, now: float, out: list[Datagram]) -> bool:
        """A packet with an old Dest Map-Version from ``host``: maybe solicit a
        Map-Request (appended to ``out``); False when the packet is to be dropped.

        RFC 9301 sec. 6.1: SMRs only to ITRs we recently sent data to, at most one
        per ``smr_interval`` (3 s) per RLOC; sec. 5.2: the D-bit (no Map-Reply
        wanted); RFC 9302 sec. 7.1: after ``smr_retries`` SMRs the stale packets are
        dropped and SMRs slow to one per ``smr_slow_interval``; a global token bucket
        caps them all."""
        c = self.counters
        rloc = ipaddress.ip_address(host).packed
        st = self._smr_state.get(rloc)
        deliver = st is None or st[1] < self.smr_retries
        sent = self._tx.get(rloc)
        if sent is None or now - sent > self.recent_tx:
            c["smr_not_recent"] += 1
            return deliver
        if st is None:
            st = self._smr_state[rloc] = [float("-inf"), 0]
            if len(self._smr_state) > self.max_peers:
                self._smr_state.popitem(last=False)
        gap = self.smr_interval if st[1] < self.smr_retries else self.smr_slow_interval
        if now - st[0] < gap - 1e-9:
            return deliver
        self._smr_tokens = min(self.smr_per_second, self._smr_tokens + (
            now - self._smr_tokens_at) * self.smr_per_second)
        self._smr_tokens_at = now
        if self._smr_tokens < 1.0:
            c["smr_rate_limited"] += 1
            return deliver
        self._smr_tokens -= 1.0
        st[0] = now
        st[1] += 1
        c["smr_sent"] += 1
        dst = ipaddress.ip_address(eid)
        smr = MapRequest(self._rng.getrandbits(64), (ipaddress.ip_address(self.itr.rloc),),
                         (ipaddress.ip_network(f"{dst}/{dst.max_prefixlen}"),),
                         source_eid=dst, smr=True, dont_map_reply=True,
                         eid_iids=(self.iid,) if self.iid else (), source_iid=self.iid)
        out.append((encode_map_request(smr), (host, self.smr_port)))
        return deliver

    def _on_lsb(self, host: str, bits: int, width: int, inner: bytes) -> None:
        """RFC 9300 sec. 10: the LSBs describe the Locator-Set of the source EID's
        mapping (ordinal i = bit i; only ``width`` bits: 8 with an Instance ID,
        else 32, sec. 5.3).  Compared with that entry's own state, so a mapping
        installed later gets them too."""
        try:
            ip = decode_ip(inner)
        except DecodeError:
            return
        hit = self.itr.mapcache.trie.lookup(ip.src)  # the mapping of the source EID
        if hit is None:
            return
        entry = hit[1]
        down = frozenset(r for i, r in enumerate(entry.ordinals[:width])
                         if not bits >> i & 1 and r in entry.rlocs)
        if self.echo_down and len(entry.rlocs) > 1:
            down |= frozenset(r for r in entry.rlocs if r in self.echo_down)
        if down != entry.down:
            self.itr.mapcache.update(entry, down=down)
            self.counters["lsb_changes"] += 1
            self.events.append(LocatorStatusChanged(
                f"{ipaddress.ip_address(entry.prefix)}/{entry.plen}",
                tuple(sorted(str(ipaddress.ip_address(r)) for r in down))))


def newer(v2: int, v1: int) -> bool:
    """RFC 9302 section 6: is Map-Version ``v2`` newer than ``v1`` (12-bit serial
    numbers, RFC 1982 arithmetic; both non-null)?"""
    return (v2 > v1 and v2 - v1 <= 2048) or (v1 > v2 and v1 - v2 > 2048)


__all__ = ["Xtr", "newer"]
