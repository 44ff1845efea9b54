"""Fast struct-based codecs for LISP data/control messages and CoreCast PDUs.

Same bytes as the scapy layers in :mod:`corecast.wire.layers` (a hypothesis
test proves it).  Every ``decode_*`` function accepts arbitrary bytes and
returns a value or raises :class:`DecodeError`, nothing else.

References: RFC 9300 section 5 (data header), RFC 9301 sections 5.2-5.8
(control messages), the CoreCast paper section 3.2 (payload and header PDUs;
our byte layout is documented in docs/wire-corecast.md).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import struct
from dataclasses import dataclass, field
from typing import Union

from corecast.wire.constants import (
    AFI_ADDR_LEN,
    CORECAST_VERSION,
    HASH_LEN,
    KDF_SALT,
    Afi,
    AlgorithmId,
    CoreCastType,
    HashId,
    LispType,
)

IPAddress = Union[ipaddress.IPv4Address, ipaddress.IPv6Address]


class DecodeError(ValueError):
    """Malformed, truncated or unsupported bytes (the peer's fault)."""


# --------------------------------------------------------------------------
# Addresses (AFI-encoded, RFC 9301 section 5.1)
# --------------------------------------------------------------------------


def afi_of(addr: IPAddress | None) -> int:
    if addr is None:
        return Afi.NONE
    return Afi.IPV4 if addr.version == 4 else Afi.IPV6


def encode_afi_addr(addr: IPAddress | None) -> bytes:
    if addr is None:
        return b"\x00\x00"
    return struct.pack("!H", afi_of(addr)) + addr.packed


def decode_afi_addr(buf: bytes | memoryview, off: int) -> tuple[IPAddress | None, int]:
    """(address or None for AFI 0, new offset)."""
    if off + 2 > len(buf):
        raise DecodeError("truncated AFI")
    (afi,) = struct.unpack_from("!H", buf, off)
    off += 2
    n = AFI_ADDR_LEN.get(afi)  # type: ignore[call-overload]
    if n is None:
        raise DecodeError(f"unsupported AFI {afi}")
    if off + n > len(buf):
        raise DecodeError("truncated address")
    if n == 0:
        return None, off
    raw = bytes(buf[off : off + n])
    addr: IPAddress = ipaddress.IPv4Address(raw) if n == 4 else ipaddress.IPv6Address(raw)
    return addr, off + n


def _addr_from_raw(raw: bytes) -> IPAddress:
    if len(raw) == 4:
        return ipaddress.IPv4Address(raw)
    if len(raw) == 16:
        return ipaddress.IPv6Address(raw)
    raise DecodeError(f"bad address length {len(raw)}")


# --------------------------------------------------------------------------
# LISP data-plane header (RFC 9300 section 5.3)
# --------------------------------------------------------------------------

FLAG_N = 0x80
FLAG_L = 0x40
FLAG_E = 0x20
FLAG_V = 0x10
FLAG_I = 0x08
FLAG_R = 0x04
KK_MASK = 0x03

_LISP_DATA = struct.Struct("!II")


@dataclass(frozen=True, slots=True)
class LispDataHeader:
    """The 8-byte LISP data header.

    ``flags``: N L E V I R K K from the most significant bit;
    ``nonce``: the low 24 bits of the first word (nonce, or source map-version
    << 12 | destination map-version when V is set);
    ``word2``: the second word (instance ID << 8 | LSBs when I is set, else the
    32 locator-status-bits).
    """

    flags: int = 0
    nonce: int = 0
    word2: int = 0

    @property
    def instance_id(self) -> int | None:
        return self.word2 >> 8 if self.flags & FLAG_I else None

    @property
    def lsb(self) -> int:
        return self.word2 & 0xFF if self.flags & FLAG_I else self.word2

    @property
    def map_versions(self) -> tuple[int, int] | None:
        if self.flags & FLAG_V and not self.flags & FLAG_N:
            return self.nonce >> 12, self.nonce & 0xFFF
        return None


def make_lisp_data(
    nonce: int | None = None,
    instance_id: int | None = None,
    lsb: int | None = None,
    echo: bool = False,
    map_versions: tuple[int, int] | None = None,
) -> LispDataHeader:
    """Build a header from meaningful parts (RFC 9300 section 5.3 rules)."""
    flags = 0
    first = 0
    if nonce is not None:
        flags |= FLAG_N | (FLAG_E if echo else 0)
        first = nonce & 0xFFFFFF
    elif map_versions is not None:
        flags |= FLAG_V
        first = (map_versions[0] & 0xFFF) << 12 | (map_versions[1] & 0xFFF)
    word2 = 0
    if lsb is not None:
        flags |= FLAG_L
    if instance_id is not None:
        flags |= FLAG_I
        word2 = (instance_id & 0xFFFFFF) << 8 | ((lsb or 0) & 0xFF)
    elif lsb is not None:
        word2 = lsb & 0xFFFFFFFF
    return LispDataHeader(flags, first, word2)


def encode_lisp_data(h: LispDataHeader) -> bytes:
    return _LISP_DATA.pack((h.flags & 0xFF) << 24 | (h.nonce & 0xFFFFFF), h.word2 & 0xFFFFFFFF)


def decode_lisp_data(buf: bytes | memoryview) -> tuple[LispDataHeader, memoryview]:
    """(header, inner packet) from a UDP/4341 payload."""
    if len(buf) < 8:
        raise DecodeError("LISP data header truncated")
    w1, w2 = _LISP_DATA.unpack_from(buf, 0)
    return LispDataHeader(w1 >> 24, w1 & 0xFFFFFF, w2), memoryview(buf)[8:]


# --------------------------------------------------------------------------
# Inner IP / UDP headers (RFC 791, RFC 8200, RFC 768)
# --------------------------------------------------------------------------


def ip_checksum(data: bytes | memoryview) -> int:
    if len(data) % 2:
        data = bytes(data) + b"\x00"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


_IPV4 = struct.Struct("!BBHHHBBH4s4s")


def build_ipv4(
    src: bytes, dst: bytes, proto: int, payload: bytes, ttl: int = 64, ident: int = 0, tos: int = 0
) -> bytes:
    """A 20-byte IPv4 header (DF set, checksum filled) followed by ``payload``."""
    hdr = bytearray(
        _IPV4.pack(0x45, tos, 20 + len(payload), ident, 0x4000, ttl, proto, 0, src, dst)
    )
    struct.pack_into("!H", hdr, 10, ip_checksum(hdr))
    return bytes(hdr) + payload


def build_ipv6(
    src: bytes, dst: bytes, next_header: int, payload: bytes, hop_limit: int = 64
) -> bytes:
    return (
        struct.pack("!IHBB", 6 << 28, len(payload), next_header, hop_limit) + src + dst + payload
    )


def build_ip(src: bytes, dst: bytes, proto: int, payload: bytes, ttl: int = 64) -> bytes:
    if len(src) == 4 and len(dst) == 4:
        return build_ipv4(src, dst, proto, payload, ttl)
    if len(src) == 16 and len(dst) == 16:
        return build_ipv6(src, dst, proto, payload, ttl)
    raise ValueError("source and destination must both be IPv4 or both IPv6")


def build_udp(sport: int, dport: int, payload: bytes) -> bytes:
    """UDP header with checksum 0 (permitted for IPv4, RFC 768; RFC 6936 for tunnels)."""
    return struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload


@dataclass(frozen=True, slots=True)
class IpPacket:
    """Just what the xTRs need from an inner IP header."""

    version: int
    src: bytes
    dst: bytes
    proto: int
    ttl: int
    header_len: int
    payload: memoryview


def decode_ip(buf: bytes | memoryview) -> IpPacket:
    mv = memoryview(buf)
    if len(mv) < 1:
        raise DecodeError("empty IP packet")
    v = mv[0] >> 4
    if v == 4:
        if len(mv) < 20:
            raise DecodeError("IPv4 header truncated")
        ihl = (mv[0] & 0x0F) * 4
        total = (mv[2] << 8) | mv[3]
        if ihl < 20 or total < ihl or total > len(mv):
            raise DecodeError("bad IPv4 lengths")
        return IpPacket(4, bytes(mv[12:16]), bytes(mv[16:20]), mv[9], mv[8], ihl, mv[ihl:total])
    if v == 6:
        if len(mv) < 40:
            raise DecodeError("IPv6 header truncated")
        plen = (mv[4] << 8) | mv[5]
        if 40 + plen > len(mv):
            raise DecodeError("bad IPv6 payload length")
        return IpPacket(6, bytes(mv[8:24]), bytes(mv[24:40]), mv[6], mv[7], 40, mv[40 : 40 + plen])
    raise DecodeError(f"IP version {v}")


def decode_udp(buf: bytes | memoryview) -> tuple[int, int, memoryview]:
    """(source port, destination port, payload)."""
    mv = memoryview(buf)
    if len(mv) < 8:
        raise DecodeError("UDP header truncated")
    sport, dport, length = struct.unpack_from("!HHH", mv, 0)
    if length < 8 or length > len(mv):
        raise DecodeError("bad UDP length")
    return sport, dport, mv[8:length]


# --------------------------------------------------------------------------
# CoreCast PDUs (paper section 3.2; our layout, docs/wire-corecast.md)
# --------------------------------------------------------------------------
#
# Common part (8 bytes):  Version(4) Type(4) | Hash ID(8) | Hash Len(8) | Flags(8)
#                         Sequence Number (32)
# Payload PDU:  common | Payload Length(16) | Reserved(16) | Hash | Payload
# Header PDU:   common | Dest Port(16) | EID-AFI(16) | Hash | Destination EID

_CC_COMMON = struct.Struct("!BBBBI")
_CC_PAYLOAD = struct.Struct("!BBBBIHH")
_CC_HEADER = struct.Struct("!BBBBIHH")
CC_COMMON_LEN = 8
CC_PAYLOAD_FIXED = 12  # + hash + payload
CC_HEADER_FIXED = 12  # + hash + EID


def digest(hash_id: int, data: bytes | memoryview) -> bytes:
    if hash_id == HashId.SHA1:
        return hashlib.sha1(data).digest()
    if hash_id == HashId.SHA256:
        return hashlib.sha256(data).digest()
    raise ValueError(f"unknown hash id {hash_id}")


@dataclass(frozen=True, slots=True)
class CCPayload:
    """Payload PDU: the hash naming the payload, its length, and the payload."""

    seq: int
    hash: bytes
    payload: bytes
    hash_id: int = HashId.SHA1
    flags: int = 0
    version: int = CORECAST_VERSION

    def verify(self) -> bool:
        """True when the hash matches the payload (Algorithms 1 and 2, first test)."""
        try:
            return digest(self.hash_id, self.payload) == self.hash
        except ValueError:
            return False


@dataclass(frozen=True, slots=True)
class CCHeader:
    """Header PDU: the destination EID, the payload hash, the port the ETR must use."""

    seq: int
    hash: bytes
    eid: bytes  # 4 (IPv4) or 16 (IPv6) bytes
    port: int
    hash_id: int = HashId.SHA1
    flags: int = 0
    version: int = CORECAST_VERSION


CCPdu = Union[CCPayload, CCHeader]


def encode_cc_payload(
    seq: int,
    payload: bytes,
    hash_id: int = HashId.SHA1,
    hash_: bytes | None = None,
    flags: int = 0,
    version: int = CORECAST_VERSION,
) -> bytes:
    h = digest(hash_id, payload) if hash_ is None else hash_
    return (
        _CC_PAYLOAD.pack(
            (version & 0xF) << 4 | CoreCastType.PAYLOAD,
            hash_id,
            len(h),
            flags,
            seq & 0xFFFFFFFF,
            len(payload),
            0,
        )
        + h
        + payload
    )


def encode_cc_header(
    seq: int,
    hash_: bytes,
    eid: bytes,
    port: int,
    hash_id: int = HashId.SHA1,
    flags: int = 0,
    version: int = CORECAST_VERSION,
) -> bytes:
    if len(eid) == 4:
        afi = Afi.IPV4
    elif len(eid) == 16:
        afi = Afi.IPV6
    else:
        raise ValueError("EID must be 4 or 16 bytes")
    return (
        _CC_HEADER.pack(
            (version & 0xF) << 4 | CoreCastType.HEADER,
            hash_id,
            len(hash_),
            flags,
            seq & 0xFFFFFFFF,
            port,
            afi,
        )
        + hash_
        + eid
    )


def encode_cc(pdu: CCPdu) -> bytes:
    if isinstance(pdu, CCPayload):
        return encode_cc_payload(pdu.seq, pdu.payload, pdu.hash_id, pdu.hash, pdu.flags, pdu.version)
    return encode_cc_header(pdu.seq, pdu.hash, pdu.eid, pdu.port, pdu.hash_id, pdu.flags, pdu.version)


def decode_cc(buf: bytes | memoryview) -> CCPdu:
    """Decode one CoreCast PDU; trailing bytes after a header PDU are an error."""
    n = len(buf)
    if n < CC_PAYLOAD_FIXED:
        raise DecodeError("CoreCast PDU truncated")
    vt, hash_id, hlen, flags, seq, f1, f2 = _CC_PAYLOAD.unpack_from(buf, 0)
    version, typ = vt >> 4, vt & 0xF
    if version != CORECAST_VERSION:
        raise DecodeError(f"CoreCast version {version}")
    known = HASH_LEN.get(hash_id)  # type: ignore[call-overload]
    if known is not None and known != hlen:
        raise DecodeError("hash length does not match hash id")
    if hlen == 0:
        raise DecodeError("empty hash")
    off = CC_PAYLOAD_FIXED
    if typ == CoreCastType.PAYLOAD:
        end = off + hlen + f1
        if end != n:
            raise DecodeError("payload length does not match PDU length")
        return CCPayload(seq, bytes(buf[off : off + hlen]), bytes(buf[off + hlen : end]), hash_id, flags, version)
    if typ == CoreCastType.HEADER:
        elen = AFI_ADDR_LEN.get(f2)  # type: ignore[call-overload]
        if not elen:
            raise DecodeError(f"header EID AFI {f2}")
        if off + hlen + elen != n:
            raise DecodeError("header PDU length")
        return CCHeader(seq, bytes(buf[off : off + hlen]), bytes(buf[off + hlen : n]), f1, hash_id, flags, version)
    raise DecodeError(f"CoreCast type {typ}")


def cc_header_len(hash_id: int = HashId.SHA1, eid_len: int = 4) -> int:
    return CC_HEADER_FIXED + HASH_LEN[HashId(hash_id)] + eid_len


def cc_payload_overhead(hash_id: int = HashId.SHA1) -> int:
    return CC_PAYLOAD_FIXED + HASH_LEN[HashId(hash_id)]


# --------------------------------------------------------------------------
# LISP control messages (RFC 9301 section 5)
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LocatorRecord:
    """RFC 9301 section 5.4, 'Loc' rows."""

    locator: IPAddress
    priority: int = 1
    weight: int = 100
    m_priority: int = 255
    m_weight: int = 0
    local: bool = False
    probed: bool = False
    reachable: bool = True


@dataclass(frozen=True, slots=True)
class EidRecord:
    """RFC 9301 section 5.4, 'Record' rows (shared by Map-Reply/Register/Notify)."""

    prefix: ipaddress.IPv4Network | ipaddress.IPv6Network
    locators: tuple[LocatorRecord, ...] = ()
    ttl: int = 1440  # minutes
    action: int = 0
    authoritative: bool = False
    map_version: int = 0


def _encode_locator(loc: LocatorRecord) -> bytes:
    flags = (4 if loc.local else 0) | (2 if loc.probed else 0) | (1 if loc.reachable else 0)
    return (
        struct.pack("!BBBBH", loc.priority, loc.weight, loc.m_priority, loc.m_weight, flags)
        + encode_afi_addr(loc.locator)
    )


def encode_eid_record(rec: EidRecord) -> bytes:
    net = rec.prefix
    w = (rec.action & 7) << 13 | (0x1000 if rec.authoritative else 0)
    out = struct.pack(
        "!IBBHH", rec.ttl & 0xFFFFFFFF, len(rec.locators), net.prefixlen, w, rec.map_version & 0xFFF
    ) + encode_afi_addr(net.network_address)
    return out + b"".join(_encode_locator(loc) for loc in rec.locators)


def decode_eid_record(buf: bytes | memoryview, off: int) -> tuple[EidRecord, int]:
    if off + 10 > len(buf):
        raise DecodeError("EID record truncated")
    ttl, nloc, mlen, w, mv = struct.unpack_from("!IBBHH", buf, off)
    addr, off = decode_afi_addr(buf, off + 10)
    if addr is None:
        raise DecodeError("EID record without prefix")
    if mlen > addr.max_prefixlen:
        raise DecodeError("EID mask-len too long")
    try:
        prefix = ipaddress.ip_network(f"{addr}/{mlen}", strict=False)
    except ValueError as exc:  # pragma: no cover - guarded above
        raise DecodeError(str(exc)) from None
    locs = []
    for _ in range(nloc):
        if off + 6 > len(buf):
            raise DecodeError("locator truncated")
        pr, we, mp, mw, fl = struct.unpack_from("!BBBBH", buf, off)
        la, off = decode_afi_addr(buf, off + 6)
        if la is None:
            raise DecodeError("locator without address")
        locs.append(LocatorRecord(la, pr, we, mp, mw, bool(fl & 4), bool(fl & 2), bool(fl & 1)))
    rec = EidRecord(prefix, tuple(locs), ttl, w >> 13, bool(w & 0x1000), mv & 0xFFF)
    return rec, off


@dataclass(frozen=True, slots=True)
class MapRequest:
    """RFC 9301 section 5.2.  ``itr_rlocs`` has 1..32 entries (IRC = count - 1)."""

    nonce: int
    itr_rlocs: tuple[IPAddress, ...]
    eid_prefixes: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]
    source_eid: IPAddress | None = None
    authoritative: bool = False
    map_data_present: bool = False
    probe: bool = False
    smr: bool = False
    pitr: bool = False
    smr_invoked: bool = False
    local_xtr: bool = False
    dont_map_reply: bool = False
    map_reply_record: EidRecord | None = None


