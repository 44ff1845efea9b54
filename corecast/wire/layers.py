"""Scapy layers: the readable definition of every format corecast puts on the wire.

* ``LISPData``: RFC 9300 section 5.3 data header, UDP port 4341 (bound both ways).
* ``LISPMapRequest``/``LISPMapReply``/``LISPMapRegister``/``LISPMapNotify``/
  ``LISPECM``: RFC 9301 sections 5.2-5.8, UDP port 4342, chosen by ``LISPControl``
  from the 4-bit type.  ``LISPEidRecord``/``LISPLocator``/``LISPAddr`` are the
  shared records and AFI-encoded addresses.
* ``CoreCastPayload``/``CoreCastHeader``: the paper's section 3.2 PDUs in our
  layout (docs/wire-corecast.md), over IP protocol 253 (RFC 3692) and over UDP
  port 54341.

Scapy lists ``FlagsField`` names least-significant bit first.  Lengths left as
``None`` are filled in ``post_build`` so a test can still force a wrong one.
``corecast.wire.codec`` produces the same bytes (tests prove it).
"""

from __future__ import annotations

from typing import Any

from scapy.fields import (
    BitEnumField,
    BitField,
    BitFieldLenField,
    ByteEnumField,
    ByteField,
    ConditionalField,
    FieldLenField,
    FlagsField,
    IntField,
    IP6Field,
    IPField,
    LongField,
    PacketField,
    PacketListField,
    ShortEnumField,
    ShortField,
    StrFixedLenField,
    StrLenField,
    XByteField,
    XStrLenField,
)
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.packet import Packet, Raw, bind_layers

from corecast.wire.constants import (
    CORECAST_UDP_PORT,
    CORECAST_VERSION,
    IPPROTO_CORECAST,
    LISP_CONTROL_PORT,
    LISP_DATA_PORT,
)

_AFI = {0: "none", 1: "IPv4", 2: "IPv6", 16387: "LCAF"}
_TYPES = {1: "Map-Request", 2: "Map-Reply", 3: "Map-Register", 4: "Map-Notify",
          5: "Map-Notify-Ack", 8: "ECM"}


# ------------------------------------------------------------------ data plane


class LISPData(Packet):
    """RFC 9300 section 5.3: N L E V I R K K | nonce/map-version | IID/LSBs."""

    name = "LISP data"
    fields_desc = [
        FlagsField("flags", 0, 6, ["R", "I", "V", "E", "L", "N"]),
        BitField("KK", 0, 2),
        ConditionalField(BitField("nonce", 0, 24), lambda p: not (p.flags.V and not p.flags.N)),
        ConditionalField(BitField("src_map_version", 0, 12), lambda p: p.flags.V and not p.flags.N),
        ConditionalField(BitField("dst_map_version", 0, 12), lambda p: p.flags.V and not p.flags.N),
        ConditionalField(BitField("instance_id", 0, 24), lambda p: p.flags.I),
        ConditionalField(XByteField("lsb8", 0), lambda p: p.flags.I),
        ConditionalField(BitField("lsb", 0, 32), lambda p: not p.flags.I),
    ]

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        # inner IPv4 or IPv6 by version nibble
        if payload:
            v = payload[0] >> 4
            if v == 4:
                return IP
            if v == 6:
                return IPv6
        return Raw


bind_layers(UDP, LISPData, dport=LISP_DATA_PORT)
bind_layers(UDP, LISPData, sport=LISP_DATA_PORT)


# ------------------------------------------------------------------ addresses


def _lcaf(p: Packet) -> bool:
    return bool(p.afi == 16387)


