"""Pure-Python twins of m2c's C fast paths (deliverykit/csrc/m2c.c).

Each function here has the same signature and results as the C function of
the same name; ``deliverykit.fastpath.load`` picks the C one unless
``DELIVERYKIT_PURE=1``.  tests/m2c/test_m2c_fast.py proves equality with
hypothesis.

- ``m2c_ldpc_matrix(k, m, n1, seed)``: the left side of the RFC 5170 LDPC
  parity check matrix (Section 6.2 ``left_matrix_init``) in CSR form:
  ``(row_ptr, cols)``, both native uint32 arrays as bytes; row ``i`` holds
  the source columns ``cols[row_ptr[i]:row_ptr[i+1]]`` in insertion order.
- ``m2c_ldpc_graph(k, n, n1, seed)``: the decoders' Tanner graph of the whole
  H (left matrix plus staircase) as uint32 CSR tables both ways, in one call.
- ``m2c_ldpc_alloc(size)``: a bytearray left uninitialized in C (the decoder
  writes its values and partial sums before reading them).
- ``m2c_ldpc_encode(src, symbol_size, row_ptr, cols)``: the ``m`` staircase
  repair symbols (RFC 5170 Section 6.3) of the ``k`` source symbols
  concatenated in ``src``.
- ``m2c_ldpc_add(...)`` / ``m2c_ldpc_add_many(...)``: the iterative decoder;
  ``m2c_ldpc_peeler(...)`` holds the state so that ``.add(esi, symbol)`` and
  ``.take(esi, symbol)`` (LDPCDecoder.add: checks, duplicates, counters) are one
  cheap call per symbol, ``.take_many(items)`` / ``.take_at(esis, offsets, buf)``
  one per batch; a ``bytes`` source symbol is held, not copied.
- ``m2c_ldpc_eliminate(k, E, eq_ptr, eq_vars, unknown, partial, known, values)``:
  the maximum-likelihood step (Gaussian elimination with inactivation) over
  the equations the iterative decoder left unsolved; returns
  ``(deficit, determined, esis, symbols)``.
"""

from __future__ import annotations

import operator
import sys
from array import array
from typing import Any, NamedTuple, TypeAlias

PMMS_A = 16807  # 7**5, RFC 5170 Section 5.7
PMMS_M = 0x7FFFFFFF  # 2**31 - 1
_SSIZE_MAX = sys.maxsize
"""PY_SSIZE_T_MAX: the C refuses any m*E, n*E or count*E above it (ValueError)"""
E_MAX = 0xFFFF

Buf: TypeAlias = Any
"""an object with the buffer protocol, as the C takes (collections.abc.Buffer from 3.12)"""
"""RFC 5170 4.2.4.1: the symbol length E is a 16-bit field (ValueError above it, in C too)"""


def m2c_ldpc_matrix(k: int, m: int, n1: int, seed: int) -> tuple[bytes, bytes]:
    """RFC 5170 Section 6.2 ``left_matrix_init(k, n, N1)`` after seeding the PRNG.

    The PRNG is Park-Miller "minimal standard" scaled as in Section 5.7:
    ``floor(maxv * raw / 0x7FFFFFFF)`` in IEEE doubles, exactly the C casts.
    """
    if not (1 <= k <= 1 << 20 and 1 <= n1 <= m <= 1 << 20 and 1 <= seed <= 0x7FFFFFFE):
        raise ValueError("m2c_ldpc_matrix: need k >= 1, 1 <= N1 <= n-k, 1 <= seed <= 2^31-2")
    if n1 > 16:
        raise ValueError("m2c_ldpc_matrix: N1 <= 16")
    state = seed

    def rand(maxv: int) -> int:
        nonlocal state
        state = (state * PMMS_A) % PMMS_M
        return int(float(maxv) * float(state) / 2147483647.0)

    rows: list[list[int]] = [[] for _ in range(m)]
    total = n1 * k
    u = [h % m for h in range(total)]
    t = 0
    for j in range(k):
        col: list[int] = []  # rows already holding a 1 in column j
        for _ in range(n1):
            i = t
            while i < total and u[i] in col:
                i += 1
            if i < total:
                while True:
                    i = t + rand(total - t)
                    if u[i] not in col:
                        break
                r = u[i]
                u[i] = u[t]
                t += 1
            else:
                while True:
                    r = rand(m)
                    if r not in col:
                        break
            col.append(r)
            rows[r].append(j)
    # rows with fewer than two 1s get extra ones (code rates below 2/(2+N1))
    for i in range(m):
        row = rows[i]
        if not row:
            row.append(rand(k))
        if len(row) == 1 and k > 1:
            while True:
                j = rand(k)
                if j != row[0]:
                    break
            row.append(j)
    row_ptr = array("I", [0])
    cols = array("I")
    for row in rows:
        cols.extend(row)
        row_ptr.append(len(cols))
    return row_ptr.tobytes(), cols.tobytes()


