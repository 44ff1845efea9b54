"""LDPC-Staircase, RFC 5170 (FEC Encoding ID 3), bit-exact.

Reading of the RFC (what "exact" means here):

- PRNG (Section 5.7): Park-Miller "minimal standard", ``I' = 16807 * I mod
  (2^31 - 1)``, seeded with the FEC OTI seed (1 .. 2^31-2); each call first
  advances the state and then scales it with
  ``floor((double)maxv * (double)raw / (double)0x7FFFFFFF)``.  With seed 1 the
  10,000th raw value is 1043618065 (the RFC's validation value; tested).
- The PRNG is seeded once per source block, immediately before
  ``left_matrix_init`` (Section 6.2); no other call may happen in between.
  When G > 1, ``initialize_tables`` (Section 5.6) continues the same PRNG
  stream right after the matrix is built.
- ``left_matrix_init(k, n, N1)`` is followed literally, including the
  ``u[]`` table ``u[h] = h % (n-k)``, the "no choice left" branch and the
  extra 1s for rows of degree 0 or 1.  (The RFC's degree-1 loop cannot end
  when k == 1; like OpenFEC we skip it then.)
- The staircase (right side): row 0 holds repair symbol k; row i > 0 holds
  repair symbols k+i and k+i-1.  Encoding (Section 6.3): repair ``p_i`` is
  the XOR of the source symbols of row i, XOR ``p_{i-1}`` for i > 0.

Decoding (Section 6.4 leaves it to the implementer): an iterative (peeling,
Zyablov-Pinsker) decoder fed one symbol at a time, plus a maximum-likelihood
fallback by Gaussian elimination with inactivation (the hybrid of [CR08]):
when peeling stalls, a few unknowns are made symbolic ("inactivated") so that
peeling can continue; the small dense system left over those unknowns is
solved by Gauss-Jordan over GF(2) with bit-packed rows.  The elimination
runs in C (``m2c_ldpc_eliminate``) with a pure-Python twin.  A
source symbol is returned only when the received symbols determine it.

:class:`Decoding` ``ITERATIVE`` turns the fallback off (:meth:`LDPCDecoder.solve`
then decodes nothing), as the receivers of the M2C paper decoded
LDPC-Triangle: their ``sym`` (6-8 %) is an iterative decoder's overhead.  A
decoder takes the mode it is given, else the one :func:`decoding` set for the
current context (how a front end reaches the decoders that
:class:`m2c.core.filetx.FileReceiver` creates).
"""

from __future__ import annotations

import contextvars
import enum
import functools
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

from deliverykit.fastpath import load
from m2c import _fast
from m2c._fast import Buf
from m2c.fec.errors import FECError

__all__ = [
    "PMMSRandom", "LDPCParams", "StaircaseMatrix", "staircase_matrix",
    "encode", "LDPCDecoder", "decode", "esi_tables", "Decoding", "decoding",
]


class Decoding(enum.Enum):
    """How an :class:`LDPCDecoder` recovers a block."""

    #: iterative (peeling), then Gaussian elimination when it stalls: ~1.01 k
    #: symbols at N1 = 5 (docs/m2c-fec.md)
    ML = "ml"
    #: iterative only, no elimination (the M2C paper's receivers): ~1.11 k at N1 = 3
    ITERATIVE = "iterative"


_DECODING: contextvars.ContextVar[Decoding] = contextvars.ContextVar(
    "m2c_ldpc_decoding", default=Decoding.ML)


@contextmanager
def decoding(mode: Decoding | str) -> Iterator[Decoding]:
    """Decoders created inside the ``with`` block (in this context) use ``mode``."""
    token = _DECODING.set(Decoding(mode))
    try:
        yield _DECODING.get()
    finally:
        _DECODING.reset(token)

FEC_ENCODING_ID = 3  # RFC 5170 Section 4.2.1

ldpc_matrix = load("m2c_ldpc_matrix", _fast.m2c_ldpc_matrix)
ldpc_encode = load("m2c_ldpc_encode", _fast.m2c_ldpc_encode)


class PMMSRandom:
    """Park-Miller minimal standard PRNG with RFC 5170 Section 5.7 scaling."""

    __slots__ = ("state",)

    def __init__(self, seed: int) -> None:
        if not 1 <= seed <= 0x7FFFFFFE:
            raise FECError("PRNG seed must be in 1 .. 0x7FFFFFFE (RFC 5170 4.2.3)")
        self.state = seed

    def raw(self) -> int:
        """Next raw value in 1 .. 2^31-2."""
        self.state = (self.state * 16807) % 0x7FFFFFFF
        return self.state

    def rand(self, maxv: int) -> int:
        """pmms_rand(maxv): an integer in 0 .. maxv-1."""
        return int(float(maxv) * float(self.raw()) / 2147483647.0)


