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

Registrations without the P-bit (section 8.3): a single-EID Map-Request is
forwarded as an ECM to the first registered locator's port 4342 and the ETR
answers the ITR itself (:meth:`corecast.core.register.Registrar.answer`);
multi-EID requests are answered by proxy.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

from corecast.core.events import RegistrationAccepted, RegistrationRefused
from corecast.core.maptrie import PrefixTrie
from corecast.wire.codec import (
    DecodeError,
    compute_auth,
    encode_map_register,
    EidRecord,
    Ecm,
    MapRegister,
    MapReply,
    MapRequest,
    decode_control,
    ecm_unwrap,
    ecm_wrap,
    encode_ecm,
    encode_map_reply,
    encode_map_request,
    sign,
    verify_auth,
)
from corecast.wire.constants import (
    LISP_CONTROL_PORT,
    REGISTRATION_TIMEOUT,
    Action,
    AlgorithmId,
    LispType,
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

    def covers(self, prefix: Network) -> bool:
        return any(prefix.version == p.version and prefix.subnet_of(p)  # type: ignore[arg-type]
                   for p in self.prefixes)


@dataclass(slots=True)
class Registration:
    record: EidRecord
    site: str
    expires: float
    source: str
    proxy: bool = True  #: the ETR asked for proxy Map-Replies (P-bit)


@dataclass(slots=True)
class MapServer:
    sites: list[Site]
    negative_ttl_minutes: int = 15
    notify_port: int | None = LISP_CONTROL_PORT  # None: reply to the source port
    max_nonce_keys: int = 100_000
    regs: PrefixTrie[Registration] = field(default_factory=PrefixTrie)
    last_nonce: dict[tuple, int] = field(default_factory=dict)
    events: list = field(default_factory=list)
    counters: dict[str, int] = field(default_factory=lambda: {
        "registers": 0, "accepted": 0, "refused_auth": 0, "refused_no_site": 0,
        "refused_replay": 0, "refused_algorithm": 0, "malformed": 0, "notifies": 0,
        "requests": 0, "replies": 0, "negative_replies": 0, "dropped_probe": 0,
        "unexpected": 0, "forwarded": 0,
    })

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
                return self._request(msg, sport, now, ecm)
        except DecodeError:
            self.counters["malformed"] += 1
            if data[:1] and data[0] >> 4 == LispType.MAP_REGISTER:
                self.events.append(RegistrationRefused("malformed", src[0]))
            return []
        if isinstance(msg, MapRegister) and msg.msg_type == LispType.MAP_REGISTER:
            return self._register(msg, src, now)
        if isinstance(msg, MapRequest):
            return self._request(msg, src[1], now)
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
                     if all(s.covers(r.prefix) for r in msg.records)), None)
        if site is None:
            return self._refuse("no_site", src)
        psk = site.keys.get(msg.key_id)
        if msg.algorithm_id not in site.algorithms:
            return self._refuse("algorithm", src)
        if psk is None or not verify_auth(msg, psk):
            return self._refuse("auth", src)
        if msg.xtr_id is not None:
            key: tuple = ("xtr", msg.xtr_id, msg.site_id, site.name, msg.key_id)
            last = self.last_nonce.get(key)
            if last is not None and msg.nonce <= last:
                return self._refuse("replay", src)
        else:
            key = ("src", src[0], site.name, msg.key_id)
            if self.last_nonce.get(key) == msg.nonce:
                return self._refuse("replay", src)
        self.last_nonce[key] = msg.nonce
        if len(self.last_nonce) > self.max_nonce_keys:  # bounded: forget the oldest source
            self.last_nonce.pop(next(iter(self.last_nonce)))
        life = REGISTRATION_TIMEOUT
        for rec in msg.records:
            if msg.use_ttl:
                life = rec.ttl * 60.0
            p = rec.prefix
            if life <= 0:
                self.regs.remove(p.network_address.packed, p.prefixlen)
                continue
            self.regs.insert(p.network_address.packed, p.prefixlen,
                             Registration(rec, site.name, now + life, src[0], msg.proxy_reply))
        self.counters["accepted"] += 1
        rlocs = tuple(sorted({str(loc.locator) for r in msg.records for loc in r.locators}))
        self.events.append(RegistrationAccepted(site.name, tuple(str(r.prefix) for r in msg.records),
                                                rlocs, src[0]))
        if not msg.want_map_notify:
            return []
        notify = MapRegister(msg.nonce, msg.records, msg.key_id, msg.algorithm_id, b"",
                             LispType.MAP_NOTIFY, xtr_id=msg.xtr_id, site_id=msg.site_id)
        self.counters["notifies"] += 1
        n = len(msg.auth_data)
        body = encode_map_register(notify, compute_auth(notify, psk, n)) if n else sign(notify, psk)
        port = self.notify_port if self.notify_port is not None else src[1]
        return [(body, (src[0], port))]

    # ------------------------------------------------------------------ resolve

    def _lookup(self, addr: bytes, now: float) -> Registration | None:
        while True:
            hit = self.regs.lookup(addr)
            if hit is None:
                return None
            reg = hit[1]
            if reg.expires > now:
                return reg
            p = reg.record.prefix
            self.regs.remove(p.network_address.packed, p.prefixlen)

    def _negative_prefix(self, eid: Network) -> Network:
        """Least-specific prefix covering the EID and overlapping no registration."""
        regs = [ipaddress.ip_network((a, p)) for a, p, _ in self.regs.items()
                if len(a) == len(eid.network_address.packed)]
        for plen in range(0, eid.max_prefixlen + 1):
            cand = eid.supernet(new_prefix=plen) if plen < eid.prefixlen else eid
            if not any(cand.overlaps(r) for r in regs):  # type: ignore[arg-type]
                return cand
        return eid

    def _request(self, msg: MapRequest, sport: int, now: float, ecm: Ecm | None = None
                 ) -> list[Datagram]:
        self.counters["requests"] += 1
        if msg.probe:
            self.counters["dropped_probe"] += 1
            return []
        if not msg.itr_rlocs or not msg.eid_prefixes:
            self.counters["malformed"] += 1
            return []
        fam = msg.eid_prefixes[0].version
        itr = next((r for r in msg.itr_rlocs if r.version == fam), msg.itr_rlocs[0])
        if len(msg.eid_prefixes) == 1:
            # section 8.3: no proxy service asked -> forward the ECM to a registered ETR,
            # which answers the ITR itself
            reg = self._lookup(msg.eid_prefixes[0].network_address.packed, now)
            if reg is not None and not reg.proxy and reg.record.locators:
                eid = msg.eid_prefixes[0].network_address
                if ecm is None:
                    src = itr.packed if itr.version == eid.version else b"\x00" * len(eid.packed)
                    body = ecm_wrap(encode_map_request(msg), src, eid.packed, sport)
                else:
                    body = encode_ecm(ecm)
                self.counters["forwarded"] += 1
                return [(body, (str(reg.record.locators[0].locator), LISP_CONTROL_PORT))]
        records = []
        for eid in msg.eid_prefixes:
            reg = self._lookup(eid.network_address.packed, now)
            if reg is not None:
                r = reg.record
                locs = tuple(type(loc)(loc.locator, loc.priority, loc.weight, loc.m_priority,
                                       loc.m_weight, False, False, loc.reachable)
                             for loc in r.locators)
                records.append(EidRecord(r.prefix, locs, r.ttl, 0, False, r.map_version))
            else:
                # section 8.3: inside a configured site prefix but nothing registered -> 1 min
                site_pfx = next((p for s in self.sites for p in s.prefixes
                                 if eid.version == p.version and eid.subnet_of(p)), None)
                ttl = 1 if site_pfx is not None else self.negative_ttl_minutes
                records.append(EidRecord(site_pfx or self._negative_prefix(eid), (), ttl,
                                         Action.NATIVELY_FORWARD, False))
                self.counters["negative_replies"] += 1
        self.counters["replies"] += 1
        reply = encode_map_reply(MapReply(msg.nonce, tuple(records)))
        return [(reply, (str(itr), sport))]

    def registrations(self, now: float) -> list[dict]:
        return [{"prefix": str(r.record.prefix), "site": r.site, "source": r.source,
                 "rlocs": [str(loc.locator) for loc in r.record.locators],
                 "expires_in": round(r.expires - now, 1)}
                for _a, _p, r in self.regs.items() if r.expires > now]