class LISPAddr(Packet):
    """An AFI-encoded address (RFC 9301 section 5.1): AFI 0, 1 (IPv4) or 2 (IPv6),
    or an LCAF Instance ID address (RFC 8060 section 4.1: AFI 16387, type 2) for
    EIDs of a non-default instance: Rsvd1, Flags, Type = 2, IID mask-len, Length
    (bytes after it), a 32-bit Instance ID, then the AFI-encoded address."""

    name = "LISP address"
    fields_desc = [
        ShortEnumField("afi", 1, _AFI),
        ConditionalField(IPField("ipv4", "0.0.0.0"), lambda p: p.afi == 1),
        ConditionalField(IP6Field("ipv6", "::"), lambda p: p.afi == 2),
        ConditionalField(ByteField("lcaf_rsvd1", 0), _lcaf),
        ConditionalField(ByteField("lcaf_flags", 0), _lcaf),
        ConditionalField(ByteEnumField("lcaf_type", 2, {2: "Instance ID"}), _lcaf),
        ConditionalField(ByteField("iid_mask_len", 0), _lcaf),
        ConditionalField(ShortField("lcaf_length", None), _lcaf),
        ConditionalField(IntField("instance_id", 0), _lcaf),
        ConditionalField(ShortEnumField("inner_afi", 1, _AFI), _lcaf),
        ConditionalField(IPField("inner_ipv4", "0.0.0.0"),
                         lambda p: _lcaf(p) and p.inner_afi == 1),
        ConditionalField(IP6Field("inner_ipv6", "::"), lambda p: _lcaf(p) and p.inner_afi == 2),
    ]

    def post_build(self, pkt: bytes, pay: bytes) -> bytes:
        if self.afi == 16387 and self.lcaf_length is None:
            pkt = pkt[:6] + (len(pkt) - 8).to_bytes(2, "big") + pkt[8:]
        return pkt + pay

    def extract_padding(self, s: bytes) -> tuple[bytes, bytes]:
        return b"", s


def _addr(name: str, afi: int = 1) -> PacketField:
    return PacketField(name, LISPAddr(afi=afi), LISPAddr)


class LISPLocator(Packet):
    """RFC 9301 section 5.4, 'Loc' rows."""

    name = "LISP locator"
    fields_desc = [
        ByteField("priority", 1),
        ByteField("weight", 100),
        ByteField("m_priority", 255),
        ByteField("m_weight", 0),
        BitField("unused_flags", 0, 13),
        FlagsField("loc_flags", 1, 3, ["R", "p", "L"]),
        _addr("locator"),
    ]

    def extract_padding(self, s: bytes) -> tuple[bytes, bytes]:
        return b"", s


class LISPEidRecord(Packet):
    """RFC 9301 section 5.4, 'Record' rows."""

    name = "LISP EID record"
    fields_desc = [
        IntField("ttl", 1440),
        FieldLenField("locator_count", None, count_of="locators", fmt="B"),
        ByteField("eid_mask_len", 32),
        BitField("act", 0, 3),
        BitField("A", 0, 1),
        BitField("reserved", 0, 12),
        BitField("rsvd", 0, 4),
        BitField("map_version", 0, 12),
        _addr("eid_prefix"),
        PacketListField("locators", [], LISPLocator, count_from=lambda p: p.locator_count),
    ]

    def extract_padding(self, s: bytes) -> tuple[bytes, bytes]:
        return b"", s


class LISPMapRequestPrefix(Packet):
    name = "LISP Map-Request record"
    fields_desc = [ByteField("reserved", 0), ByteField("eid_mask_len", 32), _addr("eid_prefix")]

    def extract_padding(self, s: bytes) -> tuple[bytes, bytes]:
        return b"", s


# ------------------------------------------------------------------ control plane


class LISPControl(Packet):
    """Dispatcher on the 4-bit type of a UDP/4342 payload."""

    name = "LISP control"

    @classmethod
    def dispatch_hook(cls, _pkt: bytes | None = None, *args: Any, **kargs: Any) -> type[Packet]:
        if _pkt:
            return _CONTROL_CLASSES.get(_pkt[0] >> 4, Raw)
        return cls