@dataclass(frozen=True, slots=True)
class LDPCParams:
    """Parameters of one LDPC-Staircase source block (RFC 5170 Section 4.2)."""

    k: int
    """source symbols in the block"""
    n: int
    """encoding symbols (source + repair); default n = 2k (code rate 1/2)"""
    symbol_size: int
    """E, bytes per symbol"""
    n1: int = 3
    """N1: ones per source column (N1m3 + 3, 3..10)"""
    seed: int = 1
    """PRNG seed, 1 .. 2^31-2"""

    def __post_init__(self) -> None:
        if not 1 <= self.k < self.n <= 1 << 20:
            raise FECError(f"need 1 <= k < n <= 2^20, got k={self.k} n={self.n}")
        if not 3 <= self.n1 <= 10:
            raise FECError("N1 must be 3..10 (N1m3 is a 3-bit field)")
        if self.n - self.k < self.n1:
            raise FECError("n - k must be at least N1")
        if not 1 <= self.seed <= 0x7FFFFFFE:
            raise FECError("PRNG seed must be in 1 .. 0x7FFFFFFE")
        if not 1 <= self.symbol_size <= 0xFFFF:
            raise FECError("symbol size must be 1 .. 65535 bytes")

    @property
    def m(self) -> int:
        """Number of repair symbols, n - k (= rows of H)."""
        return self.n - self.k


@dataclass(frozen=True, slots=True)
class StaircaseMatrix:
    """H = [left | staircase]: row i holds ``left_row(i)`` plus repair k+i (and k+i-1)."""

    k: int
    m: int
    row_ptr: bytes
    cols: bytes

    def left_rows(self) -> list[list[int]]:
        rp = array("I")
        rp.frombytes(self.row_ptr)
        cs = array("I")
        cs.frombytes(self.cols)
        return [cs[rp[i]:rp[i + 1]].tolist() for i in range(self.m)]

    def rows(self) -> list[list[int]]:
        """Every equation as ESIs (sources then repairs)."""
        out = self.left_rows()
        k = self.k
        for i, row in enumerate(out):
            row.append(k + i)
            if i:
                row.append(k + i - 1)
        return out


@functools.lru_cache(maxsize=32)
def staircase_matrix(k: int, n: int, n1: int, seed: int) -> StaircaseMatrix:
    """The RFC 5170 parity check matrix for (k, n, N1, seed), cached."""
    rp, cs = ldpc_matrix(k, n - k, n1, seed)
    return StaircaseMatrix(k, n - k, rp, cs)


def encode(params: LDPCParams, source: bytes | bytearray | memoryview) -> bytes:
    """The n-k repair symbols (ESIs k..n-1, concatenated) of ``source`` (k*E bytes)."""
    if len(source) != params.k * params.symbol_size:
        raise FECError(f"source must be k*E = {params.k * params.symbol_size} bytes")
    mat = staircase_matrix(params.k, params.n, params.n1, params.seed)
    return ldpc_encode(source, params.symbol_size, mat.row_ptr, mat.cols)


def esi_tables(params: LDPCParams) -> tuple[list[int], list[int]]:
    """(txseqToID, IDtoTxseq) of RFC 5170 Section 5.6, for G > 1.

    The PRNG continues right after the matrix creation, so we replay it.
    """
    m = params.m
    prng = PMMSRandom(params.seed)
    _replay_matrix_prng(params, prng)
    id_to_tx = list(range(m))
    tx_to_id = list(range(m))
    for i in range(m):
        r = prng.rand(m)
        id_to_tx[i], id_to_tx[r] = id_to_tx[r], id_to_tx[i]
        tx_to_id[id_to_tx[i]] = i
        tx_to_id[id_to_tx[r]] = r
    return tx_to_id, id_to_tx


