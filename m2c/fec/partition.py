"""Source block partitioning (RFC 5052 Section 9.1) and RFC 5170's n-algorithm."""

from __future__ import annotations

from dataclasses import dataclass

from m2c.fec.errors import FECError


@dataclass(frozen=True, slots=True)
class Partition:
    """How an object of L bytes splits into N source blocks of E-byte symbols."""

    transfer_length: int
    symbol_size: int
    total_symbols: int
    """T = ceil(L / E)"""
    blocks: int
    """N"""
    a_large: int
    a_small: int
    n_large: int
    """I: the first I blocks have A_large symbols, the others A_small"""

    def block_length(self, sbn: int) -> int:
        """k of source block ``sbn``."""
        if not 0 <= sbn < self.blocks:
            raise FECError(f"source block {sbn} out of range")
        return self.a_large if sbn < self.n_large else self.a_small

    def block_offset(self, sbn: int) -> int:
        """First symbol index of block ``sbn`` within the object."""
        if sbn <= self.n_large:
            return sbn * self.a_large
        return self.n_large * self.a_large + (sbn - self.n_large) * self.a_small

    def block_bytes(self, sbn: int) -> tuple[int, int]:
        """(offset, length) in the object of block ``sbn``'s data (last may be short)."""
        off = self.block_offset(sbn) * self.symbol_size
        end = min(off + self.block_length(sbn) * self.symbol_size, self.transfer_length)
        return off, end - off


def partition(transfer_length: int, max_block_length: int, symbol_size: int) -> Partition:
    """RFC 5052 Section 9.1 block partitioning algorithm."""
    if transfer_length < 0 or max_block_length < 1 or symbol_size < 1:
        raise FECError("need L >= 0, B >= 1, E >= 1")
    T = -(-transfer_length // symbol_size)
    N = -(-T // max_block_length) if T else 0
    if N == 0:
        return Partition(transfer_length, symbol_size, 0, 0, 0, 0, 0)
    a_large = -(-T // N)
    a_small = T // N
    n_large = T - a_small * N
    return Partition(transfer_length, symbol_size, T, N, a_large, a_small, n_large)


def n_for_block(k: int, max_n: int, max_block_length: int) -> int:
    """RFC 5170 Section 5.5 n-algorithm: n = floor(k * max_n / B)."""
    return k * max_n // max_block_length
