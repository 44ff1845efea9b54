"""C fast paths (deliverykit/_speedups/m2c.c) vs their twins (m2c/_fast.py)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