class LISPMapRequest(Packet):
    """RFC 9301 section 5.2 (IRC is the ITR-RLOC count minus one)."""

    name = "LISP Map-Request"
    fields_desc = [
        BitEnumField("type", 1, 4, _TYPES),
        FlagsField("flags", 0, 6, ["s", "p", "S", "P", "M", "A"]),
        BitField("reserved", 0, 7),
        BitField("L", 0, 1),
        BitField("D", 0, 1),
        BitFieldLenField("irc", None, 5, count_of="itr_rlocs", adjust=lambda p, x: x - 1),
        FieldLenField("record_count", None, count_of="records", fmt="B"),
        LongField("nonce", 0),
        _addr("source_eid", afi=0),
        PacketListField("itr_rlocs", [], LISPAddr, count_from=lambda p: (p.irc & 0x1F) + 1),
        PacketListField("records", [], LISPMapRequestPrefix, count_from=lambda p: p.record_count),
        ConditionalField(PacketField("map_reply_record", None, LISPEidRecord),
                         lambda p: p.flags.M),
    ]


class LISPMapReply(Packet):
    """RFC 9301 section 5.4."""

    name = "LISP Map-Reply"
    fields_desc = [
        BitEnumField("type", 2, 4, _TYPES),
        FlagsField("flags", 0, 3, ["S", "E", "P"]),
        BitField("reserved", 0, 17),
        FieldLenField("record_count", None, count_of="records", fmt="B"),
        LongField("nonce", 0),
        PacketListField("records", [], LISPEidRecord, count_from=lambda p: p.record_count),
    ]


class LISPMapRegister(Packet):
    """RFC 9301 section 5.6 (Key ID, Algorithm ID, authentication data)."""

    name = "LISP Map-Register"
    fields_desc = [
        BitEnumField("type", 3, 4, _TYPES),
        FlagsField("flags", 0, 4, ["rtr", "I", "S", "P"]),  # rtr: tshark's R bit (built for an RTR)
        BitField("reserved", 0, 11),
        FlagsField("flags2", 0, 5, ["M", "R", "a", "T", "E"]),
        FieldLenField("record_count", None, count_of="records", fmt="B"),
        LongField("nonce", 0),
        ByteField("key_id", 0),
        ByteEnumField("algorithm_id", 2, {0: "None", 1: "HMAC-SHA-1-96",
                                          2: "HMAC-SHA-256-128",
                                          3: "HMAC-SHA-256-128+HKDF-SHA256"}),
        FieldLenField("auth_len", None, length_of="auth_data", fmt="H"),
        XStrLenField("auth_data", b"", length_from=lambda p: p.auth_len),
        PacketListField("records", [], LISPEidRecord, count_from=lambda p: p.record_count),
        ConditionalField(StrFixedLenField("xtr_id", b"\x00" * 16, 16), lambda p: p.flags.I),
        ConditionalField(StrFixedLenField("site_id", b"\x00" * 8, 8), lambda p: p.flags.I),
    ]


class LISPMapNotify(Packet):
    """RFC 9301 section 5.7 (type 4, or 5 for Map-Notify-Ack); I and R bits as tshark reads them."""

    name = "LISP Map-Notify"
    fields_desc = [
        BitEnumField("type", 4, 4, _TYPES),
        FlagsField("flags", 0, 2, ["R", "I"]),
        BitField("reserved", 0, 18),
        FieldLenField("record_count", None, count_of="records", fmt="B"),
        LongField("nonce", 0),
        ByteField("key_id", 0),
        ByteField("algorithm_id", 2),
        FieldLenField("auth_len", None, length_of="auth_data", fmt="H"),
        XStrLenField("auth_data", b"", length_from=lambda p: p.auth_len),
        PacketListField("records", [], LISPEidRecord, count_from=lambda p: p.record_count),
        ConditionalField(StrFixedLenField("xtr_id", b"\x00" * 16, 16), lambda p: p.flags.I),
        ConditionalField(StrFixedLenField("site_id", b"\x00" * 8, 8), lambda p: p.flags.I),
    ]


