"""FEC building blocks: LDPC-Staircase (RFC 5170), Reed-Solomon via zfec,
FEC Payload IDs and source-block partitioning (RFC 5052)."""

from m2c.fec.errors import DecodeError, FECError

__all__ = ["DecodeError", "FECError"]
