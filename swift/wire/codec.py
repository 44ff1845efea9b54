"""Fast struct-based PPSPP codec (RFC 7574 section 8): same bytes as layers.py.

A UDP datagram is a 4-byte destination channel ID followed by messages, each
starting with its type octet (section 8.2).  Message lengths depend on the
negotiated chunk addressing method, hash size and signature size, so both
directions take a :class:`WireContext`.  Chunk specifications are kept as
wire values: ``start``/``end`` for ranges (chunks or bytes, end inclusive,
section 4.1) and ``start == end == bin`` for bin addressing (section 4.2).

Decoding never raises on message content: an unknown type or a truncated or
malformed message ends the parse and is reported in ``Decoded.error`` so the
caller can count it (section 3: "the remaining messages MUST be discarded").
Only a datagram shorter than a channel ID raises :class:`DecodeError`.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from deliverykit import errors
from swift._fast import decode_msgs
from swift.wire.constants import (
    HASH_SIZES,
    NONE32,
    NONE64,
    SIG_SIZES,
    SPEC_SIZES,
    ChunkAddressing,
    HashFunc,
    IntegrityMethod,
    MsgType,
    Option,
    SigAlg,
)


class DecodeError(errors.DecodeError):
    """The datagram cannot be parsed at all (shorter than a channel ID)."""


class EncodeError(ValueError):
    """A message cannot be expressed with the given wire context."""


@dataclass(frozen=True, slots=True)
class WireContext:
    """What a peer must know to size messages (handshake outcome, section 7)."""

    #: chunk addressing method (7.8); RFC default 32-bit chunk ranges
    addressing: ChunkAddressing = ChunkAddressing.CHUNK32
    #: Merkle hash size in bytes (7.6)
    hash_size: int = 32
    #: live signature size in bytes (8.9)
    sig_size: int = 64
    #: chunk size in bytes, or VARIABLE_CHUNK_SIZE (7.11)
    chunk_size: int = 1024

    @staticmethod
    def make(
        addressing: ChunkAddressing = ChunkAddressing.CHUNK32,
        hash_func: HashFunc = HashFunc.SHA256,
        sig_alg: SigAlg = SigAlg.ECDSAP256SHA256,
        chunk_size: int = 1024,
    ) -> WireContext:
        """Build from option values rather than sizes."""
        return WireContext(
            ChunkAddressing(addressing), HASH_SIZES[HashFunc(hash_func)],
            SIG_SIZES.get(SigAlg(sig_alg), 64), chunk_size,
        )

    @property
    def is_bin(self) -> bool:
        """True for 32/64-bit bin addressing (one integer per spec)."""
        return self.addressing in (ChunkAddressing.BIN32, ChunkAddressing.BIN64)

    @property
    def spec_size(self) -> int:
        """Bytes of one chunk specification."""
        return SPEC_SIZES[self.addressing]

    @property
    def wide(self) -> bool:
        """True when the addressing uses 64-bit integers."""
        return self.addressing in (
            ChunkAddressing.BYTE64, ChunkAddressing.BIN64, ChunkAddressing.CHUNK64
        )


# --------------------------------------------------------------------------
# messages (frozen, slotted)


@dataclass(frozen=True, slots=True)
class HandshakeOptions:
    """Protocol options of a HANDSHAKE (section 7); None = option absent."""

    version: int | None = None
    min_version: int | None = None
    swarm_id: bytes | None = None
    integrity: int | None = None
    hash_func: int | None = None
    sig_alg: int | None = None
    addressing: int | None = None
    discard_window: int | None = None
    #: compressed supported-messages bitmap (7.10), as on the wire
    supported: bytes | None = None
    chunk_size: int | None = None
    #: decoded from libswift's legacy (pre-PPSPP) swift handshake, not from
    #: options: see :func:`decode_legacy_handshake`
    legacy: bool = False


@dataclass(frozen=True, slots=True)
class Handshake:
    """HANDSHAKE (3.1, 8.4); channel 0 with no/version-only options closes."""

    channel: int
    options: HandshakeOptions = field(default_factory=HandshakeOptions)
    type = MsgType.HANDSHAKE

    @property
    def is_close(self) -> bool:
        """True for the closing handshake (all-zeros source channel, 8.4)."""
        return self.channel == 0


@dataclass(frozen=True, slots=True)
class Data:
    """DATA (3.3, 8.6): chunk spec, 64-bit microsecond timestamp, chunk."""

    start: int
    end: int
    timestamp: int
    payload: bytes
    type = MsgType.DATA


@dataclass(frozen=True, slots=True)
class Ack:
    """ACK (3.4, 8.7): chunk spec and one-way delay sample in microseconds."""

    start: int
    end: int
    delay: int
    type = MsgType.ACK


@dataclass(frozen=True, slots=True)
class Have:
    """HAVE (3.2, 8.5): verified chunks the sender offers."""

    start: int
    end: int
    type = MsgType.HAVE


@dataclass(frozen=True, slots=True)
class Integrity:
    """INTEGRITY (3.5, 8.8): hash of the Merkle node covering the spec."""

    start: int
    end: int
    hash: bytes
    type = MsgType.INTEGRITY


@dataclass(frozen=True, slots=True)
class SignedIntegrity:
    """SIGNED_INTEGRITY (3.6, 8.9): spec, NTP timestamp, signature."""

    start: int
    end: int
    timestamp: int
    signature: bytes
    type = MsgType.SIGNED_INTEGRITY


@dataclass(frozen=True, slots=True)
class Request:
    """REQUEST (3.7, 8.10)."""

    start: int
    end: int
    type = MsgType.REQUEST


@dataclass(frozen=True, slots=True)
class Cancel:
    """CANCEL (3.8, 8.11)."""

    start: int
    end: int
    type = MsgType.CANCEL


@dataclass(frozen=True, slots=True)
class Choke:
    """CHOKE (3.9, 8.12): no payload."""

    type = MsgType.CHOKE


@dataclass(frozen=True, slots=True)
class Unchoke:
    """UNCHOKE (3.9, 8.12): no payload."""

    type = MsgType.UNCHOKE


@dataclass(frozen=True, slots=True)
class PexReq:
    """PEX_REQ (3.10, 8.13): no payload."""

    type = MsgType.PEX_REQ


@dataclass(frozen=True, slots=True)
class PexResV4:
    """PEX_RESv4 (8.13): dotted IPv4 address and UDP port."""

    ip: str
    port: int
    type = MsgType.PEX_RESv4


@dataclass(frozen=True, slots=True)
class PexResV6:
    """PEX_RESv6 (8.13): IPv6 address and UDP port."""

    ip: str
    port: int
    type = MsgType.PEX_RESv6


@dataclass(frozen=True, slots=True)
class PexResCert:
    """PEX_REScert (8.13): DER membership certificate."""

    cert: bytes
    type = MsgType.PEX_REScert


Message = (
    Handshake | Data | Ack | Have | Integrity | SignedIntegrity | Request | Cancel
    | Choke | Unchoke | PexReq | PexResV4 | PexResV6 | PexResCert
)

#: one message as :func:`decode_raw` gives it: (type, start, end, x, y)
RawMessage: TypeAlias = tuple[int, int, int, Any, Any]


@dataclass(frozen=True, slots=True)
class Decoded:
    """One parsed datagram."""

    #: destination channel ID (0 = handshake initiation, 3.11)
    channel: int
    #: messages parsed before the end or the first bad message (each a :data:`Message`;
    #: typed Any until its readers match on the message class instead of ``m.type``)
    messages: list[Any]
    #: None when every byte was consumed, else why the parse stopped
    error: str | None = None

    @property
    def is_keepalive(self) -> bool:
        """A bare channel ID (8.14)."""
        return not self.messages and self.error is None


# --------------------------------------------------------------------------
# encoding

_U8 = struct.Struct(">B")
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")
_CHAN = _U32


def encode_spec(ctx: WireContext, start: int, end: int) -> bytes:
    """The chunk specification bytes for ``start``..``end`` (bin: start)."""
    a = ctx.addressing
    try:
        if a == ChunkAddressing.BIN32:
            return _U32.pack(start)
        if a == ChunkAddressing.BIN64:
            return _U64.pack(start)
        if a == ChunkAddressing.CHUNK32:
            return struct.pack(">II", start, end)
        return struct.pack(">QQ", start, end)
    except struct.error as exc:
        raise EncodeError(f"chunk spec {start}..{end} does not fit {a.name}") from exc


def encode_options(opts: HandshakeOptions, ctx: WireContext | None = None) -> bytes:
    """Protocol options sorted by code (section 7) and the end option."""
    out = bytearray()
    if opts.version is not None:
        out += bytes((Option.VERSION, opts.version))
    if opts.min_version is not None:
        out += bytes((Option.MIN_VERSION, opts.min_version))
    if opts.swarm_id is not None:
        out += bytes((Option.SWARM_ID,)) + _U16.pack(len(opts.swarm_id)) + opts.swarm_id
    if opts.integrity is not None:
        out += bytes((Option.CONTENT_INTEGRITY, opts.integrity))
    if opts.hash_func is not None:
        out += bytes((Option.MERKLE_HASH_FUNC, opts.hash_func))
    if opts.sig_alg is not None:
        out += bytes((Option.LIVE_SIGNATURE_ALG, opts.sig_alg))
    if opts.addressing is not None:
        out += bytes((Option.CHUNK_ADDRESSING, opts.addressing))
    if opts.discard_window is not None:
        cam = opts.addressing if opts.addressing is not None else (
            ctx.addressing if ctx else ChunkAddressing.CHUNK32)
        wide = cam in (ChunkAddressing.BYTE64, ChunkAddressing.BIN64, ChunkAddressing.CHUNK64)
        out += bytes((Option.LIVE_DISCARD_WINDOW,)) + (
            _U64.pack(opts.discard_window) if wide else _U32.pack(opts.discard_window))
    if opts.supported is not None:
        if len(opts.supported) > 32:
            raise EncodeError("supported messages bitmap longer than 256 bits")
        out += bytes((Option.SUPPORTED_MESSAGES, len(opts.supported))) + opts.supported
    if opts.chunk_size is not None:
        out += bytes((Option.CHUNK_SIZE,)) + _U32.pack(opts.chunk_size)
    out.append(Option.END)
    return bytes(out)


def encode_message(ctx: WireContext, m: Message) -> bytes:
    """Bytes of one message (type octet included)."""
    match m:
        case Handshake():
            return b"\x00" + _U32.pack(m.channel) + encode_options(m.options, ctx)
        case Data():
            return (b"\x01" + encode_spec(ctx, m.start, m.end)
                    + _U64.pack(m.timestamp) + m.payload)
        case Ack():
            return b"\x02" + encode_spec(ctx, m.start, m.end) + _U64.pack(m.delay)
        case Have() | Request() | Cancel():
            return bytes((m.type,)) + encode_spec(ctx, m.start, m.end)
        case Integrity():
            if len(m.hash) != ctx.hash_size:
                raise EncodeError("hash size does not match the context")
            return b"\x04" + encode_spec(ctx, m.start, m.end) + m.hash
        case SignedIntegrity():
            if len(m.signature) != ctx.sig_size:
                raise EncodeError("signature size does not match the context")
            return (b"\x07" + encode_spec(ctx, m.start, m.end)
                    + _U64.pack(m.timestamp) + m.signature)
        case Choke() | Unchoke() | PexReq():
            return bytes((m.type,))
        case PexResV4():
            return b"\x05" + socket.inet_pton(socket.AF_INET, m.ip) + _U16.pack(m.port)
        case PexResV6():
            return b"\x0c" + socket.inet_pton(socket.AF_INET6, m.ip) + _U16.pack(m.port)
        case PexResCert():
            return b"\x0d" + _U16.pack(len(m.cert)) + m.cert
    raise EncodeError(f"unknown message {m!r}")


def encode_datagram(ctx: WireContext, channel: int, messages: list[Message]) -> bytes:
    """Channel ID followed by the messages (an empty list is a keep-alive)."""
    return _CHAN.pack(channel) + b"".join(encode_message(ctx, m) for m in messages)


def encode_data(ctx: WireContext, start: int, end: int, timestamp: int, payload: bytes) -> bytes:
    """Hot path: one DATA message."""
    return b"\x01" + encode_spec(ctx, start, end) + _U64.pack(timestamp) + payload


# --------------------------------------------------------------------------
# decoding

#: libswift's legacy swift handshake (docs/swift-libswift-compat.md row 12):
#: channel 0, INTEGRITY (04) for bin32 0x7fffffff (the root, "bin ALL") with a
#: 20-byte SHA-1 root hash, then HANDSHAKE (00) with the initiator's channel
#: and no options.  A channel-0 PPSPP datagram always starts with HANDSHAKE
#: (RFC 7574 3.1.1), so a leading INTEGRITY is never ambiguous.
LEGACY_HANDSHAKE_SIZE = 4 + 1 + 4 + 20 + 1 + 4
_LEGACY_ALL = b"\x04\x7f\xff\xff\xff"


def is_legacy_handshake(data: bytes) -> bool:
    """True for libswift's legacy swift handshake initiation (see above)."""
    return (len(data) >= LEGACY_HANDSHAKE_SIZE and data[:4] == b"\0\0\0\0"
            and data[4:9] == _LEGACY_ALL and data[29] == MsgType.HANDSHAKE)


