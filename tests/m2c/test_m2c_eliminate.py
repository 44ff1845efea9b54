"""The ML elimination (m2c_ldpc_eliminate): C vs its twin, and vs linear algebra.

The C function (deliverykit/csrc/m2c.c) and the twin (m2c/_fast.py) get the
state of a real iterative decoder stalled on a random subset of symbols, so
"not decodable" (deficit > 0) and "decodable" states both occur.  Besides
C == twin, the deficit is checked against an independent rank computation and
every returned symbol against the original source.
"""

from __future__ import annotations

import random
from array import array

import pytest
from hypothesis import given, settings, strategies as st

from deliverykit.fastpath import speedups
from m2c import _fast
from m2c.fec import ldpc

needs_c = pytest.mark.skipif(
    speedups is None or not hasattr(speedups, "m2c_ldpc_eliminate"),
    reason="C extension not built (setup.py build_ext --inplace)")


def _call(fn, *args):
    try:
        return ("ok", fn(*args))
    except ValueError:
        return ("ValueError", None)


def _stalled(k: int, ratio: float, n1: int, seed: int, E: int, frac: float, rseed: int):
    n = max(k + n1, int(k * ratio))
    params = ldpc.LDPCParams(k=k, n=n, symbol_size=E, n1=n1, seed=seed)
    rng = random.Random(rseed)
    src = rng.randbytes(k * E)
    rep = ldpc.encode(params, src)
    syms = src + rep
    dec = ldpc.LDPCDecoder(params)
    esis = rng.sample(range(n), int(n * frac))
    for esi in esis:
        dec.add(esi, syms[esi * E:(esi + 1) * E])
    return params, dec, syms


def _state(dec: ldpc.LDPCDecoder):
    g, p = dec._g, dec.params
    return (p.k, p.symbol_size, g.eq_ptr, g.eq_vars, bytes(dec._unknown), bytes(dec._partial),
            bytes(dec._known))


def _nullity(dec: ldpc.LDPCDecoder) -> int:
    """Dimension of the solution space over the unknowns, by plain elimination."""
    p = dec.params
    rows = ldpc.staircase_matrix(p.k, p.n, p.n1, p.seed).rows()
    unknown = [v for v in range(p.n) if not dec._known[v]]
    col = {v: i for i, v in enumerate(unknown)}
    basis: dict[int, int] = {}
    for row in rows:
        r = 0
        for v in row:
            if v in col:
                r |= 1 << col[v]
        while r:
            top = r.bit_length() - 1
            if top not in basis:
                basis[top] = r
                break
            r ^= basis[top]
    return len(unknown) - len(basis)


@needs_c
@settings(max_examples=120, deadline=None)
@given(st.integers(1, 120), st.sampled_from([1.25, 1.5, 2.0, 3.0]), st.integers(3, 6),
       st.integers(1, 2**31 - 2), st.integers(1, 24), st.floats(0.2, 0.9),
       st.integers(0, 2**32))
def test_c_equals_twin_on_real_decoder_states(k, ratio, n1, seed, E, frac, rseed):
    params, dec, syms = _stalled(k, ratio, n1, seed, E, frac, rseed)
    state = _state(dec)
    for values in (False, True):
        rc = _call(speedups.m2c_ldpc_eliminate, *state, values)
        rp = _call(_fast.m2c_ldpc_eliminate, *state, values)
        assert rc == rp
        assert rc[0] == "ok"
        deficit, determined, esis, out = rc[1]
        assert deficit == _nullity(dec)
        unknown_src = [v for v in range(k) if not dec._known[v]]
        if deficit == 0:
            assert determined
        if values:
            found = array("I")
            found.frombytes(esis)
            assert list(found) == sorted(found)
            assert determined == (list(found) == unknown_src)
            for i, v in enumerate(found):
                assert out[i * E:(i + 1) * E] == syms[v * E:(v + 1) * E]
        else:
            assert esis == out == b""


@needs_c
@settings(max_examples=150, deadline=None)
@given(st.integers(2, 40), st.integers(1, 2**31 - 2), st.floats(0.3, 0.8),
       st.integers(0, 2**32), st.data())
def test_c_equals_twin_on_malformed_state(k, seed, frac, rseed, data):
    """Corrupted tables or wrong sizes: the same ValueError or the same result, never a crash."""
    params, dec, _ = _stalled(k, 2.0, 3, seed, 4, frac, rseed)
    args = list(_state(dec))
    which = data.draw(st.sampled_from(["eq_vars", "eq_ptr", "unknown", "partial", "known", "E",
                                       "k"]))
    if which in ("eq_vars", "eq_ptr", "unknown"):
        i = {"eq_ptr": 2, "eq_vars": 3, "unknown": 4}[which]
        a = array("I")
        a.frombytes(args[i])
        if a and data.draw(st.booleans()):
            a[data.draw(st.integers(0, len(a) - 1))] = data.draw(st.integers(0, 3 * params.n))
            args[i] = a.tobytes()
        else:
            args[i] = args[i][: data.draw(st.integers(0, len(args[i])))]
    elif which in ("partial", "known"):
        i = {"partial": 5, "known": 6}[which]
        args[i] = args[i] + data.draw(st.binary(max_size=5))
    elif which == "E":
        args[1] = data.draw(st.integers(-2, 8))
    else:
        args[0] = data.draw(st.integers(-2, 3 * k))
    values = data.draw(st.booleans())
    assert _call(speedups.m2c_ldpc_eliminate, *args, values) == _call(
        _fast.m2c_ldpc_eliminate, *args, values)


def test_realistic_block_decodes_through_solve():
    """k = 400, N1 = 5, ~1.05 k symbols: both routes decode the exact source."""
    params, dec, syms = _stalled(400, 2.0, 5, 7, 32, 0.53, 1)
    assert not dec.complete
    k, E = params.k, params.symbol_size
    state = _state(dec)
    r_py = _fast.m2c_ldpc_eliminate(*state, True)
    if speedups is not None and hasattr(speedups, "m2c_ldpc_eliminate"):
        assert speedups.m2c_ldpc_eliminate(*state, True) == r_py
    assert dec.solve(partial=False)
    assert dec.ml_deficit == r_py[0] == 0
    assert dec.source_block() == syms[: k * E]
