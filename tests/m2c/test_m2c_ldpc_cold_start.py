"""LDPC decoder creation from a cold start (issue 17): the Tanner graph is built in one C
call, ``m2c_ldpc_graph``, with a pure-Python twin; both give the same bytes as the graph
built from ``staircase_matrix(...).rows()`` (the former Python construction, kept here as
the reference), and a decoder built on it decodes exactly as before."""

from __future__ import annotations

import os
import random
from array import array

import pytest
from hypothesis import given, settings, strategies as st

from deliverykit.fastpath import speedups
from deliverykit.testing import require_data
from m2c import _fast
from m2c.fec import ldpc


def need_c() -> None:
    """Skip (fail under CI=true) without the C extension's m2c_ldpc_graph."""
    require_data(speedups is not None and hasattr(speedups, "m2c_ldpc_graph"),
                 "deliverykit._speedups with m2c_ldpc_graph (setup.py build_ext --inplace)")


def reference_graph(k: int, n: int, n1: int, seed: int) -> tuple[bytes, ...]:
    """The Tanner graph as ldpc._graph built it before m2c_ldpc_graph (from the rows)."""
    rows = ldpc.staircase_matrix(k, n, n1, seed).rows()
    eq_ptr, eq_vars = array("I", [0]), array("I")
    var_lists: list[list[int]] = [[] for _ in range(n)]
    for e, row in enumerate(rows):
        eq_vars.extend(row)
        eq_ptr.append(len(eq_vars))
        for v in row:
            var_lists[v].append(e)
    var_ptr, var_eqs = array("I", [0]), array("I")
    for lst in var_lists:
        var_eqs.extend(lst)
        var_ptr.append(len(var_eqs))
    deg = array("I", (len(r) for r in rows))
    return (eq_ptr.tobytes(), eq_vars.tobytes(), var_ptr.tobytes(), var_eqs.tobytes(),
            deg.tobytes())


def outcome(fn, *args):
    try:
        return ("ok", fn(*args))
    except ValueError:
        return ("ValueError", None)


@settings(max_examples=120, deadline=None)
@given(k=st.integers(1, 400), extra=st.integers(0, 600), n1=st.integers(3, 10),
       seed=st.integers(1, 0x7FFFFFFE))
def test_graph_c_equals_twin_and_the_reference(k, extra, n1, seed):
    need_c()
    n = k + n1 + extra  # every rate, down to rows of degree 0 and 1 (extra 1s)
    c = speedups.m2c_ldpc_graph(k, n, n1, seed)
    assert c == _fast.m2c_ldpc_graph(k, n, n1, seed)
    assert c == reference_graph(k, n, n1, seed)


@settings(max_examples=150, deadline=None)
@given(st.integers(-2, 300), st.integers(-2, 600), st.integers(-1, 18),
       st.integers(-1, 0x7FFFFFFF))
def test_graph_on_bad_arguments_both_agree(k, n, n1, seed):
    need_c()
    rc, rp = outcome(speedups.m2c_ldpc_graph, k, n, n1, seed), outcome(
        _fast.m2c_ldpc_graph, k, n, n1, seed)
    assert rc == rp


@pytest.mark.parametrize("k,n,n1,seed", [(10000, 15000, 3, 1), (1000, 1500, 3, 1234),
                                         (100, 150, 3, 7), (5, 200, 3, 99), (1, 5, 3, 1),
                                         (2000, 4000, 7, 2**31 - 2)])
def test_graph_equals_the_reference_at_bench_sizes(k, n, n1, seed):
    need_c()
    assert speedups.m2c_ldpc_graph(k, n, n1, seed) == reference_graph(k, n, n1, seed)


def test_matrix_c_equals_twin_at_low_rates():
    need_c()
    """the left matrix (now drawn by column, then sorted into rows) is unchanged, with extra
    1s for rows of degree 0 and 1"""
    for k, m, n1, seed in [(3, 200, 3, 5), (1, 50, 3, 9), (2, 40, 10, 77), (40, 41, 3, 2)]:
        assert speedups.m2c_ldpc_matrix(k, m, n1, seed) == _fast.m2c_ldpc_matrix(k, m, n1, seed)