def decode_legacy_handshake(data: bytes) -> tuple[int, HandshakeOptions, int]:
    """``(initiator channel, options, bytes consumed)`` of a legacy swift
    handshake: the options are what it implies (version 0 = legacy swift in
    libswift's numbering, RFC 7574 table 3 "reserved"; Merkle, SHA-1, bin32)."""
    if not is_legacy_handshake(data):
        raise DecodeError("not a legacy swift handshake")
    opts = HandshakeOptions(
        version=0, min_version=0, swarm_id=bytes(data[9:29]),
        integrity=IntegrityMethod.MERKLE, hash_func=HashFunc.SHA1,
        addressing=ChunkAddressing.BIN32, legacy=True)
    return _CHAN.unpack_from(data, 30)[0], opts, LEGACY_HANDSHAKE_SIZE


#: the one-byte options (7.1-7.7): code -> HandshakeOptions field
_BYTE_OPTIONS = {0: "version", 1: "min_version", 3: "integrity", 4: "hash_func",
                 5: "sig_alg", 6: "addressing"}


def _decode_options(buf: bytes, pos: int, n: int, ctx: WireContext
                    ) -> tuple[HandshakeOptions, int] | tuple[None, str]:
    """Parse options from ``pos``; returns (HandshakeOptions, pos) or (None, reason)."""
    vals: dict[str, Any] = {}
    last = -1
    cam = None
    while True:
        if pos >= n:
            return None, "handshake without end option"
        code = buf[pos]
        pos += 1
        if code == Option.END:
            return HandshakeOptions(**vals), pos
        if code <= last:
            return None, "options not sorted or repeated"
        last = code
        if code in _BYTE_OPTIONS:
            if pos >= n:
                return None, "truncated option"
            v = buf[pos]
            pos += 1
            vals[_BYTE_OPTIONS[code]] = v
            if code == 6:
                cam = v
        elif code == Option.SWARM_ID:
            if pos + 2 > n:
                return None, "truncated swarm id"
            ln = (buf[pos] << 8) | buf[pos + 1]
            pos += 2
            if pos + ln > n:
                return None, "truncated swarm id"
            vals["swarm_id"] = bytes(buf[pos:pos + ln])
            pos += ln
        elif code == Option.LIVE_DISCARD_WINDOW:
            a = cam if cam is not None else ctx.addressing
            w = 8 if a in (1, 3, 4) else 4
            if pos + w > n:
                return None, "truncated discard window"
            vals["discard_window"] = int.from_bytes(buf[pos:pos + w], "big")
            pos += w
        elif code == Option.SUPPORTED_MESSAGES:
            if pos >= n:
                return None, "truncated supported messages"
            ln = buf[pos]
            pos += 1
            if ln > 32 or pos + ln > n:
                return None, "bad supported messages length"
            vals["supported"] = bytes(buf[pos:pos + ln])
            pos += ln
        elif code == Option.CHUNK_SIZE:
            if pos + 4 > n:
                return None, "truncated chunk size"
            vals["chunk_size"] = _U32.unpack_from(buf, pos)[0]
            pos += 4
        else:
            return None, f"unknown option {code}"