def m2c_ldpc_graph(k: int, n: int, n1: int, seed: int) -> tuple[bytes, bytes, bytes, bytes, bytes]:
    """The Tanner graph of H = [left | staircase] for the decoders, uint32 CSR both ways.

    ``(eq_ptr, eq_vars, var_ptr, var_eqs, degrees)``: equation ``i`` holds its
    left row (``m2c_ldpc_matrix(k, n - k, n1, seed)``), then repair ``k+i``,
    then ``k+i-1`` for ``i > 0``; each variable's equations in increasing
    order; ``degrees`` is each equation's length.
    """
    if not (1 <= k < n and n - k <= 1 << 20):
        raise ValueError("m2c_ldpc_graph: need k >= 1, 1 <= N1 <= n-k, 1 <= seed <= 2^31-2")
    rp_b, cs_b = m2c_ldpc_matrix(k, n - k, n1, seed)
    rp, cs = array("I"), array("I")
    rp.frombytes(rp_b)
    cs.frombytes(cs_b)
    eq_ptr, eq_vars, degrees = array("I", [0]), array("I"), array("I")
    var_lists: list[list[int]] = [[] for _ in range(n)]
    for e in range(n - k):
        row = cs[rp[e]:rp[e + 1]].tolist() + [k + e] + ([k + e - 1] if e else [])
        eq_vars.extend(row)
        eq_ptr.append(len(eq_vars))
        degrees.append(len(row))
        for v in row:
            var_lists[v].append(e)
    var_ptr, var_eqs = array("I", [0]), array("I")
    for lst in var_lists:
        var_eqs.extend(lst)
        var_ptr.append(len(var_eqs))
    return (eq_ptr.tobytes(), eq_vars.tobytes(), var_ptr.tobytes(), var_eqs.tobytes(),
            degrees.tobytes())


def m2c_ldpc_alloc(size: int) -> bytearray:
    """``size`` bytes whose contents are undefined (the C does not zero them; zeros here)."""
    size = operator.index(size)
    if size < 0:
        raise ValueError("m2c_ldpc_alloc: negative size")
    return bytearray(size)


def m2c_ldpc_encode(src: Buf, symbol_size: int, row_ptr: Buf, cols: Buf) -> bytes:
    """Repair symbols: p_0 = sum(row 0); p_i = sum(row i) ^ p_{i-1} (RFC 5170 6.3)."""
    if symbol_size <= 0 or len(src) % symbol_size:
        raise ValueError("m2c_ldpc_encode: len(src) must be a multiple of symbol_size > 0")
    k = len(src) // symbol_size
    rp = array("I")
    rp.frombytes(row_ptr)
    cs = array("I")
    cs.frombytes(cols)
    if len(rp) < 1 or rp[-1] != len(cs) or any(c >= k for c in cs):
        raise ValueError("m2c_ldpc_encode: malformed matrix for this k")
    m = len(rp) - 1
    E = symbol_size
    if E > E_MAX or m * E > _SSIZE_MAX:  # the C checks E <= PY_SSIZE_T_MAX / m first
        raise ValueError("m2c_ldpc_encode: m * symbol_size does not fit in memory")
    mv = memoryview(src)
    s = [int.from_bytes(mv[i * E:(i + 1) * E], "little") for i in range(k)]
    out = bytearray(m * E)
    acc = 0
    for i in range(m):
        a, b = rp[i], rp[i + 1]
        if b < a:
            raise ValueError("m2c_ldpc_encode: malformed matrix for this k")
        for c in cs[a:b]:
            acc ^= s[c]
        out[i * E:(i + 1) * E] = acc.to_bytes(E, "little")
    return bytes(out)


