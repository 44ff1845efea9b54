"""Fast struct-based codecs for LISP data/control messages and CoreCast PDUs.

Same bytes as the scapy layers in :mod:`corecast.wire.layers` (a hypothesis
test proves it).  Every ``decode_*`` function accepts arbitrary bytes and
returns a value or raises :class:`DecodeError`, nothing else.

References: RFC 9300 section 5 (data header); RFC 9301 sections 5.2-5.8
(control messages, in :mod:`corecast.wire.lispctl`, re-exported here; addresses
and inner IP/UDP headers in :mod:`corecast.wire.ip`, re-exported here); the CoreCast
paper section 3.2 (payload and header PDUs;
our byte layout is documented in docs/wire-corecast.md).
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass

from corecast.wire.constants import (
    AFI_ADDR_LEN,
    CORECAST_VERSION,
    HASH_LEN,
    Afi,
    CoreCastType,
    HashId,
)

# Addresses and inner IP/UDP headers live in corecast.wire.ip, the LISP control
# messages in corecast.wire.lispctl (which imports ip, never this module).  Both
# are re-exported here by name so ``from corecast.wire.codec import MapReply``
# keeps working, with real types; new code imports from the defining module.
from corecast.wire.ip import (  # re-exported: "X as X" (PEP 484)
    DecodeError as DecodeError,
    IPAddress as IPAddress,
    IpPacket as IpPacket,
    afi_of as afi_of,
    build_ip as build_ip,
    build_ipv4 as build_ipv4,
    build_ipv6 as build_ipv6,
    build_udp as build_udp,
    decode_afi_addr as decode_afi_addr,
    decode_eid_addr as decode_eid_addr,
    decode_ip as decode_ip,
    decode_udp as decode_udp,
    encode_afi_addr as encode_afi_addr,
    encode_eid_addr as encode_eid_addr,
    ip_checksum as ip_checksum,
)
from corecast.wire.lispctl import (  # re-exported: "X as X" (PEP 484)
    Ecm as Ecm,
    EidRecord as EidRecord,
    LocatorRecord as LocatorRecord,
    MapRegister as MapRegister,
    MapReply as MapReply,
    MapRequest as MapRequest,
    auth_len as auth_len,
    compute_auth as compute_auth,
    decode_control as decode_control,
    decode_eid_record as decode_eid_record,
    ecm_unwrap as ecm_unwrap,
    ecm_wrap as ecm_wrap,
    encode_control as encode_control,
    encode_ecm as encode_ecm,
    encode_eid_record as encode_eid_record,
    encode_map_register as encode_map_register,
    encode_map_reply as encode_map_reply,
    encode_map_request as encode_map_request,
    sign as sign,
    verify_auth as verify_auth,
)

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


CCPdu = CCPayload | CCHeader


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
        return encode_cc_payload(pdu.seq, pdu.payload, pdu.hash_id, pdu.hash, pdu.flags,
                                 pdu.version)
    return encode_cc_header(pdu.seq, pdu.hash, pdu.eid, pdu.port, pdu.hash_id, pdu.flags,
                            pdu.version)


def decode_cc(buf: bytes | memoryview) -> CCPdu:
    """Decode one CoreCast PDU; trailing bytes after a header PDU are an error."""
    n = len(buf)
    if n < CC_PAYLOAD_FIXED:
        raise DecodeError("CoreCast PDU truncated")
    vt, hash_id, hlen, flags, seq, f1, f2 = _CC_PAYLOAD.unpack_from(buf, 0)
    version, typ = vt >> 4, vt & 0xF
    if version != CORECAST_VERSION:
        raise DecodeError(f"CoreCast version {version}")
    known = HASH_LEN.get(hash_id)
    if known is not None and known != hlen:
        raise DecodeError("hash length does not match hash id")
    if hlen == 0:
        raise DecodeError("empty hash")
    off = CC_PAYLOAD_FIXED
    if typ == CoreCastType.PAYLOAD:
        end = off + hlen + f1
        if end != n:
            raise DecodeError("payload length does not match PDU length")
        return CCPayload(seq, bytes(buf[off : off + hlen]), bytes(buf[off + hlen : end]), hash_id,
                         flags, version)
    if typ == CoreCastType.HEADER:
        elen = AFI_ADDR_LEN.get(f2)
        if not elen:
            raise DecodeError(f"header EID AFI {f2}")
        if off + hlen + elen != n:
            raise DecodeError("header PDU length")
        return CCHeader(seq, bytes(buf[off : off + hlen]), bytes(buf[off + hlen : n]), f1, hash_id,
                        flags, version)
    raise DecodeError(f"CoreCast type {typ}")


def cc_header_len(hash_id: int = HashId.SHA1, eid_len: int = 4) -> int:
    return CC_HEADER_FIXED + HASH_LEN[HashId(hash_id)] + eid_len


def cc_payload_overhead(hash_id: int = HashId.SHA1) -> int:
    return CC_PAYLOAD_FIXED + HASH_LEN[HashId(hash_id)]