@pytest.mark.parametrize("k", [100, 1000])
def test_a_cold_decoder_decodes_as_before(k):
    """caches cleared, a new decoder on the C graph decodes a random order to the source"""
    E = 64
    p = ldpc.LDPCParams(k, k * 3 // 2, E, n1=3, seed=1)
    src = os.urandom(k * E)
    rep = ldpc.encode(p, src)
    syms = [src[i * E:(i + 1) * E] for i in range(k)] + [
        rep[i * E:(i + 1) * E] for i in range(p.m)]
    order = list(range(p.n))
    random.Random(k).shuffle(order)
    ldpc.staircase_matrix.cache_clear()
    ldpc._graph.cache_clear()
    dec = ldpc.LDPCDecoder(p)
    assert dec._g == ldpc._Graph(*reference_graph(p.k, p.n, p.n1, p.seed))
    got = dec.add_many((e, syms[e]) for e in order) or dec.solve()
    assert got and dec.source_block() == src


def state(g, n: int, k: int, E: int, values: int) -> list[bytearray]:
    return [bytearray(g.degrees), bytearray((n - k) * E), bytearray(values * E), bytearray(n)]


@settings(max_examples=80, deadline=None)
@given(k=st.integers(2, 40), extra=st.integers(0, 40), E=st.integers(1, 9),
       seed=st.integers(1, 10**6), data=st.data())
def test_source_only_values_decode_as_all_values(k, extra, E, seed, data):
    """values of k*E bytes (repair symbols XORed from where they are, never copied): C and
    twin agree step by step, and with n*E values every result, partial, unknown and known
    byte and every source value is the same"""
    need_c()
    n = k + 3 + extra
    g = ldpc._graph(k, n, 3, seed)
    rnd = data.draw(st.randoms(use_true_random=False))
    full, c_small, py_small = state(g, n, k, E, n), state(g, n, k, E, k), state(g, n, k, E, k)
    order = data.draw(st.lists(st.integers(0, n - 1), max_size=2 * n))
    for esi in order:
        sym = rnd.randbytes(E)
        rets = [fn(k, E, g.eq_ptr, g.eq_vars, g.var_ptr, g.var_eqs, *st_, esi, sym)
                for fn, st_ in ((speedups.m2c_ldpc_add, full), (speedups.m2c_ldpc_add, c_small),
                                (_fast.m2c_ldpc_add, py_small))]
        assert rets[0] == rets[1] == rets[2]
        assert c_small == py_small
        assert c_small[:2] + c_small[3:] == full[:2] + full[3:]  # unknown, partial, known
        assert c_small[2] == full[2][:k * E]


@settings(max_examples=40, deadline=None)
@given(k=st.integers(2, 30), E=st.integers(1, 5), seed=st.integers(1, 10**6), data=st.data())
def test_source_only_values_in_batches_c_equals_twin(k, E, seed, data):
    need_c()
    n = 2 * k + 3
    g = ldpc._graph(k, n, 3, seed)
    rnd = data.draw(st.randoms(use_true_random=False))
    esis = data.draw(st.lists(st.integers(0, n - 1), max_size=2 * n))
    syms = rnd.randbytes(len(esis) * E)
    states = [state(g, n, k, E, k), state(g, n, k, E, k)]
    rets = [fn(k, E, g.eq_ptr, g.eq_vars, g.var_ptr, g.var_eqs, *st_,
               array("I", esis).tobytes(), syms)
            for fn, st_ in ((speedups.m2c_ldpc_add_many, states[0]),
                            (_fast.m2c_ldpc_add_many, states[1]))]
    assert rets[0] == rets[1] and states[0] == states[1]


@settings(max_examples=60, deadline=None)
@given(k=st.integers(2, 40), extra=st.integers(0, 40), E=st.integers(1, 9),
       seed=st.integers(1, 10**6), fill=st.integers(1, 255), data=st.data())
def test_partials_need_no_zeroing(k, extra, E, seed, fill, data):
    """the decoder's partial sums start as garbage (m2c_ldpc_alloc does not zero them):
    every step and the ML elimination give what zeroed partials give, in C and in the twin,
    and each equation's partial is the same once one of its variables is known"""
    need_c()
    n = k + 3 + extra
    g = ldpc._graph(k, n, 3, seed)
    rnd = data.draw(st.randoms(use_true_random=False))
    order = data.draw(st.lists(st.integers(0, n - 1), max_size=n))
    syms = [rnd.randbytes(E) for _ in order]
    runs = []
    for add, elim, garbage in ((speedups.m2c_ldpc_add, speedups.m2c_ldpc_eliminate, False),
                               (speedups.m2c_ldpc_add, speedups.m2c_ldpc_eliminate, True),
                               (_fast.m2c_ldpc_add, _fast.m2c_ldpc_eliminate, True)):
        st_ = state(g, n, k, E, k)
        if garbage:
            st_[1][:] = bytes([fill]) * len(st_[1])
        rets = [add(k, E, g.eq_ptr, g.eq_vars, g.var_ptr, g.var_eqs, *st_, esi, sym)
                for esi, sym in zip(order, syms)]
        touched = [i for i in range(n - k)
                   if st_[0][4 * i:4 * i + 4] != g.degrees[4 * i:4 * i + 4]]
        partials = {i: bytes(st_[1][i * E:(i + 1) * E]) for i in touched}
        ml = elim(k, E, g.eq_ptr, g.eq_vars, st_[0], st_[1], st_[3], True)
        values = b"".join(st_[2][i * E:(i + 1) * E] for i in range(k) if st_[3][i])
        runs.append((rets, bytes(st_[0]), bytes(st_[3]), partials, values, ml))
    assert runs[0] == runs[1] == runs[2]


def test_alloc_c_and_twin():
    need_c()
    for fn in (speedups.m2c_ldpc_alloc, _fast.m2c_ldpc_alloc):
        b = fn(3000)
        assert isinstance(b, bytearray) and len(b) == 3000
        with pytest.raises(ValueError):
            fn(-1)


@settings(max_examples=60, deadline=None)
@given(k=st.integers(2, 40), extra=st.integers(0, 40), E=st.integers(1, 9),
       seed=st.integers(1, 10**6), small=st.booleans(), data=st.data())
def test_peeler_is_ldpc_add_with_the_state_held(k, extra, E, seed, small, data):
    """m2c_ldpc_peeler(state).add(esi, symbol) == m2c_ldpc_add(state, esi, symbol): same
    results and states, C and twin, for n*E and k*E values; bad ESIs and symbol lengths
    raise ValueError in both"""
    need_c()
    n = k + 3 + extra
    g = ldpc._graph(k, n, 3, seed)
    rnd = data.draw(st.randoms(use_true_random=False))
    nv = k if small else n
    ref, c_st, py_st = state(g, n, k, E, nv), state(g, n, k, E, nv), state(g, n, k, E, nv)
    head = (k, E, g.eq_ptr, g.eq_vars, g.var_ptr, g.var_eqs)
    c_peel = speedups.m2c_ldpc_peeler(*head, *c_st, bytearray(n))
    py_peel = _fast.m2c_ldpc_peeler(*head, *py_st, bytearray(n))
    order = data.draw(st.lists(st.integers(-2, n + 1), max_size=2 * n))
    for esi in order:
        sym = rnd.randbytes(E if rnd.random() < 0.9 else E + 1)
        outs = [outcome(fn, esi, sym) for fn in (
            lambda e, s: speedups.m2c_ldpc_add(*head, *ref, e, s), c_peel.add, py_peel.add)]
        assert outs[0] == outs[1] == outs[2]
        assert ref == c_st == py_st


@pytest.mark.parametrize("mod", ["c", "twin"])
def test_peeler_refuses_an_inconsistent_state(mod):
    need_c()
    fn = speedups.m2c_ldpc_peeler if mod == "c" else _fast.m2c_ldpc_peeler
    g = ldpc._graph(10, 20, 3, 1)
    head = (10, 4, g.eq_ptr, g.eq_vars, g.var_ptr, g.var_eqs)
    good = [*state(g, 20, 10, 4, 10), bytearray(20)]
    fn(*head, *good)
    for i, wrong in ((1, bytearray(9 * 4)), (2, bytearray(15 * 4)), (3, bytearray(19)),
                     (4, bytearray(19))):
        st_ = list(good)
        st_[i] = wrong
        with pytest.raises(ValueError):
            fn(*head, *st_)
    with pytest.raises(ValueError):
        fn(10, 0, *head[2:], *good)


@settings(max_examples=60, deadline=None)
@given(k=st.integers(2, 30), E=st.integers(1, 6), seed=st.integers(1, 10**6), data=st.data())
def test_take_is_the_decoders_add(k, E, seed, data):
    """peeler.take(esi, symbol): a duplicate only counts; else the symbol is marked received
    and added unless the block is complete or it is known; C and twin agree with each other
    and with m2c_ldpc_add plus the duplicate check and counters done in Python (symbols
    copied, as bytearrays: nothing held)"""
    need_c()
    n = 2 * k + 3
    g = ldpc._graph(k, n, 3, seed)
    rnd = data.draw(st.randoms(use_true_random=False))
    head = (k, E, g.eq_ptr, g.eq_vars, g.var_ptr, g.var_eqs)
    ref, c_st, py_st = (state(g, n, k, E, k) + [bytearray(n)] for _ in range(3))
    c_peel = speedups.m2c_ldpc_peeler(*head, *c_st)
    py_peel = _fast.m2c_ldpc_peeler(*head, *py_st)
    known_sources = received = dups = 0
    for esi in data.draw(st.lists(st.integers(-1, n), max_size=3 * n)):
        sym = bytearray(rnd.randbytes(E))
        if not 0 <= esi < n:
            want = ("ValueError", None)
        elif ref[4][esi]:
            dups += 1
            want = ("ok", known_sources == k)
        else:
            ref[4][esi] = 1
            received += 1
            if known_sources != k and not ref[3][esi]:
                known_sources += speedups.m2c_ldpc_add(*head, *ref[:4], esi, sym)
            want = ("ok", known_sources == k)
        got = [outcome(p.take, esi, sym) for p in (c_peel, py_peel)]
        assert got[0] == got[1] == want
        assert c_st == py_st
        # take points at a solved equation's partial instead of copying the source out of
        # it (and leaves solved partials as they are): the same unknown counts, known and
        # got bytes, the same partials where an unknown is left, the same source values
        assert c_st[0] == ref[0] and c_st[3:] == ref[3:]
        U = array("I", bytes(ref[0]))
        assert [c_st[1][e * E:(e + 1) * E] for e in range(len(U)) if U[e]] == [
            ref[1][e * E:(e + 1) * E] for e in range(len(U)) if U[e]]
        for p in (c_peel, py_peel):
            assert (p.source_known, p.received, p.duplicates) == (known_sources, received, dups)
            assert [p.source(i) for i in range(k)] == [
                bytes(ref[2][i * E:(i + 1) * E]) if ref[3][i] else None for i in range(k)]
