"""Scapy layers for M2C's ALC/LCT packets: the readable spec (docs/wire-m2c.md).

    LCT (RFC 5651 5.1) / ALC_FPI3 or ALC_FPI129 (FEC Payload ID) / Raw (symbol)

LCT header extensions (RFC 5651 5.2) are a list: EXT_FTI (RFC 5775 4.2 with
RFC 5170 Figure 2's content), EXT_M2C and EXT_M2C_CRC (ours, HET 120/121),
or generic variable/fixed-length ones.  ``hdr_len``, the CCI and the CRC are
filled in ``post_build`` when left as None, so a test can still force wrong
values.  The CCI is the "M2C CCI (WEBRC-like)" of docs/wire-m2c.md: RFC 3738
5.1's short-format layout (8 | 8 | 16 bits) holding a mirror of EXT_M2C
(slot mod 256 | group | PSN mod 2^16), not RFC 3738's CTSI/CN/PSN semantics;
a session has at most 256 groups (``CCI_MAX_CHANNEL``), so the group fits.
"""

from __future__ import annotations

import struct
import zlib
from typing import Any

from scapy.base_classes import BasePacket
from scapy.fields import (
    BitField,
    ByteEnumField,
    ByteField,
    Field,
    IntField,
    PacketListField,
    ShortField,
    XIntField,
    XStrLenField,
)
from scapy.packet import Packet, Raw, bind_layers

from m2c.wire.constants import HET, Codepoint

__all__ = ["LCT", "ExtM2C", "ExtM2CCRC", "ExtFTI", "ExtGeneric", "ExtFixed",
           "ALC_FPI3", "ALC_FPI129"]

_HET_NAMES = {int(h): h.name for h in HET}


class _VarIntField(Field[int, int]):
    """Unsigned big-endian integer whose byte length comes from other fields."""

    __slots__ = ["length_from"]

    def __init__(self, name: str, default: int | None, length_from: Any) -> None:
        super().__init__(name, default)
        self.length_from = length_from

    def addfield(self, pkt: Packet, s: bytes, val: int | None) -> bytes:
        n = self.length_from(pkt)
        return s + int(val or 0).to_bytes(n, "big") if n else s

    def getfield(self, pkt: Packet, s: bytes) -> tuple[bytes, int]:
        n = self.length_from(pkt)
        return s[n:], int.from_bytes(s[:n], "big")

    def i2repr(self, pkt: Packet | None, x: int | None) -> str:
        return "None" if x is None else hex(x)


class _Ext(Packet):
    def extract_padding(self, s: bytes) -> tuple[bytes, bytes]:
        return b"", s