def encode_map_request(m: MapRequest) -> bytes:
    if not 1 <= len(m.itr_rlocs) <= 32:
        raise ValueError("Map-Request needs 1..32 ITR-RLOCs")
    fl = (
        (0x800 if m.authoritative else 0)
        | (0x400 if m.map_reply_record is not None or m.map_data_present else 0)
        | (0x200 if m.probe else 0)
        | (0x100 if m.smr else 0)
        | (0x80 if m.pitr else 0)
        | (0x40 if m.smr_invoked else 0)
    )
    w0 = (
        LispType.MAP_REQUEST << 28
        | fl << 16
        | (0x4000 if m.local_xtr else 0)
        | (0x2000 if m.dont_map_reply else 0)
        | (len(m.itr_rlocs) - 1) << 8
        | len(m.eid_prefixes)
    )
    out = [struct.pack("!IQ", w0, m.nonce), encode_afi_addr(m.source_eid)]
    out += [encode_afi_addr(r) for r in m.itr_rlocs]
    for p in m.eid_prefixes:
        out.append(struct.pack("!BB", 0, p.prefixlen) + encode_afi_addr(p.network_address))
    if m.map_reply_record is not None:
        out.append(encode_eid_record(m.map_reply_record))
    return b"".join(out)


def _decode_map_request(buf: bytes | memoryview) -> MapRequest:
    if len(buf) < 12:
        raise DecodeError("Map-Request truncated")
    w0, nonce = struct.unpack_from("!IQ", buf, 0)
    irc = ((w0 >> 8) & 0x1F) + 1
    count = w0 & 0xFF
    src, off = decode_afi_addr(buf, 12)
    rlocs = []
    for _ in range(irc):
        r, off = decode_afi_addr(buf, off)
        if r is None:
            raise DecodeError("ITR-RLOC with AFI 0")
        rlocs.append(r)
    prefixes = []
    for _ in range(count):
        if off + 2 > len(buf):
            raise DecodeError("Map-Request record truncated")
        mlen = buf[off + 1]
        a, off = decode_afi_addr(buf, off + 2)
        if a is None or mlen > a.max_prefixlen:
            raise DecodeError("bad Map-Request EID prefix")
        prefixes.append(ipaddress.ip_network(f"{a}/{mlen}", strict=False))
    fl = (w0 >> 16) & 0xFFF
    rec = None
    if fl & 0x400:
        rec, off = decode_eid_record(buf, off)
    return MapRequest(
        nonce,
        tuple(rlocs),
        tuple(prefixes),
        src,
        bool(fl & 0x800),
        bool(fl & 0x400),
        bool(fl & 0x200),
        bool(fl & 0x100),
        bool(fl & 0x80),
        bool(fl & 0x40),
        bool(w0 & 0x4000),
        bool(w0 & 0x2000),
        rec,
    )