def _view(buf: Buf, writable: bool = False) -> memoryview:
    """PyObject_GetBuffer's behaviour: TypeError for a non-buffer, BufferError when a
    writable buffer is required and ``buf`` is read-only."""
    mv = memoryview(buf)
    if writable and mv.readonly:
        raise BufferError("m2c_ldpc_add: buffer is not writable")
    return mv.cast("B")


def _u32(buf: Buf, writable: bool = False, min_items: int = 0,
         what: str = "m2c_ldpc_add: bad uint32 buffer") -> memoryview:
    """get_u32 in the C: a uint32 view, at least ``min_items`` long."""
    mv = _view(buf, writable)
    if mv.nbytes % 4 or mv.nbytes // 4 < min_items:
        raise ValueError(what)
    return mv.cast("I")


class _State(NamedTuple):
    """Views on the decoder state (names as in the C)."""

    EP: memoryview
    EV: memoryview
    VP: memoryview
    VE: memoryview
    U: memoryview
    P: memoryview
    V: memoryview
    K: memoryview
    m: int
    n: int
    nev: int
    nve: int
    ES: memoryview | None
    S: memoryview


def _ldpc_state(k: int, E: int, eq_ptr: Buf, eq_vars: Buf, var_ptr: Buf, var_eqs: Buf,
                unknown: Buf, partial: Buf, values: Buf, known: Buf, esis: Buf = None,
                symbols: Buf = b"", esi: int | None = None, many: bool = False,
                held: bool = False) -> _State:
    """Views on the decoder state with m2c_ldpc_add's O(1) checks, in the C's order
    (buffers one by one as ldpc_add_impl gets them, then the sizes)."""
    EP, EV = _u32(eq_ptr, min_items=1), _u32(eq_vars)
    VP, VE = _u32(var_ptr, min_items=1), _u32(var_eqs)
    U = _u32(unknown, writable=True)
    ES = _u32(esis) if many else None
    P, V, K = _view(partial, True), _view(values, True), _view(known, True)
    S = _view(symbols)
    m, n = len(EP) - 1, len(VP) - 1
    count = len(ES) if ES is not None else 1
    if (E <= 0 or E > E_MAX or max(m, n, count) * E > _SSIZE_MAX or k < 0 or k > n or n < 1
            or len(U) != m or len(P) != m * E or len(V) not in (n * E, k * E) or len(K) != n
            or (not held and len(S) != count * E)
            or (not many and not held and not (esi is not None and 0 <= esi < n))):
        raise ValueError("m2c_ldpc_add: inconsistent decoder state")
    return _State(EP, EV, VP, VE, U, P, V, K, m, n, len(EV), len(VE), ES, S)


_FROM_V = -1
_FROM_SYMBOL = -2


def m2c_ldpc_add(k: int, E: int, eq_ptr: Buf, eq_vars: Buf, var_ptr: Buf, var_eqs: Buf,
                 unknown: Buf, partial: Buf, values: Buf, known: Buf, esi: int,
                 symbol: Buf) -> int:
    """One step of the iterative decoder (RFC 5170 Appendix A) on caller-owned state.

    ``eq_ptr/eq_vars`` and ``var_ptr/var_eqs`` are the equation->variable and
    variable->equation CSR tables (uint32); ``unknown`` (uint32 per equation,
    writable) counts unknowns; ``partial`` (m*E) holds each equation's partial
    sum; ``values`` (n*E, or k*E: then only the sources are kept and a repair value
    is XORed from where it is, the symbol or the partial sum of the equation that
    solved it, whose partial is cleared last) and ``known`` (n bytes) the symbols.
    Variables are marked known when pushed, so each is processed once; returns how
    many source symbols (ESI < k) became known.
    """
    return _ldpc_add(k, E, eq_ptr, eq_vars, var_ptr, var_eqs, unknown, partial, values, known,
                     esi, symbol, False, None)


