"""FEC Payload IDs and FEC OTI encodings (RFC 5052, RFC 5170, RFC 5445, RFC 5510).

Every decoder takes arbitrary bytes and returns a value or raises
:class:`m2c.fec.errors.DecodeError`; nothing else.

- FEC Encoding ID 3 (LDPC-Staircase, RFC 5170 Section 4.1): 32 bits,
  Source Block Number (12) | Encoding Symbol ID (20).
- FEC Encoding ID 5 (Reed-Solomon over GF(2^8), RFC 5510 Section 5.1):
  Source Block Number (24) | Encoding Symbol ID (8).
- FEC Encoding ID 129 (Small Block Systematic, RFC 5445 Section 5.2.1): 64
  bits, Source Block Number (32) | Source Block Length (16) | ESI (16).  Our
  zfec Reed-Solomon uses this Under-Specified scheme (FEC Instance ID
  :data:`ZFEC_INSTANCE_ID`): zfec's Vandermonde code is not RFC 5510's
  generator matrix, so claiming ID 5 would mislead a foreign decoder.
- EXT_FTI for FEC Encoding ID 3 (RFC 5170 Section 4.2.4.1, Figure 2); its
  max_n field has 20 bits, so max_n <= :data:`LDPC_MAX_N` = 2^20 - 1 (RFC
  5170 4.2.3 and 5.4 say "at most 2^20", which the field cannot carry).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from m2c.fec.errors import DecodeError, FECError

LDPC_STAIRCASE_ID = 3
RS_GF28_ID = 5
SMALL_BLOCK_SYSTEMATIC_ID = 129
ZFEC_INSTANCE_ID = 0x7A
"""Ours ('z'): the FEC Instance ID of our zfec code under FEC Encoding ID 129, part of
the FEC OTI (RFC 5445 5.2.2.2); carried in the session description's ``fec.instance_id``
and checked by receivers (m2c.core.filetx.SessionDescription.validate)."""
LDPC_MAX_N = (1 << 20) - 1
"""Largest max_n EXT_FTI's 20-bit field holds (RFC 5170 Figure 2)"""
SBS_MAX_FIELD = (1 << 16) - 1
"""Largest B and max_n of FEC Encoding ID 129's FEC OTI (16-bit fields, RFC 5445 5.2.2.2)"""
EXT_FTI = 64  # RFC 5775 Section 4.2

_U32 = struct.Struct("!I")
_SBS = struct.Struct("!IHH")


@dataclass(frozen=True, slots=True)
class PayloadID:
    """One FEC Payload ID."""

    sbn: int
    """source block number"""
    esi: int
    """encoding symbol ID"""
    sbl: int = 0
    """source block length (only FEC Encoding ID 129)"""


def payload_id_size(fec_id: int) -> int:
    """Bytes of the FEC Payload ID for ``fec_id``."""
    if fec_id in (LDPC_STAIRCASE_ID, 4, RS_GF28_ID):
        return 4
    if fec_id == SMALL_BLOCK_SYSTEMATIC_ID:
        return 8
    raise FECError(f"unsupported FEC Encoding ID {fec_id}")


def encode_payload_id(fec_id: int, pid: PayloadID) -> bytes:
    """Wire bytes of ``pid`` for FEC Encoding ID ``fec_id``."""
    if fec_id in (LDPC_STAIRCASE_ID, 4):
        if not (0 <= pid.sbn < 1 << 12 and 0 <= pid.esi < 1 << 20):
            raise FECError("LDPC FPI: SBN < 2^12, ESI < 2^20")
        return _U32.pack(pid.sbn << 20 | pid.esi)
    if fec_id == RS_GF28_ID:
        if not (0 <= pid.sbn < 1 << 24 and 0 <= pid.esi < 1 << 8):
            raise FECError("RS FPI: SBN < 2^24, ESI < 2^8")
        return _U32.pack(pid.sbn << 8 | pid.esi)
    if fec_id == SMALL_BLOCK_SYSTEMATIC_ID:
        if not (0 <= pid.sbn < 1 << 32 and 0 <= pid.sbl < 1 << 16 and 0 <= pid.esi < 1 << 16):
            raise FECError("FPI 129: SBN < 2^32, SBL < 2^16, ESI < 2^16")
        return _SBS.pack(pid.sbn, pid.sbl, pid.esi)
    raise FECError(f"unsupported FEC Encoding ID {fec_id}")


