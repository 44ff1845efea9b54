"""AFI-encoded addresses (RFC 9301 section 5.1, RFC 8060 LCAF Instance ID) and
the inner IP / UDP headers the xTRs build and read (RFC 791, RFC 8200, RFC 768).

The bottom of :mod:`corecast.wire`: both :mod:`corecast.wire.codec` (data plane,
CoreCast PDUs) and :mod:`corecast.wire.lispctl` (control messages) import it, and
it imports neither.  Decoders raise only :class:`DecodeError`.
"""

from __future__ import annotations

import ipaddress
import struct
from dataclasses import dataclass

from corecast.wire.constants import AFI_ADDR_LEN, AFI_LCAF, LCAF_INSTANCE_ID, Afi
from deliverykit import errors

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class DecodeError(errors.DecodeError):
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
    n = AFI_ADDR_LEN.get(afi)
    if n is None:
        raise DecodeError(f"unsupported AFI {afi}")
    if off + n > len(buf):
        raise DecodeError("truncated address")
    if n == 0:
        return None, off
    raw = bytes(buf[off : off + n])
    addr: IPAddress = ipaddress.IPv4Address(raw) if n == 4 else ipaddress.IPv6Address(raw)
    return addr, off + n


def encode_eid_addr(addr: IPAddress | None, iid: int = 0) -> bytes:
    """An EID address: plain AFI for instance 0, else LCAF type 2 (RFC 8060 section
    4.1): AFI 16387, Rsvd1, Flags, Type 2, IID mask-len 0, Length, Instance ID,
    then the AFI-encoded address."""
    if not iid:
        return encode_afi_addr(addr)
    inner = encode_afi_addr(addr)
    return struct.pack("!HBBBBHI", AFI_LCAF, 0, 0, LCAF_INSTANCE_ID, 0, 4 + len(inner),
                       iid & 0xFFFFFFFF) + inner


def decode_eid_addr(buf: bytes | memoryview, off: int) -> tuple[IPAddress | None, int, int]:
    """(address, Instance ID (0 for a plain AFI), new offset); LCAF types other
    than Instance ID, nested LCAFs and inconsistent lengths are DecodeErrors."""
    if off + 2 > len(buf):
        raise DecodeError("truncated AFI")
    (afi,) = struct.unpack_from("!H", buf, off)
    if afi != AFI_LCAF:
        a, off = decode_afi_addr(buf, off)
        return a, 0, off
    if off + 12 > len(buf):
        raise DecodeError("truncated LCAF")
    _afi, _r, _f, typ, _ml, length, iid = struct.unpack_from("!HBBBBHI", buf, off)
    if typ != LCAF_INSTANCE_ID:
        raise DecodeError(f"unsupported LCAF type {typ}")
    a, end = decode_afi_addr(buf, off + 12)
    if end - (off + 8) != length:
        raise DecodeError("LCAF length does not match its address")
    return a, iid, end


# --------------------------------------------------------------------------
# Inner IP / UDP headers (RFC 791, RFC 8200, RFC 768)
# --------------------------------------------------------------------------


def ip_checksum(data: bytes | bytearray | memoryview) -> int:
    if len(data) % 2:
        data = bytes(data) + b"\x00"
    s: int = sum(struct.unpack(f"!{len(data) // 2}H", data))
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
    raise errors.LocalProtocolError("source and destination must both be IPv4 or both IPv6")


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