@dataclass(frozen=True, slots=True)
class MapReply:
    """RFC 9301 section 5.4."""

    nonce: int
    records: tuple[EidRecord, ...]
    probe: bool = False
    echo_nonce: bool = False
    security: bool = False


def encode_map_reply(m: MapReply) -> bytes:
    fl = (8 if m.probe else 0) | (4 if m.echo_nonce else 0) | (2 if m.security else 0)
    w0 = LispType.MAP_REPLY << 28 | fl << 24 | len(m.records)
    return struct.pack("!IQ", w0, m.nonce) + b"".join(encode_eid_record(r) for r in m.records)


def _decode_records(buf: bytes | memoryview, off: int, count: int) -> tuple[list[EidRecord], int]:
    recs = []
    for _ in range(count):
        r, off = decode_eid_record(buf, off)
        recs.append(r)
    return recs, off


def _decode_map_reply(buf: bytes | memoryview) -> MapReply:
    if len(buf) < 12:
        raise DecodeError("Map-Reply truncated")
    w0, nonce = struct.unpack_from("!IQ", buf, 0)
    recs, _ = _decode_records(buf, 12, w0 & 0xFF)
    fl = (w0 >> 24) & 0xF
    return MapReply(nonce, tuple(recs), bool(fl & 8), bool(fl & 4), bool(fl & 2))