def decode_raw(data: bytes, ctx: WireContext) -> tuple[int, list[RawMessage], str | None]:
    """The parser behind :func:`decode_datagram`, without message objects
    (the peer's receive path): ``(channel, messages, error)`` with every
    message a 5-tuple ``(type, a, b, c, d)``:

    ========================  ===================================
    DATA                      (1, start, end, timestamp, payload)
    ACK                       (2, start, end, delay, None)
    HAVE, REQUEST, CANCEL     (t, start, end, None, None)
    INTEGRITY                 (4, start, end, hash, None)
    SIGNED_INTEGRITY          (7, start, end, timestamp, signature)
    HANDSHAKE                 (0, channel, 0, HandshakeOptions, None)
    CHOKE, UNCHOKE, PEX_REQ   (t, 0, 0, None, None)
    PEX_RESv4, PEX_RESv6      (t, 0, 0, ip, port)
    PEX_REScert               (13, 0, 0, cert, None)
    ========================  ===================================
    """
    n = len(data)
    if n < 4:
        raise DecodeError(f"datagram of {n} bytes is shorter than a channel ID")
    buf = data if type(data) is bytes else bytes(data)
    channel = _CHAN.unpack_from(buf, 0)[0]
    out: list[RawMessage] = []
    app = out.append
    pos = 4
    if channel == 0 and n > 4 and buf[4] == MsgType.INTEGRITY and is_legacy_handshake(buf):
        chan, opts, pos = decode_legacy_handshake(buf)
        out.append((0, chan, 0, opts, None))
        if pos < n:  # legacy messages after it are in another dialect: not parsed
            return channel, out, "legacy swift messages after the handshake"
        return channel, out, None
    a = int(ctx.addressing)
    hs = ctx.hash_size
    sigs = ctx.sig_size
    cs = ctx.chunk_size
    error = None
    while pos < n:
        # DATA, ACK, HAVE, INTEGRITY, SIGNED_INTEGRITY, REQUEST, CANCEL,
        # PEX_REQ, CHOKE, UNCHOKE: the C fast path (twin in swift/_fast.py)
        got, pos, error = decode_msgs(buf, pos, a, hs, sigs, cs)
        out += got
        if error is not None or pos >= n:
            break
        t = buf[pos]
        p = pos + 1
        if t == 0:
            if p + 4 > n:
                error = "truncated HANDSHAKE"
                break
            chan = _CHAN.unpack_from(buf, p)[0]
            parsed = _decode_options(buf, p + 4, n, ctx)
            if parsed[0] is None:
                error = parsed[1]
                break
            app((0, chan, 0, parsed[0], None))
            p = parsed[1]
        elif t == 5:
            if p + 6 > n:
                error = "truncated PEX_RESv4"
                break
            app((5, 0, 0, socket.inet_ntop(socket.AF_INET, buf[p:p + 4]),
                 (buf[p + 4] << 8) | buf[p + 5]))
            p += 6
        elif t == 12:
            if p + 18 > n:
                error = "truncated PEX_RESv6"
                break
            app((12, 0, 0, socket.inet_ntop(socket.AF_INET6, buf[p:p + 16]),
                 (buf[p + 16] << 8) | buf[p + 17]))
            p += 18
        elif t == 13:
            if p + 2 > n:
                error = "truncated PEX_REScert"
                break
            ln = (buf[p] << 8) | buf[p + 1]
            if p + 2 + ln > n:
                error = "truncated PEX_REScert"
                break
            app((13, 0, 0, bytes(buf[p + 2:p + 2 + ln]), None))
            p += 2 + ln
        else:
            error = f"unknown message type {t}"
            break
        pos = p
    return channel, out, error