def _ldpc_add(k: int, E: int, eq_ptr: Buf, eq_vars: Buf, var_ptr: Buf, var_eqs: Buf,
              unknown: Buf, partial: Buf, values: Buf, known: Buf, esi: int,
              symbol: Buf, hold: bool, at: dict[int, int] | None) -> int:
    """m2c_ldpc_add; with ``hold`` (peel_one's in the C) a source symbol is not copied
    into ``values``: its value is read from ``symbol``, as a repair symbol's is.  With
    ``at`` ("pointing", k*E values only) a source solved by equation e is not copied
    either: ``at[source] = e`` (its value is e's partial) and solved equations' partials
    are not cleared (nothing reads them once their unknown count is 0)."""
    k, E, esi = operator.index(k), operator.index(E), operator.index(esi)  # "nn...n" in C
    EP, EV, VP, VE, U, P, V, K, m, n, nev, nve, _, S = _ldpc_state(
        k, E, eq_ptr, eq_vars, var_ptr, var_eqs, unknown, partial, values, known,
        symbols=symbol, esi=esi)
    if K[esi]:
        return 0
    all_values = len(V) == n * E
    newly = 0
    K[esi] = 1
    if esi < k:
        newly += 1
    # where each stacked variable's value is: _FROM_V, _FROM_SYMBOL or its equation
    stack: list[tuple[int, int]] = []
    if not hold and (esi < k or all_values):
        V[esi * E:(esi + 1) * E] = S
        stack.append((esi, _FROM_V))
    else:  # a repair symbol, or a source whose caller's bytes the peeler holds
        stack.append((esi, _FROM_SYMBOL))
    while stack:
        v, src = stack.pop()
        if src == _FROM_V:
            b = int.from_bytes(V[v * E:(v + 1) * E], "little")
        elif src == _FROM_SYMBOL:
            b = int.from_bytes(S, "little")
        else:
            b = int.from_bytes(P[src * E:(src + 1) * E], "little")
        if VP[v] > VP[v + 1] or VP[v + 1] > nve:
            raise ValueError("m2c_ldpc_add: inconsistent decoder state")
        for x in range(VP[v], VP[v + 1]):
            e = VE[x]
            if e >= m or EP[e] > EP[e + 1] or EP[e + 1] > nev:
                raise ValueError("m2c_ldpc_add: inconsistent decoder state")
            if U[e] == 0 or e == src:
                continue
            if U[e] == EP[e + 1] - EP[e]:  # first known variable: partial undefined yet
                P[e * E:(e + 1) * E] = b.to_bytes(E, "little")
            else:
                a = int.from_bytes(P[e * E:(e + 1) * E], "little")
                P[e * E:(e + 1) * E] = (a ^ b).to_bytes(E, "little")
            U[e] -= 1
            if U[e] == 1:
                for y in range(EP[e], EP[e + 1]):
                    u = EV[y]
                    if u >= n:
                        raise ValueError("m2c_ldpc_add: inconsistent decoder state")
                    if not K[u]:
                        K[u] = 1
                        if u < k:
                            newly += 1
                        if at is not None and u < k:  # pointing: the value stays in P[e]
                            at[u] = e
                            stack.append((u, e))
                        elif u < k or all_values:
                            V[u * E:(u + 1) * E] = P[e * E:(e + 1) * E]
                            stack.append((u, _FROM_V))
                        else:
                            stack.append((u, e))
                        break
        if src >= 0 and U[src] != 0:  # its equation: partial ^ value = 0, no unknown left
            if at is None:  # pointing: left as it is (never read again)
                P[src * E:(src + 1) * E] = bytes(E)
            U[src] -= 1
    return newly