class ExtGeneric(_Ext):
    """Variable-length extension (HET 0..127) we do not interpret."""

    name = "LCT EXT (variable)"
    fields_desc = [
        ByteEnumField("het", 0, _HET_NAMES),
        ByteField("hel", None),
        XStrLenField("hec", b"\0\0", length_from=lambda p: max(0, (p.hel or 1) * 4 - 2)),
    ]

    def post_build(self, pkt: bytes, pay: bytes) -> bytes:
        if self.hel is None:
            pkt = pkt[:1] + bytes([len(pkt) // 4]) + pkt[2:]
        return pkt + pay


class ExtFixed(_Ext):
    """Fixed-length extension (HET 128..255): 24 bits of content."""

    name = "LCT EXT (fixed)"
    fields_desc = [ByteField("het", 128), BitField("hec", 0, 24)]


class ExtM2C(_Ext):
    """EXT_M2C (HET 120, HEL 5): group, time slot index, PSN, sequencer header."""

    name = "LCT EXT_M2C"
    fields_desc = [
        ByteEnumField("het", HET.EXT_M2C, _HET_NAMES),
        ByteField("hel", 5),
        ShortField("group", 0),
        IntField("slot", 0),
        IntField("psn", 0),
        IntField("buffer_id", 0),
        IntField("offset", 0),
    ]


class ExtM2CCRC(_Ext):
    """EXT_M2C_CRC (HET 121, HEL 2): CRC-32 of the datagram with this field zero."""

    name = "LCT EXT_M2C_CRC"
    fields_desc = [
        ByteEnumField("het", HET.EXT_M2C_CRC, _HET_NAMES),
        ByteField("hel", 2),
        ShortField("reserved", 0),
        XIntField("crc", None),
    ]


class ExtFTI(_Ext):
    """EXT_FTI (HET 64, HEL 5) with FEC Encoding ID 3's OTI (RFC 5170 Figure 2)."""

    name = "LCT EXT_FTI (LDPC)"
    fields_desc = [
        ByteEnumField("het", HET.EXT_FTI, _HET_NAMES),
        ByteField("hel", 5),
        BitField("transfer_length", 0, 48),
        ShortField("symbol_size", 0),
        BitField("n1m3", 0, 3),
        BitField("g", 1, 5),
        BitField("max_block_length", 0, 20),
        BitField("max_n", 0, 20),
        IntField("seed", 1),
    ]


def _next_ext(pkt: Packet, lst: list[BasePacket], cur: Packet | None,
              remain: bytes) -> type[Packet] | None:
    if not remain:
        return None
    het = remain[0]
    if het == HET.EXT_M2C and len(remain) >= 2 and remain[1] == 5:
        return ExtM2C
    if het == HET.EXT_M2C_CRC and len(remain) >= 2 and remain[1] == 2:
        return ExtM2CCRC
    if het == HET.EXT_FTI and len(remain) >= 2 and remain[1] == 5 and pkt.codepoint == 3:
        return ExtFTI
    return ExtFixed if het >= 128 else ExtGeneric


def _base_len(p: Packet) -> int:
    return int(4 + 4 * (p.c + 1) + (4 * p.s + 2 * p.h) + (4 * p.o + 2 * p.h))


class LCT(Packet):
    """LCT header, RFC 5651 Section 5.1 (ALC: RFC 5775 Section 4.1)."""

    name = "ALC/LCT"
    fields_desc = [
        BitField("version", 1, 4),
        BitField("c", 0, 2),
        BitField("psi", 0, 2),
        BitField("s", 1, 1),
        BitField("o", 1, 2),
        BitField("h", 0, 1),
        BitField("res", 0, 2),
        BitField("a", 0, 1),
        BitField("b", 0, 1),
        ByteField("hdr_len", None),
        ByteEnumField("codepoint", Codepoint.LDPC_STAIRCASE, {int(c): c.name for c in Codepoint}),
        _VarIntField("cci", None, lambda p: 4 * (p.c + 1)),
        _VarIntField("tsi", 0, lambda p: 4 * p.s + 2 * p.h),
        _VarIntField("toi", 0, lambda p: 4 * p.o + 2 * p.h),
        PacketListField("ext", [], next_cls_cb=_next_ext,
                        length_from=lambda p: max(0, (p.hdr_len or 0) * 4 - _base_len(p))),
    ]

    def post_build(self, pkt: bytes, pay: bytes) -> bytes:
        b = bytearray(pkt)
        if self.hdr_len is None:
            b[2] = len(b) // 4
        if self.cci is None and self.c == 0:
            # M2C CCI (WEBRC-like): slot mod 256 | group | PSN mod 2^16 (docs/wire-m2c.md)
            m = next((e for e in self.ext if isinstance(e, ExtM2C)), None)
            if m is not None:
                struct.pack_into("!I", b, 4, (m.slot & 0xFF) << 24 | (m.group & 0xFF) << 16
                                 | (m.psn & 0xFFFF))
        pos = _base_len(self)
        crc_at = None
        for e in self.ext:
            raw = bytes(e)
            if isinstance(e, ExtM2CCRC) and e.crc is None:
                crc_at = pos + 4
            pos += len(raw)
        out = bytes(b) + pay
        if crc_at is not None:
            crc = zlib.crc32(out[:crc_at] + b"\0\0\0\0" + out[crc_at + 4:])
            out = out[:crc_at] + struct.pack("!I", crc) + out[crc_at + 4:]
        return out


class ALC_FPI3(Packet):
    """FEC Payload ID, FEC Encoding ID 3 (RFC 5170 Section 4.1)."""

    name = "FEC Payload ID (LDPC)"
    fields_desc = [BitField("sbn", 0, 12), BitField("esi", 0, 20)]


class ALC_FPI129(Packet):
    """FEC Payload ID, FEC Encoding ID 129 (RFC 5445 Section 5.2.1)."""

    name = "FEC Payload ID (small block systematic)"
    fields_desc = [IntField("sbn", 0), ShortField("sbl", 0), ShortField("esi", 0)]


bind_layers(LCT, ALC_FPI3, codepoint=Codepoint.LDPC_STAIRCASE)
bind_layers(LCT, ALC_FPI129, codepoint=Codepoint.SMALL_BLOCK_SYSTEMATIC)
bind_layers(ALC_FPI3, Raw)
bind_layers(ALC_FPI129, Raw)
