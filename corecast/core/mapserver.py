"""Map-server and map-resolver (RFC 9301 sections 5.6-5.8, 8.2-8.4).

* Map-Register: every record must fall inside the prefixes configured for one
  site; the authentication data is checked with that site's pre-shared key
  (HMAC-SHA-1-96, HMAC-SHA-256-128, HMAC-SHA-256-128+HKDF-SHA256).  A bad MAC,
  an unknown site or algorithm, or a replayed nonce is refused and counted.
  Accepted registrations are kept for the record TTL when the T-bit is set,
  otherwise 3 minutes (section 8.2).  With the M-bit a Map-Notify carrying the
  same records, re-authenticated, goes to UDP port 4342 of the sender.
* Replay (section 5.6): with the I-bit (xTR-ID present) the nonce must increase
  per (xTR-ID, site, key); without it (RFC 6833 senders use random nonces) an
  exact repeat of the last nonce from the same source is refused.
* Map-Request, plain or inside an ECM (section 5.8): answered from the
  registrations by longest-prefix match (a proxy Map-Reply, A-bit clear); with
  no match a Negative Map-Reply, action Natively-Forward, 15-minute TTL, for
  the least-specific prefix that covers the EID and no registered prefix
  (sections 8.3, 8.4).  Replies go to the first ITR-RLOC of the request's
  family, at the request's source port.  Probes (P-bit) are dropped.

Registrations without the P-bit (section 8.3): the Map-Request is forwarded as
an ECM to the first registered locator's port 4342 and the ETR answers the ITR
itself (:meth:`corecast.core.register.Registrar.answer`).  A Map-Request with
several EID records is answered record by record: each record whose
registration asked for no proxy service goes to its ETR in its own
single-record Map-Request (same nonce), and the other records are answered
together in one proxy Map-Reply.

Instance IDs (RFC 9300 section 8, RFC 8060 section 4.1): registrations are
keyed by (Instance ID, prefix), one trie per instance, and Map-Request EIDs
are looked up in the trie of their own instance; a site may register only the
instances it is configured for (``Site.iids``; refused as ``no_site``).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field, replace

from corecast.core.driven import Address, Outbox, host_port
from corecast.core.events import (
    CorecastEvent,
    OldStyleKeyId,
    RegistrationAccepted,
    RegistrationRefused,
)
from corecast.core.maptrie import PrefixTrie
from corecast.wire.constants import (
    LISP_CONTROL_PORT,
    REGISTRATION_TIMEOUT,
    Action,
    AlgorithmId,
    LispType,
)
from corecast.wire.ip import DecodeError
from corecast.wire.lispctl import (
    Ecm,
    EidRecord,
    MapRegister,
    MapReply,
    MapRequest,
    compute_auth,
    decode_control,
    ecm_unwrap,
    ecm_wrap,
    encode_ecm,
    encode_map_register,
    encode_map_reply,
    encode_map_request,
    sign,
    verify_auth,
)

Datagram = tuple[bytes, tuple[str, int]]
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True, slots=True)
class Site:
    """A LISP site allowed to register: its keys and the prefixes it may claim."""

    name: str
    keys: dict[int, bytes]  #: Key ID -> pre-shared key
    prefixes: tuple[Network, ...]
    algorithms: frozenset[int] = frozenset(
        {AlgorithmId.HMAC_SHA_1_96, AlgorithmId.HMAC_SHA_256_128,
         AlgorithmId.HMAC_SHA_256_128_HKDF_SHA256})
    iids: frozenset[int] = frozenset({0})  #: Instance IDs the site may register

    def covers(self, prefix: Network, iid: int = 0) -> bool:
        return iid in self.iids and any(
            prefix.version == p.version
            and prefix.subnet_of(p)  # type: ignore[arg-type]  # versions equal
            for p in self.prefixes)


@dataclass(slots=True)
class Registration:
    record: EidRecord
    site: str
    expires: float
    source: str
    proxy: bool = True  #: the ETR asked for proxy Map-Replies (P-bit)


@dataclass(slots=True)
class MapServer(Outbox):
    sites: list[Site]
    negative_ttl_minutes: int = 15
    notify_port: int | None = LISP_CONTROL_PORT  # None: reply to the source port
    max_nonce_keys: int = 100_000
    regs: PrefixTrie[Registration] = field(default_factory=PrefixTrie)  #: instance 0
    #: registrations of non-zero Instance IDs, one trie per instance
    iid_regs: dict[int, PrefixTrie[Registration]] = field(default_factory=dict)
    max_instances: int = 4096
    #: answer a Map-Request only at an ITR-RLOC that is the request's own source address:
    #: the ITR-RLOC field is written by the sender, so without this check anyone could aim
    #: our Map-Replies at any address (refused ones count in ``refused_itr_rloc``)
    reply_to_source_only: bool = True
    last_nonce: dict[tuple[object, ...], int] = field(default_factory=dict)
    events: list[CorecastEvent] = field(default_factory=list)
    counters: dict[str, int] = field(default_factory=lambda: {
        "registers": 0, "accepted": 0, "refused_auth": 0, "refused_no_site": 0,
        "refused_replay": 0, "refused_algorithm": 0, "malformed": 0, "notifies": 0,
        "requests": 0, "replies": 0, "negative_replies": 0, "dropped_probe": 0,
        "unexpected": 0, "forwarded": 0, "dropped_old_version": 0, "refused_itr_rloc": 0,
        "auth_old_style_key_id": 0,
    })

    _ev_read: int = field(default=0, init=False, repr=False)

    def __post_init__(self) -> None:
        self._init_outbox()  # (events wait in ``events``, handed out by next_event)

    # ------------------------------------------------------------------ DatagramCore
    # (no timer: registrations expire lazily, by their TTL, when looked up)

    def datagram_received(self, data: bytes, addr: Address, now: float) -> None:
        self._queue(self.handle(data, host_port(addr), now))

    def get_timer(self, now: float) -> float | None:
        return None

    def handle_timer(self, now: float) -> None:
        pass

    def next_event(self) -> CorecastEvent | None:
        """The oldest of :attr:`events` not yet handed out."""
        if self._ev_read >= len(self.events):
            return None
        ev = self.events[self._ev_read]
        self._ev_read += 1
        return ev

    # ------------------------------------------------------------------ entry

    def handle(self, data: bytes, src: tuple[str, int], now: float) -> list[Datagram]:
        try:
            msg = decode_control(data)
            if isinstance(msg, Ecm):
                _ip, sport, _dport, inner = ecm_unwrap(msg)
                ecm = msg
                msg = decode_control(inner)
                if not isinstance(msg, MapRequest):
                    self.counters["unexpected"] += 1
                    return []
                return self._request(msg, sport, now, ecm, src[0])
        except DecodeError:
            self.counters["malformed"] += 1
            if data[:1] and data[0] >> 4 == LispType.MAP_REGISTER:
                self.events.append(RegistrationRefused("malformed", src[0]))
            return []
        if isinstance(msg, MapRegister) and msg.msg_type == LispType.MAP_REGISTER:
            return self._register(msg, src, now)
        if isinstance(msg, MapRequest):
            return self._request(msg, src[1], now, None, src[0])
        self.counters["unexpected"] += 1
        return []

    # ------------------------------------------------------------------ register

    def _refuse(self, reason: str, src: tuple[str, int]) -> list[Datagram]:
        self.counters["refused_" + reason] += 1
        self.events.append(RegistrationRefused(reason, src[0]))
        return []

    def _register(self, msg: MapRegister, src: tuple[str, int], now: float) -> list[Datagram]:
        self.counters["registers"] += 1
        if not msg.records:
            return self._refuse("no_site", src)
        site = next((s for s in self.sites
                     if all(s.covers(r.prefix, r.iid) for r in msg.records)), None)
        if site is not None and any(r.iid and r.iid not in self.iid_regs for r in msg.records) \
                and len(self.iid_regs) >= self.max_instances:
            site = None  # bounded state: no room for another instance
        if site is None:
            return self._refuse("no_site", src)
        if msg.algorithm_id not in site.algorithms:
            return self._refuse("algorithm", src)
        psk = site.keys.get(msg.key_id)
        if psk is None:
            psk = self._old_style_key(site, msg, src)
        if psk is None or not verify_auth(msg, psk):
            return self._refuse("auth", src)
        if msg.xtr_id is not None:
            key: tuple[object, ...] = ("xtr", msg.xtr_id, msg.site_id, site.name, msg.key_id)
            last = self.last_nonce.get(key)
            if last is not None and msg.nonce <= last:
                return self._refuse("replay", src)
        else:
            key = ("src", src[0], site.name, msg.key_id)
            if self.last_nonce.get(key) == msg.nonce:
                return self._refuse("replay", src)
        if self._older_version(msg, now):
            # RFC 9302 sec. 5: "A Map-Server receiving a message with an unexpected
            # Map-Version number, for instance an old one, MUST silently drop the message."
            self.counters["dropped_old_version"] += 1
            return []
        self.last_nonce[key] = msg.nonce
        if len(self.last_nonce) > self.max_nonce_keys:  # bounded: forget the oldest source
            self.last_nonce.pop(next(iter(self.last_nonce)))
        life = REGISTRATION_TIMEOUT
        for rec in msg.records:
            if msg.use_ttl:
                life = rec.ttl * 60.0
            p = rec.prefix
            trie = self._trie(rec.iid, create=life > 0)
            if trie is None:
                continue
            if life <= 0:
                trie.remove(p.network_address.packed, p.prefixlen)
                continue
            trie.insert(p.network_address.packed, p.prefixlen,
                        Registration(rec, site.name, now + life, src[0], msg.proxy_reply))
        self.counters["accepted"] += 1
        rlocs = tuple(sorted({str(loc.locator) for r in msg.records for loc in r.locators}))
        prefixes = tuple(str(r.prefix) for r in msg.records)
        self.events.append(RegistrationAccepted(site.name, prefixes, rlocs, src[0]))
        if not msg.want_map_notify:
            return []
        notify = MapRegister(msg.nonce, msg.records, msg.key_id, msg.algorithm_id, b"",
                             LispType.MAP_NOTIFY, xtr_id=msg.xtr_id, site_id=msg.site_id)
        self.counters["notifies"] += 1
        n = len(msg.auth_data)
        body = encode_map_register(notify, compute_auth(notify, psk, n)) if n else sign(notify, psk)
        port = self.notify_port if self.notify_port is not None else src[1]
        return [(body, (src[0], port))]

    def _old_style_key(self, site: Site, msg: MapRegister, src: tuple[str, int]) -> bytes | None:
        """The site's key for a sender that writes RFC 6833's 16-bit Key ID.

        RFC 6833 sec. 4.3 had one 16-bit Key ID field whose values named the algorithm
        (1 HMAC-SHA-1-96, 2 HMAC-SHA-256-128); RFC 9301 sec. 5.6 split it into an 8-bit
        Key ID and an 8-bit Algorithm ID.  Open Overlay Router (``key-type = 1``) still
        writes ``00 01``: Key ID 0, Algorithm 1.  When Key ID 0 names no key of the site,
        the key configured under the old 16-bit value (the algorithm number, e.g. Key ID 1
        for ``key-type = 1``) is tried, else the site's only key.  The MAC must still
        verify with it.  Counted in ``auth_old_style_key_id`` and reported as an event."""
        if msg.key_id != 0:
            return None  # a new-style Key ID that names no key: nothing to reinterpret
        psk = site.keys.get(msg.algorithm_id)
        if psk is None and len(site.keys) == 1:
            psk = next(iter(site.keys.values()))
        if psk is None or not verify_auth(msg, psk):
            return None
        self.counters["auth_old_style_key_id"] += 1
        self.events.append(OldStyleKeyId(site.name, msg.algorithm_id, src[0]))
        return psk

    # ------------------------------------------------------------------ resolve

    def _older_version(self, msg: MapRegister, now: float) -> bool:
        """Does a record carry a Map-Version older than the live registration of its
        prefix (both non-null; RFC 9302 sec. 5, 6)?"""
        from corecast.core.xtr import newer

        for rec in msg.records:
            if not rec.map_version:
                continue
            trie = self._trie(rec.iid)
            if trie is None:
                continue
            reg = trie.get(rec.prefix.network_address.packed, rec.prefix.prefixlen)
            if reg is None or reg.expires <= now or not reg.record.map_version:
                continue
            if newer(reg.record.map_version, rec.map_version & 0xFFF):
                return True
        return False

    def _trie(self, iid: int, create: bool = False) -> PrefixTrie[Registration] | None:
        if not iid:
            return self.regs
        t = self.iid_regs.get(iid)
        if t is None and create:
            t = self.iid_regs[iid] = PrefixTrie()
        return t

    def _lookup(self, addr: bytes, now: float, iid: int = 0) -> Registration | None:
        trie = self._trie(iid)
        if trie is None:
            return None
        while True:
            hit = trie.lookup(addr)
            if hit is None:
                return None
            reg = hit[1]
            if reg.expires > now:
                return reg
            p = reg.record.prefix
            trie.remove(p.network_address.packed, p.prefixlen)

    def _negative_prefix(self, eid: Network, iid: int = 0) -> Network:
        """Least-specific prefix covering the EID and overlapping no registration."""
        trie = self._trie(iid)
        regs = [ipaddress.ip_network((a, p)) for a, p, _ in (trie.items() if trie else ())
                if len(a) == len(eid.network_address.packed)]
        for plen in range(eid.max_prefixlen + 1):
            cand = eid.supernet(new_prefix=plen) if plen < eid.prefixlen else eid
            if not any(cand.overlaps(r) for r in regs):
                return cand
        return eid

    def _request(self, msg: MapRequest, sport: int, now: float, ecm: Ecm | None = None,
                 src_host: str | None = None) -> list[Datagram]:
        self.counters["requests"] += 1
        if msg.probe:
            self.counters["dropped_probe"] += 1
            return []
        if not msg.itr_rlocs or not msg.eid_prefixes:
            self.counters["malformed"] += 1
            return []
        fam = msg.eid_prefixes[0].version
        itr = next((r for r in msg.itr_rlocs if r.version == fam), msg.itr_rlocs[0])
        if self.reply_to_source_only and src_host is not None:
            own = [r for r in msg.itr_rlocs if _same_host(r, src_host)]
            if not own:
                self.counters["refused_itr_rloc"] += 1
                return []
            itr = own[0]
        iids = msg.eid_iids or (0,) * len(msg.eid_prefixes)
        out: list[Datagram] = []
        records = []
        for eid, iid in zip(msg.eid_prefixes, iids):  # record by record
            reg = self._lookup(eid.network_address.packed, now, iid)
            if reg is not None and not reg.proxy and reg.record.locators:
                # section 8.3: no proxy service asked -> forward to a registered ETR
                # (this record alone), which answers the ITR itself
                addr = eid.network_address
                if ecm is not None and len(msg.eid_prefixes) == 1:
                    body = encode_ecm(ecm)
                else:
                    one = replace(msg, eid_prefixes=(eid,), eid_iids=(iid,) if iid else ())
                    src = itr.packed if itr.version == addr.version else b"\x00" * len(addr.packed)
                    body = ecm_wrap(encode_map_request(one), src, addr.packed, sport)
                self.counters["forwarded"] += 1
                out.append((body, (str(reg.record.locators[0].locator), LISP_CONTROL_PORT)))
                continue
            if reg is not None:
                r = reg.record
                locs = tuple(type(loc)(loc.locator, loc.priority, loc.weight, loc.m_priority,
                                       loc.m_weight, False, False, loc.reachable)
                             for loc in r.locators)
                records.append(EidRecord(r.prefix, locs, r.ttl, 0, False, r.map_version, iid))
            else:
                # section 8.3: inside a configured site prefix but nothing registered -> 1 min
                site_pfx = next((p for s in self.sites for p in s.prefixes
                                 if iid in s.iids and _within(eid, p)), None)
                ttl = 1 if site_pfx is not None else self.negative_ttl_minutes
                records.append(EidRecord(site_pfx or self._negative_prefix(eid, iid), (), ttl,
                                         Action.NATIVELY_FORWARD, False, 0, iid))
                self.counters["negative_replies"] += 1
        if records:
            self.counters["replies"] += 1
            reply = encode_map_reply(MapReply(msg.nonce, tuple(records)))
            out.append((reply, (str(itr), sport)))
        return out

    def registrations(self, now: float) -> list[dict[str, object]]:
        tries = [self.regs] + list(self.iid_regs.values())
        return [{"prefix": str(r.record.prefix), "site": r.site, "source": r.source,
                 "rlocs": [str(loc.locator) for loc in r.record.locators],
                 "expires_in": round(r.expires - now, 1)} | (
                     {"iid": r.record.iid} if r.record.iid else {})
                for t in tries for _a, _p, r in t.items() if r.expires > now]


def _same_host(addr: ipaddress.IPv4Address | ipaddress.IPv6Address, host: str) -> bool:
    """Is ``addr`` the address ``host`` (as recvfrom reports it; IPv4-mapped IPv6 matches too)?"""
    try:
        other = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(other, ipaddress.IPv6Address) and other.ipv4_mapped is not None:
        other = other.ipv4_mapped
    return addr == other


def _within(eid: Network, prefix: Network) -> bool:
    """``eid`` inside ``prefix``; False across address families (subnet_of would raise)."""
    if isinstance(eid, ipaddress.IPv4Network) and isinstance(prefix, ipaddress.IPv4Network):
        return eid.subnet_of(prefix)
    if isinstance(eid, ipaddress.IPv6Network) and isinstance(prefix, ipaddress.IPv6Network):
        return eid.subnet_of(prefix)
    return False