#: raw 5-tuple -> message object, by type (see :func:`decode_raw`)
_MAKE: dict[int, Callable[[RawMessage], Message]] = {
    0: lambda m: Handshake(m[1], m[3]),
    1: lambda m: Data(m[1], m[2], m[3], m[4]),
    2: lambda m: Ack(m[1], m[2], m[3]),
    3: lambda m: Have(m[1], m[2]),
    4: lambda m: Integrity(m[1], m[2], m[3]),
    5: lambda m: PexResV4(m[3], m[4]),
    6: lambda m: PexReq(),
    7: lambda m: SignedIntegrity(m[1], m[2], m[3], m[4]),
    8: lambda m: Request(m[1], m[2]),
    9: lambda m: Cancel(m[1], m[2]),
    10: lambda m: Choke(),
    11: lambda m: Unchoke(),
    12: lambda m: PexResV6(m[3], m[4]),
    13: lambda m: PexResCert(m[3]),
}


def decode_datagram(data: bytes, ctx: WireContext) -> Decoded:
    """Parse a datagram into messages (see module docstring for errors)."""
    channel, raw, error = decode_raw(data, ctx)
    return Decoded(channel, [_MAKE[m[0]](m) for m in raw], error)


# --------------------------------------------------------------------------
# helpers


def supported_bitmap(types: set[int] | frozenset[int]) -> bytes:
    """Compressed supported-messages bitmap (7.10): bit X (MSB first) = type X."""
    bits = bytearray(32)
    for t in types:
        if not 0 <= t <= 255:
            raise EncodeError("message type out of range")
        bits[t >> 3] |= 0x80 >> (t & 7)
    return bytes(bits).rstrip(b"\x00")


def supported_set(bitmap: bytes) -> frozenset[int]:
    """Inverse of :func:`supported_bitmap`."""
    return frozenset(i * 8 + j for i, b in enumerate(bitmap) for j in range(8) if b & (0x80 >> j))


def none_value(ctx: WireContext) -> int:
    """The 'empty interval' value for the context's integer width (4.2)."""
    return NONE64 if ctx.wide else NONE32