def _replay_matrix_prng(params: LDPCParams, prng: PMMSRandom) -> None:
    """Advance ``prng`` exactly as left_matrix_init does (same loop as _fast)."""
    k, m, n1 = params.k, params.m, params.n1
    rows: list[list[int]] = [[] for _ in range(m)]
    total = n1 * k
    u = [h % m for h in range(total)]
    t = 0
    for j in range(k):
        col: list[int] = []
        for _ in range(n1):
            i = t
            while i < total and u[i] in col:
                i += 1
            if i < total:
                while True:
                    i = t + prng.rand(total - t)
                    if u[i] not in col:
                        break
                r = u[i]
                u[i] = u[t]
                t += 1
            else:
                while True:
                    r = prng.rand(m)
                    if r not in col:
                        break
            col.append(r)
            rows[r].append(j)
    for row in rows:
        if not row:
            row.append(prng.rand(k))
        if len(row) == 1 and k > 1:
            while True:
                j = prng.rand(k)
                if j != row[0]:
                    break
            row.append(j)


@dataclass(frozen=True, slots=True)
class _Graph:
    """Tanner graph of H as two CSR tables (uint32 bytes) plus row degrees."""

    eq_ptr: bytes
    eq_vars: bytes
    var_ptr: bytes
    var_eqs: bytes
    degrees: bytes


ldpc_graph = load("m2c_ldpc_graph", _fast.m2c_ldpc_graph)


@functools.lru_cache(maxsize=32)
def _graph(k: int, n: int, n1: int, seed: int) -> _Graph:
    """H's Tanner graph in one C call (``m2c_ldpc_graph``, twin in m2c/_fast.py): equation
    i is ``staircase_matrix(k, n, n1, seed).rows()[i]``."""
    return _Graph(*ldpc_graph(k, n, n1, seed))


ldpc_alloc = load("m2c_ldpc_alloc", _fast.m2c_ldpc_alloc)
ldpc_add = load("m2c_ldpc_add", _fast.m2c_ldpc_add)
ldpc_add_many = load("m2c_ldpc_add_many", _fast.m2c_ldpc_add_many)
ldpc_peeler = load("m2c_ldpc_peeler", _fast.m2c_ldpc_peeler)
ldpc_eliminate = load("m2c_ldpc_eliminate", _fast.m2c_ldpc_eliminate)