class _Peeler:
    """What m2c_ldpc_peeler returns (see the C): ``add`` is m2c_ldpc_add on the held state;
    ``take``, ``take_many``, ``take_at`` are LDPCDecoder.add with its counters; a source
    symbol taken as ``bytes`` is held, not copied into ``values``."""

    def __init__(self, k: int, E: int, state: tuple[Buf, ...], n: int, got: memoryview,
                 known: memoryview, values: memoryview, error: type[Exception]) -> None:
        self._k, self._E, self._state, self._n = k, E, state, n
        self._got, self._known, self._values, self._error = got, known, values, error
        self._ref: dict[int, tuple[bytes, int]] = {}
        """held sources: the bytes holding the value, and where in it"""
        self._at: dict[int, int] = {}
        """pointed sources: the equation whose partial holds the value"""
        self._partial = _view(state[5])
        self._all_values = len(values) == n * E
        self.received = 0
        """distinct symbols taken (decoded ones taken later count too)"""
        self.duplicates = 0
        """symbols taken more than once"""
        self.source_known = 0
        """source symbols known"""

    def add(self, esi: int, symbol: Buf) -> int:
        esi = operator.index(esi)
        S = _view(symbol)
        if len(S) != self._E or not 0 <= esi < self._n:
            raise ValueError("m2c_ldpc_add: inconsistent decoder state")
        ep, ev, vp, ve, u, p, v, kn = self._state
        r = m2c_ldpc_add(self._k, self._E, ep, ev, vp, ve, u, p, v, kn, esi, S)
        self.source_known += r
        return r

    def _take(self, esi: int, symbol: Buf, owner: bytes | None = None, at: int = 0) -> None:
        if not 0 <= esi < self._n:
            raise self._error(f"ESI {esi} out of range for n={self._n}")
        if owner is None and type(symbol) is bytes:
            owner = symbol
        S = _view(symbol)
        if len(S) != self._E:
            raise self._error(f"symbol of {len(S)} bytes, expected {self._E}")
        if self._got[esi]:
            self.duplicates += 1
            return
        self._got[esi] = 1
        self.received += 1
        if self.source_known == self._k or self._known[esi]:
            return
        hold = owner is not None and esi < self._k and not self._all_values
        ep, ev, vp, ve, u, p, v, kn = self._state
        self.source_known += _ldpc_add(self._k, self._E, ep, ev, vp, ve, u, p, v, kn, esi, S,
                                       hold, None if self._all_values else self._at)
        if hold:
            assert owner is not None
            self._ref[esi] = (owner, at)

    def take(self, esi: int, symbol: Buf) -> bool:
        """LDPCDecoder.add: True once every source symbol is known."""
        self._take(operator.index(esi), symbol)
        return self.source_known == self._k

    def take_many(self, items: Any) -> bool:
        """take for each (esi, symbol), or (esi, datagram, offset): the E bytes from
        ``offset`` in ``datagram`` (held when it is bytes), of ``items``."""
        for item in items:
            if isinstance(item, tuple) and len(item) == 3:  # (esi, datagram, offset)
                esi, dgram, at = operator.index(item[0]), item[1], operator.index(item[2])
                b = _view(dgram)
                at = at if 0 <= at <= len(b) else len(b)
                self._take(esi, b[at:at + self._E], dgram if type(dgram) is bytes else None, at)
                continue
            if not isinstance(item, tuple | list) or len(item) != 2:
                raise TypeError("take_many: items must be (esi, symbol) pairs")
            self._take(operator.index(item[0]), item[1])
        return self.source_known == self._k

    def take_at(self, esis: Buf, offsets: Buf, buf: Buf) -> bool:
        """take for each uint32 ESI with its symbol at the uint32 offset in ``buf``."""
        es, off = _u32(esis), _u32(offsets)
        b = _view(buf)
        if len(es) != len(off):
            raise ValueError("take_at: as many offsets as ESIs")
        owner = buf if type(buf) is bytes else None
        for esi, at in zip(es, off, strict=True):
            self._take(esi, b[at:at + self._E], owner, at)
        return self.source_known == self._k

    def source(self, i: int) -> bytes | None:
        """Source ``i`` if known."""
        i = operator.index(i)
        if not 0 <= i < self._k:
            raise IndexError("source: ESI not a source symbol")
        if not self._known[i]:
            return None
        if i in self._ref:
            b, at = self._ref[i]
            return b[at:at + self._E]
        if i in self._at:
            e = self._at[i]
            return bytes(self._partial[e * self._E:(e + 1) * self._E])
        return bytes(self._values[i * self._E:(i + 1) * self._E])

    def source_block(self) -> bytes:
        """The k source values concatenated."""
        E = self._E
        out = bytearray(self._values[:self._k * E])
        for i, (b, at) in self._ref.items():
            out[i * E:(i + 1) * E] = b[at:at + E]
        for i, e in self._at.items():
            out[i * E:(i + 1) * E] = self._partial[e * E:(e + 1) * E]
        return bytes(out)