@dataclass(frozen=True, slots=True)
class MapRegister:
    """RFC 9301 sections 5.6 (Map-Register) and 5.7 (Map-Notify / -Ack: same body).

    ``msg_type`` is 3, 4 or 5.  ``auth_data`` is whatever is on the wire;
    :func:`sign` fills it in.
    """

    nonce: int
    records: tuple[EidRecord, ...]
    key_id: int = 0
    algorithm_id: int = AlgorithmId.HMAC_SHA_256_128
    auth_data: bytes = b""
    msg_type: int = LispType.MAP_REGISTER
    proxy_reply: bool = False
    security: bool = False
    want_map_notify: bool = False
    use_ttl: bool = False
    eid_notify: bool = False
    merge: bool = False
    xtr_id: bytes | None = None  # 16 bytes when the I-bit is set
    site_id: bytes | None = None  # 8 bytes when the I-bit is set
    raw_flags: int = field(default=0, compare=False)


_AUTH_HASH = {
    AlgorithmId.HMAC_SHA_1_96: (hashlib.sha1, 12, 20),
    AlgorithmId.HMAC_SHA_256_128: (hashlib.sha256, 16, 32),
    AlgorithmId.HMAC_SHA_256_128_HKDF_SHA256: (hashlib.sha256, 16, 32),
}


