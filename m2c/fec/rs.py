"""Reed-Solomon erasure code over GF(2^8) through zfec (k <= n <= 256).

zfec (Rizzo's Vandermonde code) is systematic: encoding symbols 0..k-1 are
the source symbols.  Its generator matrix is not RFC 5510's, so on the wire
we announce FEC Encoding ID 129 with our FEC Instance ID (see payload_id).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import zfec  # type: ignore[import-untyped]  # zfec ships neither stubs nor py.typed

from m2c.fec.errors import FECError


@dataclass(frozen=True, slots=True)
class RSParams:
    """One RS source block: k source symbols, n encoding symbols of E bytes."""

    k: int
    n: int
    symbol_size: int

    def __post_init__(self) -> None:
        if not 1 <= self.k <= self.n <= 256:
            raise FECError(f"RS needs 1 <= k <= n <= 256, got k={self.k} n={self.n}")
        if self.symbol_size < 1:
            raise FECError("symbol size must be >= 1")


def encode(params: RSParams, source: bytes | bytearray | memoryview) -> bytes:
    """The n-k repair symbols (ESIs k..n-1) of ``source`` (k*E bytes), concatenated."""
    k, n, E = params.k, params.n, params.symbol_size
    if len(source) != k * E:
        raise FECError(f"source must be k*E = {k * E} bytes")
    if n == k:
        return b""
    mv = bytes(source)
    blocks = [mv[i * E:(i + 1) * E] for i in range(k)]
    return b"".join(zfec.Encoder(k, n).encode(blocks, list(range(k, n))))


def decode(params: RSParams,
           symbols: Mapping[int, bytes] | Iterable[tuple[int, bytes]]) -> bytes | None:
    """Source block from any k distinct (ESI, symbol) pairs; None if fewer."""
    k, n, E = params.k, params.n, params.symbol_size
    got: dict[int, bytes] = {}
    items = symbols.items() if isinstance(symbols, Mapping) else symbols
    for esi, sym in items:
        if not 0 <= esi < n or len(sym) != E:
            raise FECError(f"bad symbol ESI={esi} len={len(sym)}")
        got.setdefault(esi, bytes(sym))
        if len(got) == k:
            break
    if len(got) < k:
        return None
    if all(i in got for i in range(k)):
        return b"".join(got[i] for i in range(k))
    nums = sorted(got)
    return b"".join(zfec.Decoder(k, n).decode([got[i] for i in nums], nums))