def m2c_ldpc_peeler(k: int, E: int, eq_ptr: Buf, eq_vars: Buf, var_ptr: Buf, var_eqs: Buf,
                    unknown: Buf, partial: Buf, values: Buf, known: Buf, got: Buf,
                    error: type[Exception] = ValueError) -> _Peeler:
    """``m2c_ldpc_add``'s state checked once and held: the result's ``add(esi, symbol)``
    is ``m2c_ldpc_add(k, E, <that state>, esi, symbol)`` (one cheap C call per symbol);
    ``take(esi, symbol)`` adds the checks (``error`` raised), the duplicate check on ``got``
    (n bytes) and the counters; ``take_many``, ``take_at`` take batches."""
    k, E = operator.index(k), operator.index(E)
    if not (isinstance(error, type) and issubclass(error, Exception)):
        raise TypeError("m2c_ldpc_peeler: error must be an exception class")
    st = _ldpc_state(k, E, eq_ptr, eq_vars, var_ptr, var_eqs, unknown, partial, values, known,
                     held=True)
    G = _view(got, True)
    if len(G) != st.n:
        raise ValueError("m2c_ldpc_add: inconsistent decoder state")
    return _Peeler(k, E, (eq_ptr, eq_vars, var_ptr, var_eqs, unknown, partial, values, known),
                   st.n, G, st.K, st.V, error)


def m2c_ldpc_add_many(k: int, E: int, eq_ptr: Buf, eq_vars: Buf, var_ptr: Buf, var_eqs: Buf,
                      unknown: Buf, partial: Buf, values: Buf, known: Buf, esis: Buf,
                      symbols: Buf) -> int:
    """``m2c_ldpc_add`` for each (uint32 ESI in ``esis``, E-byte slice of ``symbols``)."""
    k, E = operator.index(k), operator.index(E)
    st = _ldpc_state(k, E, eq_ptr, eq_vars, var_ptr, var_eqs, unknown, partial, values, known,
                     esis=esis, symbols=symbols, many=True)
    n, es, sym = st.n, st.ES, st.S
    assert es is not None  # many=True
    total = 0
    for i, esi in enumerate(es):
        if esi >= n:
            raise ValueError("m2c_ldpc_add: inconsistent decoder state")
        total += m2c_ldpc_add(k, E, eq_ptr, eq_vars, var_ptr, var_eqs, unknown, partial, values,
                              known, esi, sym[i * E:(i + 1) * E])
    return total


