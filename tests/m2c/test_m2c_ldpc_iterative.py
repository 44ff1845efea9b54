"""Iterative-only LDPC decoding (issue 18): the M2C paper's receivers decoded
LDPC-Triangle iteratively, so its `sym` (6-8 %) is an iterative decoder's; ours
fall back to Gaussian elimination unless told otherwise."""

from __future__ import annotations

import random

import pytest

from m2c.fec.ldpc import Decoding, LDPCDecoder, LDPCParams, decoding, encode


def _symbols(p: LDPCParams, src: bytes) -> list[bytes]:
    E = p.symbol_size
    rep = encode(p, src)
    return [src[i * E:(i + 1) * E] for i in range(p.k)] + [
        rep[i * E:(i + 1) * E] for i in range(p.n - p.k)]


def _stalled(mode: Decoding | None) -> tuple[LDPCDecoder, int]:
    """A decoder fed random symbols until elimination would finish it but peeling has
    not: returns it and the symbols fed."""
    p = LDPCParams(400, 800, 8, n1=3, seed=7)
    rng = random.Random(3)
    syms = _symbols(p, rng.randbytes(p.k * p.symbol_size))
    order = list(range(p.n))
    rng.shuffle(order)
    for c in range(p.k, p.n):
        probe = LDPCDecoder(p, Decoding.ML)
        for esi in order[:c]:
            probe.add(esi, syms[esi])
        if not probe.complete and probe.solve():
            dec = LDPCDecoder(p, mode)
            for esi in order[:c]:
                dec.add(esi, syms[esi])
            return dec, c
    raise AssertionError("no prefix that only elimination decodes")


def test_iterative_only_decoder_never_eliminates() -> None:
    dec, _c = _stalled(Decoding.ITERATIVE)
    assert dec.mode is Decoding.ITERATIVE
    known = dec.source_known
    assert not dec.solve() and not dec.solve(partial=False)
    assert dec.source_known == known and not dec.complete
    assert dec.ml_deficit == 1  # a caller waits for one more symbol, then asks again


def test_the_default_decoder_eliminates_where_peeling_stalls() -> None:
    dec, _c = _stalled(None)
    assert dec.mode is Decoding.ML
    assert dec.solve() and dec.complete


def test_decoding_context_sets_the_mode_of_decoders_created_inside() -> None:
    p = LDPCParams(50, 100, 8)
    with decoding("iterative") as mode:
        assert mode is Decoding.ITERATIVE
        assert LDPCDecoder(p).mode is Decoding.ITERATIVE
        assert LDPCDecoder(p, Decoding.ML).mode is Decoding.ML
    assert LDPCDecoder(p).mode is Decoding.ML
    with pytest.raises(ValueError):
        with decoding("gauss"):
            pass


def test_iterative_only_needs_more_symbols_on_average() -> None:
    """Same blocks and orders: the symbols each mode needs (k = 1,000, N1 = 3)."""
    k, need = 1000, {Decoding.ML: [], Decoding.ITERATIVE: []}
    for seed in range(1, 4):
        p = LDPCParams(k, 2 * k, 4, n1=3, seed=seed)
        rng = random.Random(seed)
        syms = _symbols(p, rng.randbytes(k * 4))
        order = list(range(p.n))
        rng.shuffle(order)
        for mode, got in need.items():
            dec = LDPCDecoder(p, mode)
            for c, esi in enumerate(order, 1):
                # the receiver's pattern: an elimination attempt every 10 symbols past k
                if dec.add(esi, syms[esi]) or (c >= k and c % 10 == 0 and dec.solve()):
                    got.append(c)
                    break
    it = sum(need[Decoding.ITERATIVE]) / 3 / k
    ml = sum(need[Decoding.ML]) / 3 / k
    assert ml < it and 1.05 < it < 1.25


def test_overhead_tool_prints_both_modes(capsys) -> None:
    from m2c.fec import overhead

    assert overhead.main(["--k", "300", "--n1", "3", "--blocks", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [x.split()[1] for x in out] == ["ml", "iterative"]
    ml, it = (float(x.split()[3]) for x in out)
    assert 0 <= ml < it