def decode_payload_id(fec_id: int, data: bytes | bytearray | memoryview) -> PayloadID:
    """Parse the FEC Payload ID at the start of ``data``."""
    if fec_id in (LDPC_STAIRCASE_ID, 4, RS_GF28_ID):
        if len(data) < 4:
            raise DecodeError("FEC Payload ID: need 4 bytes")
        (w,) = _U32.unpack_from(data)
        if fec_id == RS_GF28_ID:
            return PayloadID(w >> 8, w & 0xFF)
        return PayloadID(w >> 20, w & 0xFFFFF)
    if fec_id == SMALL_BLOCK_SYSTEMATIC_ID:
        if len(data) < 8:
            raise DecodeError("FEC Payload ID: need 8 bytes")
        sbn, sbl, esi = _SBS.unpack_from(data)
        return PayloadID(sbn, esi, sbl)
    raise DecodeError(f"unsupported FEC Encoding ID {fec_id}")


@dataclass(frozen=True, slots=True)
class LDPCOTI:
    """FEC Object Transmission Information of FEC Encoding ID 3 (RFC 5170 4.2)."""

    transfer_length: int
    """L, bytes (48-bit field)"""
    symbol_size: int
    """E, bytes"""
    max_block_length: int
    """B, source symbols (20 bits)"""
    max_n: int
    """max encoding symbols per block (20 bits: at most LDPC_MAX_N = 2^20 - 1)"""
    n1m3: int = 0
    """N1 - 3 (3 bits)"""
    g: int = 1
    """symbols per packet (5 bits)"""
    seed: int = 1
    """PRNG seed"""

    def __post_init__(self) -> None:
        if not (0 <= self.transfer_length < 1 << 48 and 0 <= self.symbol_size < 1 << 16
                and 0 <= self.max_block_length < 1 << 20 and 0 <= self.max_n <= LDPC_MAX_N
                and 0 <= self.n1m3 <= 7 and 1 <= self.g <= 31
                and 1 <= self.seed <= 0x7FFFFFFE):
            raise FECError("LDPC OTI field out of range")


def encode_ext_fti(oti: LDPCOTI) -> bytes:
    """EXT_FTI header extension (HET=64, HEL=5) for FEC Encoding ID 3."""
    L = oti.transfer_length
    w2 = oti.symbol_size << 16 | oti.n1m3 << 13 | oti.g << 8 | oti.max_block_length >> 12
    w3 = (oti.max_block_length & 0xFFF) << 20 | oti.max_n
    return struct.pack("!BBHIIII", EXT_FTI, 5, L >> 32, L & 0xFFFFFFFF, w2, w3, oti.seed)


def decode_ext_fti(data: bytes | bytearray | memoryview) -> LDPCOTI:
    """Parse an EXT_FTI extension (including HET and HEL) for FEC Encoding ID 3."""
    if len(data) < 20:
        raise DecodeError("EXT_FTI: need 20 bytes")
    het, hel, lhi, llo, w2, w3, seed = struct.unpack_from("!BBHIIII", data)
    if het != EXT_FTI or hel != 5:
        raise DecodeError(f"EXT_FTI: HET={het} HEL={hel}, expected 64/5")
    try:
        return LDPCOTI(lhi << 32 | llo, w2 >> 16, (w2 & 0xFF) << 12 | w3 >> 20,
                       w3 & 0xFFFFF, (w2 >> 13) & 7, (w2 >> 8) & 0x1F, seed)
    except FECError as exc:
        raise DecodeError(str(exc)) from None