def m2c_ldpc_eliminate(k: int, E: int, eq_ptr: Buf, eq_vars: Buf, unknown: Buf, partial: Buf,
                       known: Buf, values: bool) -> tuple[int, bool, bytes, bytes]:
    """Maximum-likelihood step over the iterative decoder's state (same plan as the C).

    ``eq_ptr/eq_vars``: equation -> variables (CSR, uint32); ``unknown``: uint32
    per equation, its count of unknown variables (0: finished); ``partial``
    (m*E): XOR of each equation's known variables; ``known``: n bytes.

    1. Structure: peel equations with one unresolved unknown; when stalled,
       inactivate the unknown of highest remaining degree in a lightest live
       equation.  Every unknown becomes (constant) + (combination of inactive
       unknowns, a bit mask); equations left with no unresolved unknown are
       constraints on the inactive ones, solved by Gauss-Jordan over GF(2).
    2. ``deficit`` = inactive - rank, the dimension of the solution space (at
       least this many more equations are needed).  A source is determined
       when its combination does not involve a free (pivot-less) column.
    3. With ``values``: a particular solution (free columns 0) gives every
       determined source (same value in every solution).

    Returns ``(deficit, determined, esis, symbols)``: ``determined`` is True
    when every unknown source is determined; ``esis`` (uint32 array bytes,
    ascending) and ``symbols`` (their concatenation) list the determined
    unknown sources when ``values`` (else both empty).  None of these depend
    on the inactivation choices.
    """
    k, E = operator.index(k), operator.index(E)
    EP, EV, U = _u32(eq_ptr, min_items=1), _u32(eq_vars), _u32(unknown)
    P, K = _view(partial), _view(known)
    m, n, nev = len(EP) - 1, len(K), len(EV)
    bad = "m2c_ldpc_eliminate: inconsistent decoder state"
    if (E <= 0 or E > E_MAX or max(m, n, 1) * E > _SSIZE_MAX or k < 0 or k > n or n < 1
            or len(U) != m
            or len(P) != m * E):
        raise ValueError(bad)
    if any(EP[e] > EP[e + 1] or EP[e + 1] > nev for e in range(m)):
        raise ValueError(bad)
    # live equations: their unknown variables
    live: dict[int, set[int]] = {}
    var_eqs: dict[int, list[int]] = {v: [] for v in range(n) if not K[v]}
    for e in range(m):
        if U[e] == 0:
            continue
        row = EV[EP[e]:EP[e + 1]]
        if any(v >= n for v in row) or len(set(row)) != len(row):
            raise ValueError(bad)
        live[e] = unknowns = {v for v in row if not K[v]}
        for v in unknowns:
            var_eqs[v].append(e)
    vdeg = {v: len(es) for v, es in var_eqs.items()}
    unresolved = set(var_eqs)
    stack = [e for e in range(m) if e in live and len(live[e]) == 1]
    log: list[tuple[int, int]] = []  # (variable, equation it came from or -1: inactive)
    cons: list[int] = []
    n_in = 0
    while unresolved:
        v = frm = -1
        while stack:
            e = stack.pop()
            s = live.get(e)
            if s is not None and len(s) == 1:
                (v,) = s
                frm = e
                break
        if v < 0:
            best, bc = -1, None
            for e in range(m):
                s = live.get(e)
                if s is not None and len(s) >= 2 and (bc is None or len(s) < bc):
                    best, bc = e, len(s)
                    if bc == 2:
                        break
            if best >= 0:
                bd = 0
                for u in EV[EP[best]:EP[best + 1]]:
                    if u in unresolved and (v < 0 or vdeg[u] > bd):
                        v, bd = u, vdeg[u]
            else:
                v = min(unresolved)
            n_in += 1
        else:
            del live[frm]
            vdeg[v] -= 1
        unresolved.discard(v)
        log.append((v, frm))
        for e2 in var_eqs[v]:
            s = live.get(e2)
            if s is None:
                continue
            s.discard(v)
            if len(s) == 1:
                stack.append(e2)
            elif not s:
                del live[e2]
                cons.append(e2)

    def sym(e: int) -> int:  # partial_of in the C: 0 while no variable of e is known
        if U[e] == EP[e + 1] - EP[e]:
            return 0
        return int.from_bytes(P[e * E:(e + 1) * E], "little")

    # combinations over the inactive unknowns (and constants), in resolution order
    mask: dict[int, int] = {}
    const: dict[int, int] = {}
    col = 0
    for v, e in log:
        if e < 0:
            mask[v], const[v] = 1 << col, 0
            col += 1
            continue
        mk, r = 0, sym(e) if values else 0
        for u in EV[EP[e]:EP[e + 1]]:
            if u != v and not K[u]:
                mk ^= mask[u]
                r ^= const[u]
        mask[v], const[v] = mk, r
    pivots: dict[int, tuple[int, int]] = {}  # column -> (reduced row, rhs)
    for e in cons:
        mk, r = 0, sym(e) if values else 0
        for u in EV[EP[e]:EP[e + 1]]:
            if not K[u]:
                mk ^= mask[u]
                r ^= const[u]
        for c, (pm, pr) in pivots.items():
            if mk >> c & 1:
                mk ^= pm
                r ^= pr
        if not mk:
            continue
        c = (mk & -mk).bit_length() - 1
        for c2, (pm, pr) in list(pivots.items()):
            if pm >> c & 1:
                pivots[c2] = (pm ^ mk, pr ^ r)
        pivots[c] = (mk, r)
    deficit = n_in - len(pivots)
    free = 0
    for c in range(n_in):
        if c not in pivots:
            free |= 1 << c
    free_dep = [1 << c for c in range(n_in)]
    for c, (pm, _) in pivots.items():
        free_dep[c] = pm & free
    determined = True
    found: list[int] = []
    for v in range(k):
        if K[v]:
            continue
        dep, mk = 0, mask[v] if deficit else 0
        while mk:
            low = mk & -mk
            dep ^= free_dep[low.bit_length() - 1]
            mk ^= low
        if dep:
            determined = False
            if not values:
                break
        else:
            found.append(v)
    if not values:
        return deficit, determined, b"", b""
    # particular solution: free columns 0, pivot columns their reduced rhs
    val: dict[int, int] = {}
    col = 0
    for v, e in log:
        if e < 0:
            val[v] = pivots[col][1] if col in pivots else 0
            col += 1
            continue
        x = sym(e)
        for u in EV[EP[e]:EP[e + 1]]:
            if u != v and not K[u]:
                x ^= val[u]
        val[v] = x
    return (deficit, determined, array("I", found).tobytes(),
            b"".join(val[v].to_bytes(E, "little") for v in found))
