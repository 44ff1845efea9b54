"""C fast paths (deliverykit/csrc/m2c.c) vs their twins (m2c/_fast.py)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from deliverykit.fastpath import speedups
from m2c import _fast

pytestmark = pytest.mark.skipif(
    speedups is None or not hasattr(speedups, "m2c_ldpc_matrix"),
    reason="C extension not built (setup.py build_ext --inplace)")


def both(name, *args):
    c = getattr(speedups, name)
    py = getattr(_fast, name)
    try:
        rc = ("ok", c(*args))
    except ValueError:
        rc = ("ValueError", None)
    try:
        rp = ("ok", py(*args))
    except ValueError:
        rp = ("ValueError", None)
    return rc, rp


@settings(max_examples=150, deadline=None)
@given(st.integers(-2, 300), st.integers(-2, 300), st.integers(-1, 18),
       st.integers(-1, 0x7FFFFFFF))
def test_matrix_c_equals_twin(k, m, n1, seed):
    rc, rp = both("m2c_ldpc_matrix", k, m, n1, seed)
    assert rc == rp


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 60), st.integers(3, 60), st.integers(1, 70), st.integers(1, 2**31 - 2),
       st.randoms(use_true_random=False))
def test_encode_c_equals_twin(k, m, E, seed, rnd):
    rp, cs = _fast.m2c_ldpc_matrix(k, m, 3, seed)
    src = rnd.randbytes(k * E)
    rc, rpy = both("m2c_ldpc_encode", src, E, rp, cs)
    assert rc == rpy and rc[0] == "ok"
    assert len(rc[1]) == m * E


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64), st.integers(-1, 9), st.binary(max_size=24),
       st.binary(max_size=24))
def test_encode_on_garbage_both_agree(src, E, rp, cs):
    rc, rpy = both("m2c_ldpc_encode", src, E, rp, cs)
    assert rc == rpy


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 40), st.integers(1, 9), st.integers(1, 10**6), st.data())
def test_ldpc_add_c_equals_twin(k, E, seed, data):
    from m2c.fec.ldpc import _graph

    n = 2 * k + 3
    g = _graph(k, n, 3, seed)
    rnd = data.draw(st.randoms(use_true_random=False))
    states = []
    for _ in range(2):
        states.append([bytearray(g.degrees), bytearray((n - k) * E), bytearray(n * E),
                       bytearray(n)])
    order = data.draw(st.lists(st.integers(0, n - 1), max_size=2 * n))
    for esi in order:
        sym = rnd.randbytes(E)
        rets = []
        for fn, st_ in ((speedups.m2c_ldpc_add, states[0]), (_fast.m2c_ldpc_add, states[1])):
            rets.append(fn(k, E, g.eq_ptr, g.eq_vars, g.var_ptr, g.var_eqs, *st_, esi, sym))
        assert rets[0] == rets[1]
        assert states[0] == states[1]


@settings(max_examples=200, deadline=None)
@given(st.integers(-1, 5), st.integers(-1, 4),
       st.lists(st.binary(max_size=24), min_size=9, max_size=9), st.integers(-1, 6))
def test_ldpc_add_garbage_both_agree(k, E, bufs, esi):
    args_c = [bytes(b) for b in bufs[:4]] + [bytearray(b) for b in bufs[4:8]]
    args_p = [bytes(b) for b in bufs[:4]] + [bytearray(b) for b in bufs[4:8]]
    rc, rp = both_add(k, E, args_c, args_p, esi, bufs[8])
    assert rc == rp


def both_add(k, E, args_c, args_p, esi, sym):
    out = []
    for fn, args in ((speedups.m2c_ldpc_add, args_c), (_fast.m2c_ldpc_add, args_p)):
        try:
            out.append(("ok", fn(k, E, *args, esi, sym)))
        except (ValueError, TypeError) as exc:
            out.append((type(exc).__name__, None))
    return out[0], out[1]


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 30), st.integers(1, 6), st.integers(1, 10**6), st.data())
def test_ldpc_add_many_c_equals_twin_and_single_steps(k, E, seed, data):
    from array import array

    from m2c.fec.ldpc import _graph

    n = 2 * k + 3
    g = _graph(k, n, 3, seed)
    rnd = data.draw(st.randoms(use_true_random=False))
    esis = data.draw(st.lists(st.integers(0, n - 1), max_size=2 * n))
    syms = [rnd.randbytes(E) for _ in esis]
    states = [[bytearray(g.degrees), bytearray((n - k) * E), bytearray(n * E), bytearray(n)]
              for _ in range(3)]
    args = (array("I", esis).tobytes(), b"".join(syms))
    r_c = speedups.m2c_ldpc_add_many(k, E, g.eq_ptr, g.eq_vars, g.var_ptr, g.var_eqs,
                                     *states[0], *args)
    r_p = _fast.m2c_ldpc_add_many(k, E, g.eq_ptr, g.eq_vars, g.var_ptr, g.var_eqs,
                                  *states[1], *args)
    r_1 = sum(speedups.m2c_ldpc_add(k, E, g.eq_ptr, g.eq_vars, g.var_ptr, g.var_eqs,
                                    *states[2], e, s) for e, s in zip(esis, syms))
    assert r_c == r_p == r_1
    assert states[0] == states[1] == states[2]


@settings(max_examples=200, deadline=None)
@given(st.integers(-1, 5), st.integers(-1, 4),
       st.lists(st.binary(max_size=24), min_size=10, max_size=10))
def test_ldpc_add_many_garbage_both_agree(k, E, bufs):
    out = []
    for fn in (speedups.m2c_ldpc_add_many, _fast.m2c_ldpc_add_many):
        args = [bytes(b) for b in bufs[:4]] + [bytearray(b) for b in bufs[4:8]] + bufs[8:]
        try:
            out.append(("ok", fn(k, E, *args)))
        except (ValueError, TypeError) as exc:
            out.append((type(exc).__name__, None))
    assert out[0] == out[1]
