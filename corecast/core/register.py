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
from dataclasses import dataclass

from corecast.core.events import Registered
from corecast.wire.codec import (
    DecodeError,
    EidRecord,
    LocatorRecord,
    MapRegister,
    decode_control,
    sign,
    verify_auth,
)
from corecast.wire.constants import MAP_REGISTER_INTERVAL, AlgorithmId, LispType

Datagram = tuple[bytes, tuple[str, int]]


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


class Registrar:
    """Sans-IO Map-Register sender for one ETR and one map-server."""

    def __init__(self, cfg: RegistrarConfig, first_nonce: int = 1) -> None:
        self.cfg = cfg
        self.nonce = first_nonce - 1
        self.next_send = 0.0
        self.backoff = 1.0
        self.outstanding: int | None = None
        self.unacked: set[int] = set()  # nonces sent since the last Map-Notify
        self.registered = False
        self.events: list[Registered] = []
        self.counters = {"sent": 0, "notified": 0, "bad_notify": 0}
        locs = tuple(LocatorRecord(ipaddress.ip_address(r), 1, 100, 255, 0, True, False, True)
                     for r in cfg.rlocs)
        self.records = tuple(EidRecord(ipaddress.ip_network(p), locs, cfg.ttl_minutes)
                             for p in cfg.prefixes)

    def message(self) -> MapRegister:
        return MapRegister(
            self.nonce, self.records, self.cfg.key_id, self.cfg.algorithm_id,
            msg_type=LispType.MAP_REGISTER, proxy_reply=True, want_map_notify=True,
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
        return [(sign(self.message(), self.cfg.psk), self.cfg.map_server)]

    def next_deadline(self) -> float:
        return self.next_send

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
