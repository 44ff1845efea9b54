"""Fast struct codec for M2C's ALC/LCT packets; same bytes as layers.py.

Packet = UDP | LCT header (RFC 5651 5.1) | FEC Payload ID | encoding symbol.
Our LCT header: V=1, C=0, S=1, O=1, H=0; CCI = the M2C CCI (WEBRC-like, ours,
docs/wire-m2c.md): RFC 3738 5.1's 8 | 8 | 16-bit layout holding a mirror of
EXT_M2C, slot mod 256 | group | PSN mod 2^16, not RFC 3738's CTSI/CN/PSN
meanings (sessions have at most 256 groups, CCI_MAX_CHANNEL, so the group fits);
TSI (transport session id, 32 bits), TOI (object, 32 bits; omitted for TOI 0,
a session's single object, RFC 5775 4.1); header extensions
[EXT_FTI (optional)], EXT_M2C, EXT_M2C_CRC (always last).  The decoder
accepts any LCT v1 header shape (C, S, O, H, unknown extensions skipped) but
requires EXT_M2C and a valid EXT_M2C_CRC: anything else raises DecodeError.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

from m2c.fec.errors import DecodeError, FECError
from m2c.fec.payload_id import LDPCOTI, decode_ext_fti, encode_ext_fti
from m2c.wire.constants import EXT_CRC_LEN, EXT_M2C_LEN, HET, LCT_VERSION, Codepoint

__all__ = ["AlcPacket", "encode", "decode", "DecodeError", "peek_session", "header_length"]

_HDR = struct.Struct("!IIII")  # word0, CCI, TSI, TOI
_HDR3 = struct.Struct("!III")  # word0, CCI, TSI (TOI omitted: the session's single object)
_M2C = struct.Struct("!BBHIIII")  # HET HEL group | slot | psn | buffer id | offset
_CRC = struct.Struct("!BBHI")
_U32 = struct.Struct("!I")
_FPI129 = struct.Struct("!IHH")


@dataclass(frozen=True, slots=True)
class AlcPacket:
    """One M2C datagram, decoded."""

    session: int
    """LCT Transport Session Identifier (random per session)"""
    toi: int
    """LCT Transport Object Identifier (the file)"""
    codepoint: int
    """FEC Encoding ID (3 LDPC-Staircase, 129 RS/zfec)"""
    slot: int
    """M2C/WEBRC time slot index (TSI in the paper, CTSI in RFC 3738)"""
    group: int
    """multicast group (channel) index g"""
    psn: int
    """per-group packet sequence number s"""
    buffer_id: int
    """sequencer header: buffer identifier"""
    offset: int
    """sequencer header: byte offset in the buffer"""
    sbn: int
    """FEC source block number"""
    esi: int
    """FEC encoding symbol ID"""
    payload: bytes = b""
    sbl: int = 0
    """source block length (FEC Encoding ID 129 only)"""
    fti: LDPCOTI | None = None
    """EXT_FTI, when carried"""
    close_session: bool = False
    close_object: bool = False
    data_less: bool = False
    """no FEC Payload ID and no symbol (RFC 5775 4.1): keeps a group's PSN
    sequence and rate when the sequencer has nothing for a slot"""


def encode(p: AlcPacket) -> bytes:
    """Wire bytes of ``p`` (CRC filled in)."""
    if not (0 <= p.group < 1 << 16 and 0 <= p.slot < 1 << 32 and 0 <= p.psn < 1 << 32
            and 0 <= p.buffer_id < 1 << 32 and 0 <= p.offset < 1 << 32
            and 0 <= p.session < 1 << 32 and 0 <= p.toi < 1 << 32):
        raise FECError("M2C header field out of range")
    exts = b""
    if p.fti is not None:
        exts += encode_ext_fti(p.fti)
    exts += _M2C.pack(HET.EXT_M2C, EXT_M2C_LEN, p.group, p.slot, p.psn, p.buffer_id, p.offset)
    # TOI 0 is a session's single object: the TOI field is omitted (O = 0, H = 0;
    # RFC 5775 4.1 allows it when a session carries one object), 4 bytes a packet
    o = 1 if p.toi else 0
    hdr_len = (12 + 4 * o + len(exts) + 8) // 4
    w0 = (LCT_VERSION << 28 | 0 << 26 | 0 << 24 | 1 << 23 | o << 21 | 0 << 20
          | int(p.close_session) << 17 | int(p.close_object) << 16 | hdr_len << 8 | p.codepoint)
    # M2C CCI (WEBRC-like): a mirror of EXT_M2C; session creation keeps group <= 255
    cci = (p.slot & 0xFF) << 24 | (p.group & 0xFF) << 16 | (p.psn & 0xFFFF)
    if p.data_less:
        if p.payload or p.sbn or p.esi or p.sbl:
            raise FECError("a data-less packet carries no FEC Payload ID nor payload")
        if p.codepoint not in (Codepoint.LDPC_STAIRCASE, Codepoint.SMALL_BLOCK_SYSTEMATIC):
            raise FECError(f"unsupported codepoint {p.codepoint}")
        fpi = b""
    elif p.codepoint == Codepoint.LDPC_STAIRCASE:
        if not (0 <= p.sbn < 1 << 12 and 0 <= p.esi < 1 << 20):
            raise FECError("LDPC FPI: SBN < 2^12, ESI < 2^20")
        fpi = _U32.pack(p.sbn << 20 | p.esi)
    elif p.codepoint == Codepoint.SMALL_BLOCK_SYSTEMATIC:
        if not (0 <= p.sbn < 1 << 32 and 0 <= p.sbl < 1 << 16 and 0 <= p.esi < 1 << 16):
            raise FECError("FPI 129: SBN < 2^32, SBL < 2^16, ESI < 2^16")
        fpi = _FPI129.pack(p.sbn, p.sbl, p.esi)
    else:
        raise FECError(f"unsupported codepoint {p.codepoint}")
    head = _HDR.pack(w0, cci, p.session, p.toi) if o else _HDR3.pack(w0, cci, p.session)
    buf = bytearray(head + exts)
    crc_at = len(buf) + 4
    buf += _CRC.pack(HET.EXT_M2C_CRC, EXT_CRC_LEN, 0, 0)
    buf += fpi
    buf += p.payload
    _U32.pack_into(buf, crc_at, zlib.crc32(buf))
    return bytes(buf)


def peek_session(data: bytes | bytearray | memoryview) -> int | None:
    """The LCT TSI of a datagram with our header shape (S=1, H=0), else None; no checks."""
    if len(data) >= 24 and data[1] & 0x90 == 0x80:
        return int(_U32.unpack_from(data, 8 + 4 * ((data[0] >> 2) & 3))[0])
    return None


def decode(data: bytes | bytearray | memoryview, session: int | None = None) -> AlcPacket:
    """Parse and verify one datagram; ``session`` (if given) must match the LCT TSI."""
    n = len(data)
    if n < 4:
        raise DecodeError("short LCT header")
    (w0,) = _U32.unpack_from(data)
    if w0 >> 28 != LCT_VERSION:
        raise DecodeError(f"LCT version {w0 >> 28} != 1")
    c, s, o, h = (w0 >> 26) & 3, (w0 >> 23) & 1, (w0 >> 21) & 3, (w0 >> 20) & 1
    hdr_len = ((w0 >> 8) & 0xFF) * 4
    cp = w0 & 0xFF
    pos = 4 + 4 * (c + 1)
    tsi_len, toi_len = 4 * s + 2 * h, 4 * o + 2 * h
    if hdr_len > n or pos + tsi_len + toi_len > hdr_len:
        raise DecodeError("LCT header length inconsistent")
    if tsi_len == 0:
        raise DecodeError("ALC requires a TSI (RFC 5775 4.1)")
    tsi = int.from_bytes(data[pos:pos + tsi_len], "big")
    pos += tsi_len
    toi = int.from_bytes(data[pos:pos + toi_len], "big")
    pos += toi_len
    if session is not None and tsi != session:
        raise DecodeError("foreign session (LCT TSI)")
    m2c = crc_at = fti = None
    crc_val = 0
    while pos < hdr_len:
        het = data[pos]
        if het < 128:
            if pos + 2 > hdr_len:
                raise DecodeError("truncated header extension")
            hel = data[pos + 1] * 4
            if hel == 0 or pos + hel > hdr_len:
                raise DecodeError("bad header extension length")
            if het == HET.EXT_M2C:
                if hel != EXT_M2C_LEN * 4:
                    raise DecodeError("EXT_M2C length")
                m2c = _M2C.unpack_from(data, pos)
            elif het == HET.EXT_M2C_CRC:
                if hel != EXT_CRC_LEN * 4:
                    raise DecodeError("EXT_M2C_CRC length")
                crc_at = pos + 4
                crc_val = _CRC.unpack_from(data, pos)[3]
            elif het == HET.EXT_FTI and cp == Codepoint.LDPC_STAIRCASE:
                fti = decode_ext_fti(data[pos:pos + hel])
            pos += hel
        else:
            pos += 4
    if pos != hdr_len:
        raise DecodeError("header extensions overrun HDR_LEN")
    if m2c is None or crc_at is None:
        raise DecodeError("not an M2C packet (EXT_M2C / EXT_M2C_CRC missing)")
    mv = memoryview(data)
    crc = zlib.crc32(mv[crc_at + 4:], zlib.crc32(b"\0\0\0\0", zlib.crc32(mv[:crc_at])))
    if crc != crc_val:
        raise DecodeError("checksum mismatch")
    _, _, group, slot, psn, buffer_id, offset = m2c
    if c == 0:
        (cci,) = _U32.unpack_from(data, 4)
        if cci != ((slot & 0xFF) << 24 | (group & 0xFF) << 16 | (psn & 0xFFFF)):
            raise DecodeError("CCI disagrees with EXT_M2C")
    if cp not in (Codepoint.LDPC_STAIRCASE, Codepoint.SMALL_BLOCK_SYSTEMATIC):
        raise DecodeError(f"unsupported codepoint {cp}")
    if n == hdr_len:  # data-less (RFC 5775 4.1)
        return AlcPacket(tsi, toi, cp, slot, group, psn, buffer_id, offset, 0, 0, b"", 0, fti,
                         bool(w0 >> 17 & 1), bool(w0 >> 16 & 1), True)
    if cp == Codepoint.LDPC_STAIRCASE:
        if n < hdr_len + 4:
            raise DecodeError("missing FEC Payload ID")
        (w,) = _U32.unpack_from(data, hdr_len)
        sbn, esi, sbl = w >> 20, w & 0xFFFFF, 0
        body = hdr_len + 4
    elif cp == Codepoint.SMALL_BLOCK_SYSTEMATIC:
        if n < hdr_len + 8:
            raise DecodeError("missing FEC Payload ID")
        sbn, sbl, esi = _FPI129.unpack_from(data, hdr_len)
        body = hdr_len + 8
    else:
        raise DecodeError(f"unsupported codepoint {cp}")
    return AlcPacket(tsi, toi, cp, slot, group, psn, buffer_id, offset, sbn, esi,
                     bytes(mv[body:]), sbl, fti, bool(w0 >> 17 & 1), bool(w0 >> 16 & 1))


def header_length(codepoint: int = Codepoint.LDPC_STAIRCASE, toi: int = 0) -> int:
    """Bytes before the symbol in a data packet (LCT header, extensions, FEC Payload
    ID): 44 for LDPC with the TOI omitted (TOI 0), 48 with a 32-bit TOI."""
    return len(encode(AlcPacket(0, toi, codepoint, 0, 0, 0, 0, 0, 0, 0, b"")))


FEC_CODEPOINTS = {"ldpc": Codepoint.LDPC_STAIRCASE, "rs": Codepoint.SMALL_BLOCK_SYSTEMATIC}
"""FEC scheme names (``--fec``, the session description) -> the LCT codepoint their packets carry"""

IPV4_UDP_HEADER = 28


def packet_overhead(fec: str = "ldpc") -> int:
    """Bytes of an IPv4 data packet besides its symbol: IPv4 + UDP (28) and the ALC/LCT
    header with the FEC Payload ID of the scheme (TOI omitted: 44 for LDPC, 48 for RS)."""
    return IPV4_UDP_HEADER + header_length(FEC_CODEPOINTS[fec])
