"""Fast struct codecs for the LISP control messages of RFC 9301 section 5:
Map-Request, Map-Reply, Map-Register / Map-Notify / Map-Notify-Ack (with
HMAC authentication, section 5.6), ECM, EID and locator records.

Same bytes as the scapy layers in :mod:`corecast.wire.layers`.  Re-exported by
:mod:`corecast.wire.codec`; imports only :mod:`corecast.wire.ip` (no circle).
Decoders raise only :class:`DecodeError`.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import struct
from dataclasses import dataclass, field

from corecast.wire.constants import KDF_SALT, AlgorithmId, LispType
from corecast.wire.ip import (
    DecodeError,
    IPAddress,
    IpPacket,
    build_ip,
    build_udp,
    decode_afi_addr,
    decode_eid_addr,
    decode_ip,
    decode_udp,
    encode_afi_addr,
    encode_eid_addr,
)

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
    #: Instance ID (RFC 9300 section 8): non-zero is encoded as an LCAF Instance ID
    #: address (RFC 8060 section 4.1); 0 is the default instance, a plain AFI address
    iid: int = 0


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
    ) + encode_eid_addr(net.network_address, rec.iid)
    return out + b"".join(_encode_locator(loc) for loc in rec.locators)


def decode_eid_record(buf: bytes | memoryview, off: int) -> tuple[EidRecord, int]:
    if off + 10 > len(buf):
        raise DecodeError("EID record truncated")
    ttl, nloc, mlen, w, mv = struct.unpack_from("!IBBHH", buf, off)
    addr, iid, off = decode_eid_addr(buf, off + 10)
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
    rec = EidRecord(prefix, tuple(locs), ttl, w >> 13, bool(w & 0x1000), mv & 0xFFF, iid)
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
    #: Instance ID of each EID prefix (RFC 8060 LCAF type 2), or () when all are 0
    eid_iids: tuple[int, ...] = ()
    #: Instance ID of the Source EID (an LCAF Instance ID address when non-zero)
    source_iid: int = 0


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
    out = [struct.pack("!IQ", w0, m.nonce), encode_eid_addr(m.source_eid, m.source_iid)]
    out += [encode_afi_addr(r) for r in m.itr_rlocs]
    if m.eid_iids and len(m.eid_iids) != len(m.eid_prefixes):
        raise ValueError("Map-Request: one Instance ID per EID prefix")
    for i, p in enumerate(m.eid_prefixes):
        iid = m.eid_iids[i] if m.eid_iids else 0
        out.append(struct.pack("!BB", 0, p.prefixlen) + encode_eid_addr(p.network_address, iid))
    if m.map_reply_record is not None:
        out.append(encode_eid_record(m.map_reply_record))
    return b"".join(out)


def _decode_map_request(buf: bytes | memoryview) -> MapRequest:
    if len(buf) < 12:
        raise DecodeError("Map-Request truncated")
    w0, nonce = struct.unpack_from("!IQ", buf, 0)
    irc = ((w0 >> 8) & 0x1F) + 1
    count = w0 & 0xFF
    src, src_iid, off = decode_eid_addr(buf, 12)  # RFC 8060 sec. 4.1: may be an LCAF
    rlocs = []
    for _ in range(irc):
        r, off = decode_afi_addr(buf, off)
        if r is None:
            raise DecodeError("ITR-RLOC with AFI 0")
        rlocs.append(r)
    prefixes = []
    iids = []
    for _ in range(count):
        if off + 2 > len(buf):
            raise DecodeError("Map-Request record truncated")
        mlen = buf[off + 1]
        a, iid, off = decode_eid_addr(buf, off + 2)
        if a is None or mlen > a.max_prefixlen:
            raise DecodeError("bad Map-Request EID prefix")
        prefixes.append(ipaddress.ip_network(f"{a}/{mlen}", strict=False))
        iids.append(iid)
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
        tuple(iids) if any(iids) else (),
        src_iid,
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
    #: R bit, "built for an RTR" (RFC 9301 sec. 5.7 Map-Notify; lisp-nat-traversal Map-Register):
    #: Map-Register flags bit 0x01000000, Map-Notify / -Ack bit 0x04000000 (as tshark decodes them)
    rtr: bool = False


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
            | (0x1 if m.rtr else 0) << 24
            | (0x1000 if m.eid_notify else 0)
            | (0x800 if m.use_ttl else 0)
            | (0x400 if m.merge else 0)
            | (0x100 if m.want_map_notify else 0)
        )
    else:
        fl = (0x08 if m.xtr_id is not None else 0) << 24 | (0x04 if m.rtr else 0) << 24
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
        bool(w0 & 0x01000000) if reg else bool(w0 & 0x04000000),
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


ControlMessage = MapRequest | MapReply | MapRegister | Ecm


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
