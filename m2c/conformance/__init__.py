"""FEC conformance cases (protocol ``fec``): RFC 5170 LDPC-Staircase and zfec-compatible RS.

The implementation under test is one command, driven through stdin/stdout.
The plugin appends the role word and the arguments below to the registry's
``command`` (ADAPTER below). All numbers are decimal; all data is raw bytes.

Roles (``--impl-roles``): ``encoder``, ``decoder``.

``ADAPTER encode ldpc K N N1 SEED E``
    RFC 5170 LDPC-Staircase (FEC Encoding ID 3) for one source block of K
    source symbols, N encoding symbols, N1 ones per source column, PRNG seed
    SEED and symbol size E bytes. Reads exactly K*E bytes (source symbols,
    ESI 0..K-1 in order) on stdin; writes exactly (N-K)*E bytes on stdout:
    the repair symbols ESI K..N-1 in order (matrix of sec. 6.2, PRNG of
    sec. 5.7, encoding of sec. 6.3). Exit 0.

``ADAPTER decode ldpc K N N1 SEED E``
    Reads records until EOF, each a 4-byte big-endian ESI (0..N-1)
    followed by E bytes of that encoding symbol, in any order, possibly
    with duplicates. If the received symbols determine every source symbol
    it writes exactly K*E bytes (the source block) and exits 0; otherwise it
    writes nothing on stdout and exits 1. It must never write a block it has
    not fully recovered.

``ADAPTER encode rs K N E`` / ``ADAPTER decode rs K N E``
    Reed-Solomon erasure code over GF(2^8), zfec-compatible (k <= n <= 256):
    the repair symbols are what ``zfec.Encoder(K, N).encode(blocks,
    [K..N-1])`` gives, i.e. Rizzo's systematic Vandermonde code (the code
    zfec, and FEC Encoding ID 129 in M2C, use; not RFC 5510's generator
    matrix). Same stdin/stdout framing as for ``ldpc``; any K distinct
    symbols must decode (MDS property, RFC 5510 sec. 8), fewer must exit 1.

``ADAPTER groups ldpc K N N1 SEED G`` (optional; role ``encoder``)
    G > 1 symbols per packet (RFC 5170 sec. 5.6): one text line per
    encoding symbol group, its G ESIs separated by spaces: first the source
    packets (ESIs g*G .. g*G+G-1), then the repair packets in transmission
    order, each holding the repair symbols at G consecutive positions of
    the txseqToID table (``initialize_tables``, whose PRNG continues the
    stream right after the parity check matrix was built, sec. 5.7). K and
    N-K are multiples of G (exit 2 otherwise). Decoding needs no new
    command: a packet's symbols are decoder records like any other.

Any other exit status is a failure. Exit 127 for a code or role the
implementation does not support (the case is then reported *unsupported*);
exit 2 for parameters it rejects.

Our own implementation: ``python -m m2c.conformance.adapter`` (registry name
``ours-fec``); it also exports our test vectors (``export-vectors DIR``).
"""

from __future__ import annotations

import struct

__all__ = ["record", "records"]


def record(esi: int, symbol: bytes) -> bytes:
    """One decoder input record: 4-byte big-endian ESI then the symbol."""
    return struct.pack(">I", esi) + symbol


def records(pairs) -> bytes:
    """Decoder stdin for an iterable of (ESI, symbol) pairs."""
    return b"".join(record(e, s) for e, s in pairs)