def auth_len(algorithm_id: int) -> int:
    """RFC 9301 / RFC 2404 / RFC 4868 truncated MAC lengths (0 for None)."""
    if algorithm_id == AlgorithmId.NONE:
        return 0
    try:
        return _AUTH_HASH[AlgorithmId(algorithm_id)][1]
    except (KeyError, ValueError):
        raise ValueError(f"unsupported algorithm id {algorithm_id}") from None


def _w0_register(m: MapRegister) -> int:
    if m.msg_type == LispType.MAP_REGISTER:
        fl = (
            (0x8 if m.proxy_reply else 0) << 24
            | (0x4 if m.security else 0) << 24
            | (0x2 if m.xtr_id is not None else 0) << 24
            | (0x1000 if m.eid_notify else 0)
            | (0x800 if m.use_ttl else 0)
            | (0x400 if m.merge else 0)
            | (0x100 if m.want_map_notify else 0)
        )
    else:
        fl = (0x08 if m.xtr_id is not None else 0) << 24
    return m.msg_type << 28 | fl | len(m.records)


def encode_map_register(m: MapRegister, auth_data: bytes | None = None) -> bytes:
    ad = m.auth_data if auth_data is None else auth_data
    out = [
        struct.pack("!IQBBH", _w0_register(m), m.nonce, m.key_id, m.algorithm_id, len(ad)),
        ad,
    ]
    out += [encode_eid_record(r) for r in m.records]
    if m.xtr_id is not None:
        out.append(m.xtr_id.ljust(16, b"\x00")[:16] + (m.site_id or b"").ljust(8, b"\x00")[:8])
    return b"".join(out)