class LISPECM(Packet):
    """RFC 9301 section 5.8: Encapsulated Control Message (inner IP + UDP + message)."""

    name = "LISP ECM"
    fields_desc = [
        BitEnumField("type", 8, 4, _TYPES),
        FlagsField("flags", 0, 2, ["D", "S"]),
        BitField("reserved", 0, 26),
    ]

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        if payload and payload[0] >> 4 == 6:
            return IPv6
        return IP


_CONTROL_CLASSES = {1: LISPMapRequest, 2: LISPMapReply, 3: LISPMapRegister,
                    4: LISPMapNotify, 5: LISPMapNotify, 8: LISPECM}

bind_layers(UDP, LISPControl, dport=LISP_CONTROL_PORT)
bind_layers(UDP, LISPControl, sport=LISP_CONTROL_PORT)


# ------------------------------------------------------------------ CoreCast


class CoreCast(Packet):
    """Dispatcher on the type nibble of a CoreCast PDU (paper section 3.2)."""

    name = "CoreCast"

    @classmethod
    def dispatch_hook(cls, _pkt: bytes | None = None, *args: Any, **kargs: Any) -> type[Packet]:
        if _pkt:
            return {1: CoreCastPayload, 2: CoreCastHeader}.get(_pkt[0] & 0xF, Raw)
        return cls


class CoreCastPayload(Packet):
    """Payload PDU: hash of the payload, payload length, payload."""

    name = "CoreCast payload"
    fields_desc = [
        BitField("version", CORECAST_VERSION, 4),
        BitEnumField("type", 1, 4, {1: "payload", 2: "header"}),
        ByteEnumField("hash_id", 1, {1: "SHA-1", 2: "SHA-256"}),
        FieldLenField("hash_len", None, length_of="hash", fmt="B"),
        XByteField("flags", 0),
        IntField("seq", 0),
        FieldLenField("payload_len", None, length_of="data", fmt="H"),
        ShortField("reserved", 0),
        XStrLenField("hash", b"", length_from=lambda p: p.hash_len),
        StrLenField("data", b"", length_from=lambda p: p.payload_len),
    ]


class CoreCastHeader(Packet):
    """Header PDU: destination EID, payload hash, destination port for the ETR."""

    name = "CoreCast header"
    fields_desc = [
        BitField("version", CORECAST_VERSION, 4),
        BitEnumField("type", 2, 4, {1: "payload", 2: "header"}),
        ByteEnumField("hash_id", 1, {1: "SHA-1", 2: "SHA-256"}),
        FieldLenField("hash_len", None, length_of="hash", fmt="B"),
        XByteField("flags", 0),
        IntField("seq", 0),
        ShortField("dport", 0),
        ShortEnumField("eid_afi", 1, _AFI),
        XStrLenField("hash", b"", length_from=lambda p: p.hash_len),
        ConditionalField(IPField("eid", "0.0.0.0"), lambda p: p.eid_afi == 1),
        ConditionalField(IP6Field("eid6", "::"), lambda p: p.eid_afi == 2),
    ]


bind_layers(IP, CoreCast, proto=IPPROTO_CORECAST)
bind_layers(IPv6, CoreCast, nh=IPPROTO_CORECAST)
bind_layers(UDP, CoreCast, dport=CORECAST_UDP_PORT)
bind_layers(UDP, CoreCast, sport=CORECAST_UDP_PORT)
for _cls in (CoreCastPayload, CoreCastHeader):
    bind_layers(IP, _cls, proto=IPPROTO_CORECAST)
    bind_layers(IPv6, _cls, nh=IPPROTO_CORECAST)
    bind_layers(UDP, _cls, dport=CORECAST_UDP_PORT)

__all__ = [
    "LISPData", "LISPAddr", "LISPLocator", "LISPEidRecord", "LISPMapRequestPrefix",
    "LISPControl", "LISPMapRequest", "LISPMapReply", "LISPMapRegister", "LISPMapNotify",
    "LISPECM", "CoreCast", "CoreCastPayload", "CoreCastHeader",
]
