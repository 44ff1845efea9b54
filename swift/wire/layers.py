"""Scapy layers for PPSPP over UDP (RFC 7574 section 8): the readable spec.

Message sizes depend on the negotiated chunk addressing, hash and signature
sizes; scapy has no per-packet context, so the layers read a module-level
:class:`~swift.wire.codec.WireContext` set with :func:`use_context` (default:
32-bit chunk ranges, SHA-256, ECDSA P-256, 1 KiB chunks).  UDP port 6778 is
bound both ways (the port used in the RFC's figure 1).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from scapy.base_classes import BasePacket
from scapy.fields import (
    ByteEnumField,
    ByteField,
    ConditionalField,
    Field,
    FieldLenField,
    IntField,
    IP6Field,
    IPField,
    PacketListField,
    ShortField,
    StrLenField,
    XStrLenField,
)
from scapy.layers.inet import UDP
from scapy.packet import Packet, bind_layers

from swift.wire import codec
from swift.wire.codec import WireContext
from swift.wire.constants import VARIABLE_CHUNK_SIZE, MsgType, Option

PPSPP_PORT = 6778
_CTX = WireContext()
_LAST_CAM: list[int | None] = [None]


@contextmanager
def use_context(ctx: WireContext) -> Iterator[None]:
    """Dissect and build with ``ctx`` inside the ``with`` block."""
    global _CTX
    old, _CTX = _CTX, ctx
    try:
        yield
    finally:
        _CTX = old


class SpecIntField(Field[int, int]):
    """One integer of a chunk spec: 32 or 64 bits depending on the context."""

    def __init__(self, name: str, default: int = 0) -> None:
        super().__init__(name, default, "!Q")

    def addfield(self, pkt: Packet | None, s: bytes, val: int | None) -> bytes:
        return s + struct.pack(">Q" if _CTX.wide else ">I", self.i2m(pkt, val) or 0)

    def getfield(self, pkt: Packet, s: bytes) -> tuple[bytes, int]:
        w = 8 if _CTX.wide else 4
        return s[w:], int.from_bytes(s[:w], "big")


class _Msg(Packet):
    def extract_padding(self, s: bytes) -> tuple[bytes, bytes]:
        return b"", s


def _spec_fields() -> list[Any]:  # fields and a ConditionalField
    return [SpecIntField("start", 0),
            ConditionalField(SpecIntField("end", 0), lambda p: not _CTX.is_bin)]


class ChunkDataField(StrLenField):
    """DATA payload: one chunk (fixed chunk size) or the rest of the datagram."""

    def getfield(self, pkt: Packet, s: bytes) -> tuple[bytes, bytes]:
        cs = _CTX.chunk_size
        if _CTX.addressing == 1:  # byte ranges: the range gives the length
            ln = pkt.end - pkt.start + 1
        else:
            ln = len(s) if cs == VARIABLE_CHUNK_SIZE or len(s) < cs else cs
        return s[ln:], s[:ln]


class PPSPPData(_Msg):
    name = "PPSPP DATA (8.6)"
    fields_desc = [ByteEnumField("type", 1, MsgType), *_spec_fields(),
                   Field("timestamp", 0, "!Q"), ChunkDataField("chunk", b"")]


class PPSPPAck(_Msg):
    name = "PPSPP ACK (8.7)"
    fields_desc = [ByteEnumField("type", 2, MsgType), *_spec_fields(), Field("delay", 0, "!Q")]


class PPSPPHave(_Msg):
    name = "PPSPP HAVE (8.5)"
    fields_desc = [ByteEnumField("type", 3, MsgType), *_spec_fields()]


class PPSPPIntegrity(_Msg):
    name = "PPSPP INTEGRITY (8.8)"
    fields_desc = [ByteEnumField("type", 4, MsgType), *_spec_fields(),
                   XStrLenField("hash", b"", length_from=lambda p: _CTX.hash_size)]


class PPSPPSignedIntegrity(_Msg):
    name = "PPSPP SIGNED_INTEGRITY (8.9)"
    fields_desc = [ByteEnumField("type", 7, MsgType), *_spec_fields(),
                   Field("timestamp", 0, "!Q"),
                   XStrLenField("signature", b"", length_from=lambda p: _CTX.sig_size)]


class PPSPPRequest(_Msg):
    name = "PPSPP REQUEST (8.10)"
    fields_desc = [ByteEnumField("type", 8, MsgType), *_spec_fields()]


class PPSPPCancel(_Msg):
    name = "PPSPP CANCEL (8.11)"
    fields_desc = [ByteEnumField("type", 9, MsgType), *_spec_fields()]


class PPSPPChoke(_Msg):
    name = "PPSPP CHOKE (8.12)"
    fields_desc = [ByteEnumField("type", 10, MsgType)]


class PPSPPUnchoke(_Msg):
    name = "PPSPP UNCHOKE (8.12)"
    fields_desc = [ByteEnumField("type", 11, MsgType)]


class PPSPPPexReq(_Msg):
    name = "PPSPP PEX_REQ (8.13)"
    fields_desc = [ByteEnumField("type", 6, MsgType)]


class PPSPPPexResV4(_Msg):
    name = "PPSPP PEX_RESv4 (8.13)"
    fields_desc = [ByteEnumField("type", 5, MsgType), IPField("ip", "0.0.0.0"),
                   ShortField("port", 0)]


class PPSPPPexResV6(_Msg):
    name = "PPSPP PEX_RESv6 (8.13)"
    fields_desc = [ByteEnumField("type", 12, MsgType), IP6Field("ip", "::"), ShortField("port", 0)]


class PPSPPPexResCert(_Msg):
    name = "PPSPP PEX_REScert (8.13)"
    fields_desc = [ByteEnumField("type", 13, MsgType),
                   FieldLenField("cert_len", None, length_of="cert", fmt="!H"),
                   StrLenField("cert", b"", length_from=lambda p: p.cert_len)]


# --- handshake options (section 7) ----------------------------------------


class _Opt(Packet):
    def extract_padding(self, s: bytes) -> tuple[bytes, bytes]:
        return b"", s


def _opt8(cls_name: str, code: Option, title: str) -> type[_Opt]:
    return type(cls_name, (_Opt,), {
        "name": f"PPSPP option {title}",
        "fields_desc": [ByteEnumField("code", int(code), Option), ByteField("value", 0)],
    })


OptVersion = _opt8("OptVersion", Option.VERSION, "Version (7.2)")
OptMinVersion = _opt8("OptMinVersion", Option.MIN_VERSION, "Minimum Version (7.3)")
OptIntegrity = _opt8("OptIntegrity", Option.CONTENT_INTEGRITY, "Content Integrity (7.5)")
OptHashFunc = _opt8("OptHashFunc", Option.MERKLE_HASH_FUNC, "Merkle Hash Function (7.6)")
OptSigAlg = _opt8("OptSigAlg", Option.LIVE_SIGNATURE_ALG, "Live Signature Algorithm (7.7)")


class OptAddressing(_Opt):
    name = "PPSPP option Chunk Addressing Method (7.8)"
    fields_desc = [ByteEnumField("code", 6, Option), ByteField("value", 2)]

    def post_dissection(self, pkt: Packet) -> None:
        _LAST_CAM[0] = self.value


class _WindowField(Field[int, int]):
    """Live discard window: width of a bin / range value (7.9)."""

    def __init__(self, name: str, default: int = 0) -> None:
        super().__init__(name, default, "!Q")

    def _wide(self, pkt: Packet | None, building: bool) -> bool:
        cam = None if building else _LAST_CAM[0]
        parent = getattr(pkt, "parent", None)
        if parent is not None:
            for o in getattr(parent, "options", []):
                if isinstance(o, OptAddressing):
                    cam = o.value
        if cam is None:
            return _CTX.wide
        return cam in (1, 3, 4)

    def addfield(self, pkt: Packet | None, s: bytes, val: int | None) -> bytes:
        return s + struct.pack(">Q" if self._wide(pkt, True) else ">I", val or 0)

    def getfield(self, pkt: Packet, s: bytes) -> tuple[bytes, int]:
        w = 8 if self._wide(pkt, False) else 4
        return s[w:], int.from_bytes(s[:w], "big")


class OptDiscardWindow(_Opt):
    name = "PPSPP option Live Discard Window (7.9)"
    fields_desc = [ByteEnumField("code", 7, Option), _WindowField("value", 0)]


class OptSwarmID(_Opt):
    name = "PPSPP option Swarm Identifier (7.4)"
    fields_desc = [ByteEnumField("code", 2, Option),
                   FieldLenField("length", None, length_of="value", fmt="!H"),
                   XStrLenField("value", b"", length_from=lambda p: p.length)]


class OptSupported(_Opt):
    name = "PPSPP option Supported Messages (7.10)"
    fields_desc = [ByteEnumField("code", 8, Option),
                   FieldLenField("length", None, length_of="value", fmt="B"),
                   XStrLenField("value", b"", length_from=lambda p: p.length)]


class OptChunkSize(_Opt):
    name = "PPSPP option Chunk Size (7.11)"
    fields_desc = [ByteEnumField("code", 9, Option), IntField("value", 1024)]


class OptEnd(_Opt):
    name = "PPSPP option End (7.1)"
    fields_desc = [ByteEnumField("code", 255, Option)]


_OPTS: dict[int, type[Packet]] = {
         0: OptVersion, 1: OptMinVersion, 2: OptSwarmID, 3: OptIntegrity, 4: OptHashFunc,
         5: OptSigAlg, 6: OptAddressing, 7: OptDiscardWindow, 8: OptSupported,
         9: OptChunkSize, 255: OptEnd}


def _next_opt(pkt: Packet, lst: list[BasePacket], cur: Packet | None, remain: bytes
              ) -> type[Packet] | None:
    if cur is not None and isinstance(cur, OptEnd):
        return None
    if not remain:
        return None
    return _OPTS.get(remain[0])


class PPSPPHandshake(_Msg):
    name = "PPSPP HANDSHAKE (8.4)"
    fields_desc = [ByteEnumField("type", 0, MsgType), IntField("channel", 0),
                   PacketListField("options", [], next_cls_cb=_next_opt)]

    def pre_dissect(self, s: bytes) -> bytes:
        _LAST_CAM[0] = None
        return s


_MSGS: dict[int, type[Packet]] = {
         0: PPSPPHandshake, 1: PPSPPData, 2: PPSPPAck, 3: PPSPPHave, 4: PPSPPIntegrity,
         5: PPSPPPexResV4, 6: PPSPPPexReq, 7: PPSPPSignedIntegrity, 8: PPSPPRequest,
         9: PPSPPCancel, 10: PPSPPChoke, 11: PPSPPUnchoke, 12: PPSPPPexResV6,
         13: PPSPPPexResCert}


def _next_msg(pkt: Packet, lst: list[BasePacket], cur: Packet | None, remain: bytes
              ) -> type[Packet] | None:
    if not remain:
        return None
    return _MSGS.get(remain[0])


class PPSPP(Packet):
    """A PPSPP datagram: destination channel ID and messages (8.2, 8.3)."""

    name = "PPSPP"
    fields_desc = [IntField("channel", 0),
                   PacketListField("messages", [], next_cls_cb=_next_msg)]


bind_layers(UDP, PPSPP, dport=PPSPP_PORT)
bind_layers(UDP, PPSPP, sport=PPSPP_PORT)


# --- conversion to and from the fast codec's objects ----------------------

_OPT_KEYS: list[tuple[str, type[Packet]]] = [
             ("version", OptVersion), ("min_version", OptMinVersion), ("swarm_id", OptSwarmID),
             ("integrity", OptIntegrity), ("hash_func", OptHashFunc), ("sig_alg", OptSigAlg),
             ("addressing", OptAddressing), ("discard_window", OptDiscardWindow),
             ("supported", OptSupported), ("chunk_size", OptChunkSize)]


def _spec_kw(m: Any) -> dict[str, Any]:
    return {"start": m.start} if _CTX.is_bin else {"start": m.start, "end": m.end}


def from_codec(channel: int, messages: list[codec.Message]) -> PPSPP:
    """The scapy packet for a codec datagram (uses the current context)."""
    out: list[Packet] = []
    for msg in messages:
        m: Any = msg  # dispatched on its type octet below
        t = m.type
        if t == MsgType.HANDSHAKE:
            opts = [cls(value=getattr(m.options, k)) for k, cls in _OPT_KEYS
                    if getattr(m.options, k) is not None]
            out.append(PPSPPHandshake(channel=m.channel, options=opts + [OptEnd()]))
        elif t == MsgType.DATA:
            out.append(PPSPPData(**_spec_kw(m), timestamp=m.timestamp, chunk=m.payload))
        elif t == MsgType.ACK:
            out.append(PPSPPAck(**_spec_kw(m), delay=m.delay))
        elif t == MsgType.INTEGRITY:
            out.append(PPSPPIntegrity(**_spec_kw(m), hash=m.hash))
        elif t == MsgType.SIGNED_INTEGRITY:
            out.append(PPSPPSignedIntegrity(**_spec_kw(m), timestamp=m.timestamp,
                                            signature=m.signature))
        elif t in (MsgType.HAVE, MsgType.REQUEST, MsgType.CANCEL):
            out.append(_MSGS[t](**_spec_kw(m)))
        elif t in (MsgType.CHOKE, MsgType.UNCHOKE, MsgType.PEX_REQ):
            out.append(_MSGS[t]())
        elif t in (MsgType.PEX_RESv4, MsgType.PEX_RESv6):
            out.append(_MSGS[t](ip=m.ip, port=m.port))
        elif t == MsgType.PEX_REScert:
            out.append(PPSPPPexResCert(cert=m.cert))
    return PPSPP(channel=channel, messages=out)


def to_codec(pkt: PPSPP) -> tuple[int, list[codec.Message]]:
    """The codec's (channel, messages) for a dissected scapy packet."""
    out: list[codec.Message] = []
    for p in pkt.messages:
        t = p.type
        s = p.start if hasattr(p, "start") else 0
        e = s if _CTX.is_bin else getattr(p, "end", 0)
        if t == MsgType.HANDSHAKE:
            kw: dict[str, Any] = {}
            for o in p.options:
                for k, cls in _OPT_KEYS:
                    if isinstance(o, cls):
                        kw[k] = bytes(o.value) if k in ("swarm_id", "supported") else o.value
            out.append(codec.Handshake(p.channel, codec.HandshakeOptions(**kw)))
        elif t == MsgType.DATA:
            out.append(codec.Data(s, e, p.timestamp, bytes(p.chunk)))
        elif t == MsgType.ACK:
            out.append(codec.Ack(s, e, p.delay))
        elif t == MsgType.HAVE:
            out.append(codec.Have(s, e))
        elif t == MsgType.INTEGRITY:
            out.append(codec.Integrity(s, e, bytes(p.hash)))
        elif t == MsgType.SIGNED_INTEGRITY:
            out.append(codec.SignedIntegrity(s, e, p.timestamp, bytes(p.signature)))
        elif t == MsgType.REQUEST:
            out.append(codec.Request(s, e))
        elif t == MsgType.CANCEL:
            out.append(codec.Cancel(s, e))
        elif t == MsgType.CHOKE:
            out.append(codec.Choke())
        elif t == MsgType.UNCHOKE:
            out.append(codec.Unchoke())
        elif t == MsgType.PEX_REQ:
            out.append(codec.PexReq())
        elif t == MsgType.PEX_RESv4:
            out.append(codec.PexResV4(p.ip, p.port))
        elif t == MsgType.PEX_RESv6:
            out.append(codec.PexResV6(p.ip, p.port))
        elif t == MsgType.PEX_REScert:
            out.append(codec.PexResCert(bytes(p.cert)))
    return pkt.channel, out
