"""ETR side of registration: authenticated Map-Register / Map-Notify (RFC 9301 5.6, 5.7, 8.2).

The registrar sends a signed Map-Register for its EID prefixes every
``interval`` seconds (60 s by RFC 9301 section 8.2) with the M-bit (want
Map-Notify) and P-bit (proxy Map-Reply) set.  Until an authenticated Map-Notify
arrives it retransmits after 1 s, doubling up to 60 s (section 5.7).

Every transmission, retransmissions included, carries a new, larger nonce:
section 5.6 says the nonce "is incremented each time a Map-Register message is
sent" and map-servers drop non-increasing nonces as replays, so re-sending the
same nonce after a lost Map-Notify would be refused forever.  A Map-Notify for
any nonce sent since the last acknowledgement is accepted (a late ack of an
earlier copy still proves the registration).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from dataclasses import dataclass

from corecast.core.driven import Address, Outbox, host_port
from corecast.core.events import Registered
from corecast.wire.constants import MAP_REGISTER_INTERVAL, AlgorithmId, LispType
from corecast.wire.ip import DecodeError
from corecast.wire.lispctl import (
    Ecm,
    EidRecord,
    LocatorRecord,
    MapRegister,
    MapReply,
    MapRequest,
    auth_len,
    compute_auth,
    decode_control,
    ecm_unwrap,
    encode_map_register,
    encode_map_reply,
    verify_auth,
)

Datagram = tuple[bytes, tuple[str, int]]


def _full_len(algorithm_id: int) -> int:
    return 20 if algorithm_id == AlgorithmId.HMAC_SHA_1_96 else 32


def with_profile(cfg: RegistrarConfig, profile: AuthProfile) -> RegistrarConfig:
    """``cfg`` with what ``profile`` forces (Key ID, algorithm, MAC length)."""
    from dataclasses import replace

    return replace(cfg,
                   key_id=cfg.key_id if profile.key_id is None else profile.key_id,
                   algorithm_id=(cfg.algorithm_id if profile.algorithm_id is None
                                 else profile.algorithm_id),
                   mac_length=cfg.mac_length if profile.mac_length is None else profile.mac_length)


@dataclass(frozen=True, slots=True)
class RegistrarConfig:
    """What an ETR registers and how it authenticates."""

    prefixes: tuple[str, ...]  #: EID prefixes, e.g. ('10.1.0.0/16',)
    rlocs: tuple[str, ...]  #: this ETR's locators
    map_server: tuple[str, int]  #: map-server address and port
    psk: bytes  #: pre-shared key
    key_id: int = 0
    algorithm_id: int = AlgorithmId.HMAC_SHA_256_128
    ttl_minutes: int = 3
    interval: float = MAP_REGISTER_INTERVAL
    xtr_id: bytes | None = None  #: 16 bytes; sets the I-bit with site_id
    site_id: bytes = b"\x00" * 8
    proxy_reply: bool = True  #: P-bit: the map-server answers Map-Requests for us
    #: Instance ID of the prefixes (RFC 9300 section 8); non-zero goes in an LCAF
    #: Instance ID address (RFC 8060 section 4.1) in every EID record
    iid: int = 0
    #: the site's Map-Version (RFC 9302 sec. 5), carried in every EID record; 0 = null
    map_version: int = 0
    #: MAC bytes sent; None = the algorithm's truncated length (12 for HMAC-SHA-1-96, 16 for
    #: HMAC-SHA-256-128).  20 = the whole HMAC-SHA-1, which Open Overlay Router's map-server
    #: requires (see :data:`OOR_PROFILE`)
    mac_length: int | None = None


@dataclass(frozen=True, slots=True)
class AuthProfile:
    """How a Map-Register is authenticated for a family of map-servers."""

    key_id: int | None  #: forced Key ID (None: the operator's)
    algorithm_id: int | None  #: forced Algorithm ID (None: the operator's)
    mac_length: int | None  #: MAC bytes (None: the RFC's truncated length)


#: RFC 9301 sec. 5.6 as written: the operator's Key ID and algorithm, truncated MACs
RFC9301_PROFILE = AuthProfile(None, None, None)
#: Open Overlay Router's map-server (``key-type = 1``): it reads RFC 6833's 16-bit Key ID,
#: so the bytes must be ``00 01`` (Key ID 0, Algorithm 1), and it compares all 20 bytes of
#: the HMAC-SHA-1 (oor/lib/hmac.c); it has no SHA-256
OOR_PROFILE = AuthProfile(0, AlgorithmId.HMAC_SHA_1_96, 20)
AUTH_PROFILES = {"rfc9301": RFC9301_PROFILE, "oor": OOR_PROFILE}


class Registrar(Outbox):
    """Sans-IO Map-Register sender for one ETR and one map-server; the ETR's LISP
    control port as a :class:`deliverykit.protocol.DatagramCore`: its timer is the
    next Map-Register (interval or back-off), a datagram is our Map-Notify or a
    Map-Request to answer (at an ITR-RLOC :attr:`allow` accepts)."""

    def __init__(self, cfg: RegistrarConfig, first_nonce: int = 1) -> None:
        self.cfg = cfg
        self.nonce = first_nonce - 1
        self.next_send = 0.0
        self.backoff = 1.0
        self.outstanding: int | None = None
        self.unacked: set[int] = set()  # nonces sent since the last Map-Notify
        self.registered = False
        self.events: list[Registered] = []
        self.counters = {"sent": 0, "notified": 0, "bad_notify": 0, "map_replies": 0,
                         "requests_not_ours": 0, "requests_refused": 0}
        #: may a Map-Reply go to this ITR-RLOC host? (see :meth:`answer`); None: anywhere
        self.allow: Callable[[str], bool] | None = None
        self._init_outbox()
        self._ev_read = 0
        locs = tuple(LocatorRecord(ipaddress.ip_address(r), 1, 100, 255, 0, True, False, True)
                     for r in cfg.rlocs)
        if cfg.mac_length is not None and not auth_len(cfg.algorithm_id) <= cfg.mac_length <= \
                _full_len(cfg.algorithm_id):
            raise ValueError(
                f"MAC length {cfg.mac_length} does not fit algorithm {cfg.algorithm_id}")
        if not 0 <= cfg.map_version <= 4095:
            raise ValueError("Map-Version must be 0 (null) or 1..4095 (RFC 9302 sec. 5)")
        self.records = tuple(EidRecord(ipaddress.ip_network(p), locs, cfg.ttl_minutes,
                                       map_version=cfg.map_version, iid=cfg.iid)
                             for p in cfg.prefixes)

    def message(self) -> MapRegister:
        return MapRegister(
            self.nonce, self.records, self.cfg.key_id, self.cfg.algorithm_id,
            msg_type=LispType.MAP_REGISTER, proxy_reply=self.cfg.proxy_reply, want_map_notify=True,
            use_ttl=True, xtr_id=self.cfg.xtr_id,
            site_id=self.cfg.site_id if self.cfg.xtr_id is not None else None,
        )

    def tick(self, now: float) -> list[Datagram]:
        if now < self.next_send:
            return []
        if self.outstanding is None:
            self.backoff = 1.0
        else:
            self.backoff = min(self.backoff * 2, 60.0)
        self.nonce += 1  # a new nonce for every transmission (section 5.6)
        self.outstanding = self.nonce
        self.unacked.add(self.nonce)
        if len(self.unacked) > 64:
            self.unacked.discard(min(self.unacked))
        self.counters["sent"] += 1
        self.next_send = now + (self.cfg.interval if self.registered and self.outstanding is None
                                else self.backoff)
        msg = self.message()
        return [(encode_map_register(msg, compute_auth(msg, self.cfg.psk, self.cfg.mac_length)),
                 self.cfg.map_server)]

    def next_deadline(self) -> float:
        return self.next_send

    # ------------------------------------------------------------- DatagramCore

    def datagram_received(self, data: bytes, addr: Address, now: float) -> None:
        if not self.handle_control(data, now):  # not our Map-Notify: a Map-Request?
            self._queue(self.answer(data, now, host_port(addr)[1], allow=self.allow))

    def get_timer(self, now: float) -> float | None:
        return self.next_send

    def handle_timer(self, now: float) -> None:
        self._queue(self.tick(now))

    def next_event(self) -> Registered | None:
        """The oldest of :attr:`events` not yet handed out."""
        if self._ev_read >= len(self.events):
            return None
        ev = self.events[self._ev_read]
        self._ev_read += 1
        return ev

    def handle_control(self, data: bytes, now: float) -> bool:
        """Feed a UDP/4342 message; True if it was our Map-Notify."""
        try:
            msg = decode_control(data)
        except DecodeError:
            self.counters["bad_notify"] += 1
            return False
        if not isinstance(msg, MapRegister) or msg.msg_type != LispType.MAP_NOTIFY:
            return False
        if msg.nonce not in self.unacked or not verify_auth(msg, self.cfg.psk):
            self.counters["bad_notify"] += 1
            return False
        self.outstanding = None
        self.unacked.clear()
        self.registered = True
        self.counters["notified"] += 1
        self.next_send = now + self.cfg.interval
        self.events.append(Registered(f"{self.cfg.map_server[0]}:{self.cfg.map_server[1]}",
                                      msg.nonce))
        return True

    def answer(self, data: bytes, now: float, src_port: int = 4342,
               allow: Callable[[str], bool] | None = None) -> list[Datagram]:
        """Answer a Map-Request (plain or ECM, e.g. forwarded by a map-server, or an
        RLOC probe) for our EID prefixes with an authoritative Map-Reply to the
        requester's ITR-RLOC, at the inner source port of an ECM or ``src_port`` of a
        plain request (RFC 9301 sections 5.4, 5.5, 7.1, 8.3).

        The ITR-RLOC is written by the sender: ``allow(host)`` says whether we may send
        there (an ETR passes its trusted-RLOC check); refused ones are counted in
        ``requests_refused``, so a forged request cannot aim our reply at any address."""
        try:
            msg = decode_control(data)
            sport = None
            if isinstance(msg, Ecm):
                _ip, sport, _d, inner = ecm_unwrap(msg)
                msg = decode_control(inner)
        except DecodeError:
            return []
        if not isinstance(msg, MapRequest) or not msg.itr_rlocs or not msg.eid_prefixes:
            return []
        recs = []
        for i, eid in enumerate(msg.eid_prefixes):  # record by record (RFC 9301 5.2)
            iid = msg.eid_iids[i] if msg.eid_iids else 0
            mine = [r for r in self.records if r.prefix.version == eid.version and r.iid == iid
                    and eid.subnet_of(r.prefix)]  # type: ignore[arg-type]  # versions equal
            if mine:
                r = max(mine, key=lambda x: x.prefix.prefixlen)
                recs.append(EidRecord(r.prefix, r.locators, r.ttl, 0, True, r.map_version,
                                      r.iid))
        if not recs:
            self.counters["requests_not_ours"] += 1
            return []
        fam = msg.eid_prefixes[0].version
        itr = next((a for a in msg.itr_rlocs if a.version == fam), msg.itr_rlocs[0])
        if allow is not None and not allow(str(itr)):
            self.counters["requests_refused"] += 1
            return []
        self.counters["map_replies"] += 1
        reply = encode_map_reply(MapReply(msg.nonce, tuple(recs), probe=msg.probe))
        return [(reply, (str(itr), sport if sport is not None else src_port))]
