"""Wire constants (RFC 5651 LCT, RFC 5775 ALC, ours in the LCT variable-length
header extension range; see docs/wire-m2c.md)."""

from __future__ import annotations

from enum import IntEnum

LCT_VERSION = 1  # RFC 5651 Section 5.1 (ALC version 1, RFC 5775 Section 4.1)


class HET(IntEnum):
    """LCT Header Extension Types (RFC 5651 Section 5.2, RFC 5775 Section 4.2)."""

    EXT_NOP = 0
    EXT_AUTH = 1
    EXT_TIME = 2
    EXT_FTI = 64
    #: ours (variable-length range 0..127, not IANA-assigned; documented in
    #: docs/wire-m2c.md): M2C congestion fields and sequencer header
    EXT_M2C = 120
    #: ours: CRC-32 of the whole datagram, this field zeroed
    EXT_M2C_CRC = 121


class Codepoint(IntEnum):
    """LCT codepoint = FEC Encoding ID (RFC 5775 Section 3; Wireshark's default reading)."""

    LDPC_STAIRCASE = 3  # RFC 5170
    SMALL_BLOCK_SYSTEMATIC = 129  # RFC 5445; our zfec Reed-Solomon instance


EXT_M2C_LEN = 5  # HEL, 32-bit words: 20 bytes
EXT_CRC_LEN = 2  # HEL: 8 bytes

#: Highest channel number the M2C CCI's 8-bit channel field holds (docs/wire-m2c.md,
#: "M2C CCI (WEBRC-like)"): a session has at most 256 groups, the base group 0 and
#: dynamic channels 1..255, as RFC 3738 5.1 allows T + 1 <= 256 channels.  Session
#: creation (m2c.core.filetx.SessionDescription.validate) refuses larger schedules,
#: so the field never wraps.
CCI_MAX_CHANNEL = 0xFF