class LDPCDecoder:
    """Iterative decoder (RFC 5170 Appendix A) with an ML fallback.

    Feed symbols with :attr:`add` (or a batch with :attr:`add_many`, :attr:`add_at`);
    it returns True once every source symbol is known.  Each is one C call on a
    peeler (``m2c_ldpc_peeler``, twin in m2c/_fast.py) that holds the state kept
    here in bytearrays; a source symbol given as ``bytes`` is held, not copied
    (:meth:`source_block` gathers the block).  When peeling stalls, :meth:`solve`
    runs Gaussian elimination (with inactivation) over what is left and feeds what
    it finds back in.
    """

    def __init__(self, params: LDPCParams, mode: Decoding | None = None) -> None:
        self.params = params
        self.mode = _DECODING.get() if mode is None else mode
        """:attr:`Decoding.ITERATIVE`: :meth:`solve` never eliminates"""
        k, n, E = params.k, params.n, params.symbol_size
        self._k, self._n, self._E = k, n, E
        g = _graph(k, n, params.n1, params.seed)
        self._g = g
        self._unknown = bytearray(g.degrees)
        # neither buffer is zeroed (no pass over megabytes before the first symbol): an
        # equation's partial is written when its first variable becomes known (read as 0
        # before), a value before it is read.  Only the k source values are kept: the C
        # XORs a repair value from where it is (the symbol, or the partial that solved it)
        self._partial = ldpc_alloc(params.m * E)
        self._values = ldpc_alloc(k * E)
        self._known = bytearray(n)
        self._got = bytearray(n)
        self._state = (k, E, g.eq_ptr, g.eq_vars, g.var_ptr, g.var_eqs, self._unknown,
                       self._partial, self._values, self._known)
        # the state held, checked once: adding a symbol is one C call (the peeler's take)
        peeler = ldpc_peeler(*self._state, self._got, FECError)
        self._peeler = peeler
        self.add: Callable[[int, bytes | bytearray | memoryview], bool] = peeler.take
        """add(esi, symbol): add encoding symbol ``esi``; True when the block is decoded.
        One C call: range and length checks (FECError), duplicates, the iterative step.
        A source symbol given as ``bytes`` (immutable) is held, not copied; any other
        buffer is copied, so its owner may reuse it."""
        self.add_many: Callable[[Iterable[tuple[int, Buf] | tuple[int, Buf, int]]], bool] = (
            peeler.take_many)
        """add_many(items): :attr:`add` for each (ESI, symbol), or (ESI, datagram, offset):
        the symbol read in place, E bytes from ``offset`` (a bytes datagram is held, so a
        receiver can hand over what recvmmsg gave it without slicing), in one C call"""
        self.add_at: Callable[[Buf, Buf, Buf], bool] = peeler.take_at
        """add_at(esis, offsets, buf): :attr:`add` for each uint32 ESI of ``esis`` with its
        symbol at the uint32 offset of ``offsets`` in ``buf`` (datagrams received into one
        buffer), in one C call; held without a copy when ``buf`` is ``bytes``"""
        self._learn = peeler.add
        self.ml_deficit = 0
        """after a failed :meth:`solve`: rank deficiency of the remaining system, i.e. at
        least this many more distinct symbols are needed (each adds one equation)"""

    @property
    def source_known(self) -> int:
        """source symbols known"""
        return self._peeler.source_known

    @property
    def received(self) -> int:
        """distinct symbols received (decoded ones received later count too)"""
        return self._peeler.received

    @property
    def duplicates(self) -> int:
        """symbols received more than once"""
        return self._peeler.duplicates

    @property
    def complete(self) -> bool:
        return self._peeler.source_known == self._k

    def has(self, esi: int) -> bool:
        return bool(self._known[esi])

    def __deepcopy__(self, memo: dict[int, object]) -> LDPCDecoder:
        """A decoder in the same state with its own buffers (held sources copied)."""
        new = LDPCDecoder(self.params, self.mode)
        for name in ("_unknown", "_partial", "_known", "_got"):
            getattr(new, name)[:] = getattr(self, name)
        E = self._E
        for i, b in self.known_source().items():
            new._values[i * E:(i + 1) * E] = b
        p, q = new._peeler, self._peeler
        p.received, p.duplicates, p.source_known = q.received, q.duplicates, q.source_known
        new.ml_deficit = self.ml_deficit
        return new

    def solve(self, partial: bool = True) -> bool:
        """Maximum-likelihood step: Gaussian elimination with inactivation.

        Recovers every source symbol that the received symbols determine;
        returns True when the block is complete.  With ``partial=False`` it first
        eliminates on the structure alone (no symbol values: a fraction of the
        cost) and computes values only when the whole block is determined, so a
        failed attempt recovers nothing but costs less (``ml_deficit`` is set
        either way).  In :attr:`Decoding.ITERATIVE` mode it only says whether the
        block is complete.
        """
        if self.complete:
            return True
        if self.mode is Decoding.ITERATIVE:
            self.ml_deficit = 1  # only a new symbol can help peeling on
            return False
        if not partial and not self._eliminate(values=False):
            return False
        self._eliminate(values=True)
        return self.complete

    def _eliminate(self, values: bool) -> bool:
        """One elimination; without ``values``: True when every source symbol is determined.

        The elimination runs in C (``m2c_ldpc_eliminate``; twin in m2c/_fast.py) on the
        iterative decoder's state; the sources it determines are fed back through the
        iterative decoder so that its partial sums stay exact.
        """
        p, g = self.params, self._g
        deficit, determined, esis, syms = ldpc_eliminate(
            p.k, p.symbol_size, g.eq_ptr, g.eq_vars, self._unknown, self._partial,
            self._known, values)
        # each received symbol adds one equation: at least this many more are needed
        self.ml_deficit = deficit
        if not values:
            return determined
        found = array("I")
        found.frombytes(esis)
        E = p.symbol_size
        mv = memoryview(syms)
        for i, v in enumerate(found):
            if self.complete:
                break
            self._learn(v, mv[i * E:(i + 1) * E])  # copied: mv is the elimination's buffer
        return self.complete

    def source_block(self) -> bytes:
        """The k source symbols concatenated (only once complete)."""
        if not self.complete:
            raise FECError("block not decoded yet")
        return self._peeler.source_block()  # held sources from their bytes, others from values

    def known_source(self) -> dict[int, bytes]:
        """Source symbols known so far, by ESI."""
        src = self._peeler.source
        return {i: b for i in range(self.params.k) if (b := src(i)) is not None}


def decode(params: LDPCParams, symbols: Mapping[int, bytes] | Iterable[tuple[int, bytes]],
           ml: bool = True) -> bytes | None:
    """Decode a block from (ESI, symbol) pairs; None if not enough (``ml=False``:
    iterative decoding only)."""
    dec = LDPCDecoder(params, None if ml else Decoding.ITERATIVE)
    items = symbols.items() if isinstance(symbols, Mapping) else symbols
    for esi, sym in items:
        if dec.add(esi, sym):
            return dec.source_block()
    if ml and dec.solve():
        return dec.source_block()
    return None