def _decode_map_register(buf: bytes | memoryview) -> MapRegister:
    if len(buf) < 16:
        raise DecodeError("Map-Register/Notify truncated")
    w0, nonce, key_id, alg, alen = struct.unpack_from("!IQBBH", buf, 0)
    typ = w0 >> 28
    if 16 + alen > len(buf):
        raise DecodeError("authentication data truncated")
    ad = bytes(buf[16 : 16 + alen])
    recs, off = _decode_records(buf, 16 + alen, w0 & 0xFF)
    i_bit = bool(w0 & 0x02000000) if typ == LispType.MAP_REGISTER else bool(w0 & 0x08000000)
    xtr = site = None
    if i_bit:
        if off + 24 > len(buf):
            raise DecodeError("xTR-ID/Site-ID truncated")
        xtr, site = bytes(buf[off : off + 16]), bytes(buf[off + 16 : off + 24])
    reg = typ == LispType.MAP_REGISTER
    return MapRegister(
        nonce,
        tuple(recs),
        key_id,
        alg,
        ad,
        typ,
        reg and bool(w0 & 0x08000000),
        reg and bool(w0 & 0x04000000),
        reg and bool(w0 & 0x100),
        reg and bool(w0 & 0x800),
        reg and bool(w0 & 0x1000),
        reg and bool(w0 & 0x400),
        xtr,
        site,
        (w0 >> 8) & 0xFFFFF,
    )


