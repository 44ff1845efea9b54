"""LDPC decoding without per-symbol copies or per-symbol Python (issue 17): a source symbol
given as ``bytes`` is held by the decoder instead of copied into its block, any other
buffer is copied (its owner may reuse it); ``add_many`` (an iterable of pairs) and
``add_at`` (ESIs and offsets into one buffer) take a batch in one C call.  The C peeler
and its twin in m2c/_fast.py give the same results, errors, state and decoded bytes."""

from __future__ import annotations

import random
import sys
from array import array

import pytest
from hypothesis import given, settings, strategies as st

from deliverykit.fastpath import speedups
from deliverykit.testing import require_data
from m2c import _fast
from m2c.fec import ldpc
from m2c.fec.errors import FECError


def need_c() -> None:
    """Skip (fail under CI=true) without the C extension's peeler."""
    require_data(speedups is not None and hasattr(speedups, "m2c_ldpc_peeler"),
                 "deliverykit._speedups with m2c_ldpc_peeler (setup.py build_ext --inplace)")


def block(k: int, n: int, E: int, seed: int) -> tuple[ldpc.LDPCParams, bytes, list[bytes]]:
    p = ldpc.LDPCParams(k, n, E, n1=3, seed=seed)
    src = random.Random(seed).randbytes(k * E)
    rep = ldpc.encode(p, src)
    return p, src, [src[i * E:(i + 1) * E] for i in range(k)] + [
        rep[i * E:(i + 1) * E] for i in range(p.m)]


def test_a_bytes_source_symbol_is_held_not_copied():
    """the decoder keeps a reference to a bytes source symbol (one more refcount while the
    decoder lives, none after) and still returns the right block"""
    p, src, syms = block(50, 75, 16, 3)
    sym = bytes(syms[7])  # a fresh object: only this test refers to it
    before = sys.getrefcount(sym)
    dec = ldpc.LDPCDecoder(p)
    dec.add(7, sym)
    assert sys.getrefcount(sym) == before + 1
    order = list(range(p.n))
    random.Random(1).shuffle(order)
    done = dec.add_many((e, syms[e]) for e in order) or dec.solve()
    assert done and dec.source_block() == src and dec.known_source()[7] == sym
    del dec
    assert sys.getrefcount(sym) == before


@pytest.mark.parametrize("kind", [bytearray, memoryview])
def test_a_mutable_symbol_is_copied_so_its_owner_may_reuse_it(kind):
    """a receive buffer reused by its owner after add() does not change the decoded block"""
    p, src, syms = block(40, 60, 8, 5)
    order = list(range(p.n))
    random.Random(2).shuffle(order)
    dec = ldpc.LDPCDecoder(p)
    buf = bytearray(p.symbol_size)
    for e in order:
        buf[:] = syms[e]
        done = dec.add(e, kind(buf))
        buf[:] = b"\xff" * len(buf)  # the owner reuses its buffer
        if done:
            break
    assert (dec.complete or dec.solve()) and dec.source_block() == src


def test_add_many_and_add_at_decode_like_add():
    p, src, syms = block(300, 450, 16, 8)
    order = list(range(p.n))
    random.Random(8).shuffle(order)
    one = ldpc.LDPCDecoder(p)
    for e in order:
        if one.add(e, syms[e]):
            break
    many, at = ldpc.LDPCDecoder(p), ldpc.LDPCDecoder(p)
    for i in range(0, len(order), 37):
        chunk = order[i:i + 37] + order[i:i + 1]  # a duplicate inside the batch
        many.add_many([(e, syms[e]) for e in chunk])
        buf = b"".join(b"HDR" + syms[e] for e in chunk)  # datagrams: a header, the symbol
        offs = array("I", (j * (3 + p.symbol_size) + 3 for j in range(len(chunk))))
        at.add_at(array("I", chunk), offs, buf)
        if many.complete:
            break
    assert one.complete and many.complete and at.complete
    assert one.source_block() == many.source_block() == at.source_block() == src
    assert many.duplicates >= 1 and many.received == at.received
    assert (many.duplicates, many.source_known) == (at.duplicates, at.source_known)


def test_add_many_takes_datagrams_with_the_symbols_offset():
    """(esi, datagram, offset) items: the symbol is read in place, E bytes from the offset
    (a longer datagram is fine), the datagram held when it is bytes"""
    p, src, syms = block(60, 90, 8, 6)
    order = list(range(p.n))
    random.Random(6).shuffle(order)
    dgrams = {e: b"LCT-HEADER" + syms[e] + b"tail" for e in order}
    probe = dgrams[next(e for e in order if e < p.k)]
    before = sys.getrefcount(probe)
    dec = ldpc.LDPCDecoder(p)
    assert dec.add_many([(e, dgrams[e], 10) for e in order]) or dec.solve()
    assert dec.source_block() == src
    assert sys.getrefcount(probe) == before + 1