def _per_msg_key(m: MapRegister, psk: bytes) -> bytes:
    """RFC 9301 section 5.6 step 4: PSK, or HKDF(nonce + PSK, salt) for algorithm 3."""
    if m.algorithm_id == AlgorithmId.HMAC_SHA_256_128_HKDF_SHA256:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.kdf.hkdf import HKDF

        salt = KDF_SALT.get(LispType(m.msg_type), b"")
        ikm = struct.pack("!Q", m.nonce) + psk
        return HKDF(algorithm=hashes.SHA256(), length=32, salt=salt, info=None).derive(ikm)
    return psk


def compute_auth(m: MapRegister, psk: bytes, length: int | None = None) -> bytes:
    """The MAC over the whole message with the authentication data zeroed."""
    if m.algorithm_id == AlgorithmId.NONE:
        return b""
    try:
        hfn, trunc, _full = _AUTH_HASH[AlgorithmId(m.algorithm_id)]
    except (KeyError, ValueError):
        raise ValueError(f"unsupported algorithm id {m.algorithm_id}") from None
    n = trunc if length is None else length
    body = encode_map_register(m, b"\x00" * n)
    return hmac.new(_per_msg_key(m, psk), body, hfn).digest()[:n]


def sign(m: MapRegister, psk: bytes) -> bytes:
    """Encode ``m`` with freshly computed authentication data."""
    return encode_map_register(m, compute_auth(m, psk))


def verify_auth(m: MapRegister, psk: bytes) -> bool:
    """Check the MAC.  Accepts the RFC's truncated length and any longer prefix
    of the full digest (some implementations send all 20/32 bytes)."""
    if m.algorithm_id == AlgorithmId.NONE:
        return False  # never accept unauthenticated registrations
    try:
        _h, trunc, full = _AUTH_HASH[AlgorithmId(m.algorithm_id)]
    except (KeyError, ValueError):
        return False
    n = len(m.auth_data)
    if not trunc <= n <= full:
        return False
    return hmac.compare_digest(compute_auth(m, psk, n), m.auth_data)


@dataclass(frozen=True, slots=True)
class Ecm:
    """RFC 9301 section 5.8: Encapsulated Control Message; ``inner`` is an IP packet."""

    inner: bytes
    security: bool = False
    ddt: bool = False


def encode_ecm(e: Ecm) -> bytes:
    w0 = LispType.ECM << 28 | (0x08000000 if e.security else 0) | (0x04000000 if e.ddt else 0)
    return struct.pack("!I", w0) + e.inner


ControlMessage = Union[MapRequest, MapReply, MapRegister, Ecm]


def decode_control(buf: bytes | memoryview) -> ControlMessage:
    """Decode a UDP/4342 payload."""
    if len(buf) < 4:
        raise DecodeError("LISP control message truncated")
    typ = buf[0] >> 4
    if typ == LispType.MAP_REQUEST:
        return _decode_map_request(buf)
    if typ == LispType.MAP_REPLY:
        return _decode_map_reply(buf)
    if typ in (LispType.MAP_REGISTER, LispType.MAP_NOTIFY, LispType.MAP_NOTIFY_ACK):
        return _decode_map_register(buf)
    if typ == LispType.ECM:
        (w0,) = struct.unpack_from("!I", buf, 0)
        return Ecm(bytes(buf[4:]), bool(w0 & 0x08000000), bool(w0 & 0x04000000))
    raise DecodeError(f"unsupported LISP message type {typ}")


def encode_control(m: ControlMessage) -> bytes:
    if isinstance(m, MapRequest):
        return encode_map_request(m)
    if isinstance(m, MapReply):
        return encode_map_reply(m)
    if isinstance(m, MapRegister):
        return encode_map_register(m)
    return encode_ecm(m)


def ecm_wrap(inner_msg: bytes, src: bytes, dst: bytes, sport: int, dport: int = 4342) -> bytes:
    """ECM around a control message: LISP type 8 + inner IP + UDP (RFC 9301 5.8)."""
    return encode_ecm(Ecm(build_ip(src, dst, 17, build_udp(sport, dport, inner_msg))))


def ecm_unwrap(e: Ecm) -> tuple[IpPacket, int, int, memoryview]:
    """(inner IP, inner sport, inner dport, inner LISP message)."""
    ip = decode_ip(e.inner)
    if ip.proto != 17:
        raise DecodeError("ECM inner packet is not UDP")
    sport, dport, msg = decode_udp(ip.payload)
    return ip, sport, dport, msg