def test_batch_errors_are_fec_errors_and_keep_what_came_before():
    p, _src, syms = block(20, 30, 8, 1)
    for call in (lambda d: d.add_many([(0, syms[0]), (30, syms[1])]),
                 lambda d: d.add_many([(0, syms[0]), (1, syms[1][:7])]),
                 lambda d: d.add_at(array("I", [0, 1]), array("I", [0, 8]), syms[0] + b"x")):
        dec = ldpc.LDPCDecoder(p)
        with pytest.raises(FECError):
            call(dec)
        assert dec.received == 1 and dec.has(0)
    with pytest.raises(TypeError):
        ldpc.LDPCDecoder(p).add_many([(0, syms[0], 1, 2)])


def run(peel, ops):
    """Apply ops to a peeler; each op's outcome (result or exception class and message)."""
    out = []
    for op, args in ops:
        try:
            out.append(("ok", getattr(peel, op)(*args)))
        except (ValueError, TypeError, IndexError) as exc:
            out.append((type(exc).__name__, str(exc)))
    return out


@settings(max_examples=80, deadline=None)
@given(k=st.integers(2, 30), extra=st.integers(0, 30), E=st.integers(1, 7),
       seed=st.integers(1, 10**6), data=st.data())
def test_take_take_many_take_at_c_equal_twin(k, extra, E, seed, data):
    """C and twin: same results and FECError messages for take, take_many and take_at on
    bytes (held), bytearray and memoryview symbols, bad ESIs and lengths, duplicates; then
    the same state (unknown, partial, values, known, got), counters, sources and block"""
    need_c()
    n = k + 3 + extra
    g = ldpc._graph(k, n, 3, seed)
    rnd = data.draw(st.randoms(use_true_random=False))
    head = (k, E, g.eq_ptr, g.eq_vars, g.var_ptr, g.var_eqs)

    def sym() -> bytes | bytearray | memoryview:
        b = rnd.randbytes(E if rnd.random() < 0.93 else E + 1)
        return rnd.choice([bytes, bytearray, memoryview])(b)

    esi = st.integers(-1, n)
    ops: list[tuple[str, tuple]] = []
    for kind in data.draw(st.lists(st.sampled_from(["take", "many", "at"]), max_size=2 * n)):
        if kind == "take":
            ops.append(("take", (data.draw(esi), sym())))
        elif kind == "many":
            items: list[tuple] = []
            for _ in range(data.draw(st.integers(0, 5))):
                if rnd.random() < 0.5:
                    items.append((data.draw(esi), sym()))
                else:  # (esi, datagram, offset): the symbol E bytes from the offset
                    dgram = rnd.randbytes(rnd.randrange(E + 6))
                    items.append((data.draw(esi), rnd.choice([bytes, bytearray])(dgram),
                                  rnd.randrange(-1, len(dgram) + 2)))
            ops.append(("take_many", (items,)))
        else:
            es = data.draw(st.lists(st.integers(0, n), max_size=5))
            buf = rnd.randbytes(len(es) * (E + 2) + rnd.randrange(3))
            offs = [rnd.randrange(len(buf) + 2) if rnd.random() < 0.1 else i * (E + 2) + 1
                    for i in range(len(es))]
            ops.append(("take_at", (array("I", es), array("I", offs),
                                    rnd.choice([bytes, bytearray])(buf))))
    states = [[bytearray(g.degrees), bytearray((n - k) * E), bytearray(k * E), bytearray(n),
               bytearray(n)] for _ in range(2)]
    peels = [mod.m2c_ldpc_peeler(*head, *s, FECError) for mod, s in
             ((speedups, states[0]), (_fast, states[1]))]
    assert run(peels[0], ops) == run(peels[1], ops)
    assert states[0] == states[1]
    c, py = peels
    assert (c.received, c.duplicates, c.source_known) == (
        py.received, py.duplicates, py.source_known)
    assert [c.source(i) for i in range(k)] == [py.source(i) for i in range(k)]
    assert c.source_block()[:0] == b"" and (
        c.source_known < k or c.source_block() == py.source_block())


@pytest.mark.parametrize("mod", ["c", "twin"])
def test_peeler_refuses_a_non_exception_error(mod):
    if mod == "c":
        need_c()
    fn = speedups.m2c_ldpc_peeler if mod == "c" else _fast.m2c_ldpc_peeler
    g = ldpc._graph(10, 20, 3, 1)
    st_ = [bytearray(g.degrees), bytearray(40), bytearray(40), bytearray(20), bytearray(20)]
    with pytest.raises(TypeError):
        fn(10, 4, g.eq_ptr, g.eq_vars, g.var_ptr, g.var_eqs, *st_, int)


def test_a_deep_copy_decodes_on_its_own():
    """copy.deepcopy of a half-fed decoder (m2c.fec.elimbench times copies): the copy has its
    own buffers, the held sources and the counters; both finish to the source"""
    import copy

    p, src, syms = block(200, 300, 8, 4)
    order = list(range(p.n))
    random.Random(4).shuffle(order)
    dec = ldpc.LDPCDecoder(p)
    dec.add_many([(e, syms[e]) for e in order[:120]] + [(order[0], syms[order[0]])])
    twin = copy.deepcopy(dec)
    assert (twin.received, twin.duplicates, twin.source_known) == (
        dec.received, dec.duplicates, dec.source_known)
    assert twin.known_source() == dec.known_source()
    for d in (twin, dec):
        assert d.add_many((e, syms[e]) for e in order[120:]) or d.solve()
        assert d.source_block() == src
