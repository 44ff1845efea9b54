"""FEC conformance cases: an external encoder/decoder against RFC 5170 and zfec.

The reference is computed in-process by our codecs (m2c.fec.ldpc, m2c.fec.rs)
and by zfec itself, plus the stored vectors in tests/vectors/fec (see
:mod:`m2c.conformance.vectors`). The implementation is driven only through
the stdin/stdout contract in :mod:`m2c.conformance`.
"""

from __future__ import annotations

import random

import pytest
import zfec  # type: ignore[import-untyped]  # zfec ships neither stubs nor py.typed

from m2c.conformance import records
from m2c.conformance.vectors import LDPC_SETS, RS_SETS, ldpc_name, load_all, rs_name, source_block
from m2c.fec import ldpc, rs

LDPC_ENC = "RFC 5170 sec. 5.7, 6.2, 6.3"
LDPC_DEC = "RFC 5170 sec. 6.4, App. A"
RS_SEC = "RFC 5510 sec. 8 (zfec generator)"
NO_CORPUS = (
    "no FEC vector corpus found: pass --conformance-vectors DIR (or set DELIVERYKIT_VECTORS)"
)

_VECTORS = load_all()


def _symbols(src: bytes, rep: bytes, e: int) -> list[bytes]:
    data = src + rep
    return [data[i:i + e] for i in range(0, len(data), e)]


def _decode(impl, code: str, nums: list[int], pairs, rng: random.Random, dup: bool = True):
    pairs = list(pairs)
    if dup and pairs:
        pairs += rng.sample(pairs, min(3, len(pairs)))  # duplicates are allowed by the contract
    rng.shuffle(pairs)
    return impl.run("decode", code, *nums, input=records(pairs), timeout=60)


# --- LDPC-Staircase encoding -------------------------------------------------------------

@pytest.mark.conformance(protocol="fec", section=LDPC_ENC, role="encoder")
@pytest.mark.parametrize("k,n,n1,seed,e", LDPC_SETS, ids=[ldpc_name(*s) for s in LDPC_SETS])
def test_ldpc_repair_symbols_bit_identical(impl, k, n, n1, seed, e):
    """Repair symbols for (k, n, N1, seed, E) equal ours bit for bit (matrix, PRNG, staircase)."""
    src = random.Random(f"enc-{k}-{n}-{seed}").randbytes(k * e)
    want = ldpc.encode(ldpc.LDPCParams(k=k, n=n, symbol_size=e, n1=n1, seed=seed), src)
    cp = impl.run("encode", "ldpc", k, n, n1, seed, e, input=src)
    assert cp.returncode == 0, cp.stderr.decode(errors="replace")
    assert len(cp.stdout) == len(want), f"expected {(n - k)} repair symbols of {e} bytes"
    got = _symbols(b"", cp.stdout, e)
    expected = _symbols(b"", want, e)
    bad = [k + i for i, (a, b) in enumerate(zip(got, expected, strict=True)) if a != b]
    assert not bad, f"repair symbols differ at ESI {bad[:10]}"


@pytest.mark.conformance(protocol="fec", section=LDPC_ENC, role="encoder")
@pytest.mark.parametrize("name", [n for n, v in _VECTORS if v["code"] == "ldpc"] or ["none"])
def test_ldpc_stored_vectors(impl, name):
    """The stored LDPC-Staircase vectors (tests/vectors/fec/*.vec) are reproduced."""
    vecs = dict(_VECTORS)
    if name not in vecs:
        pytest.skip(NO_CORPUS)
    v = vecs[name]
    cp = impl.run("encode", "ldpc", v["k"], v["n"], v["n1"], v["seed"], v["E"], input=v["source"])
    assert cp.returncode == 0, cp.stderr.decode(errors="replace")
    assert cp.stdout.hex() == v["repair"].hex()


# --- LDPC-Staircase decoding -------------------------------------------------------------

DEC_SETS = [(32, 48, 3, 5, 8), (100, 150, 3, 2026, 4), (40, 80, 7, 99, 2)]


@pytest.mark.conformance(protocol="fec", section=LDPC_DEC, role="decoder")
@pytest.mark.parametrize("k,n,n1,seed,e", DEC_SETS, ids=[ldpc_name(*s) for s in DEC_SETS])
def test_ldpc_decode_random_erasures(impl, record_property, k, n, n1, seed, e):
    """Random subsets of encoding symbols (shuffled, with duplicates).

    Where our iterative (peeling) decoder succeeds, every RFC 5170 decoder must
    (peeling ends in the same state whatever the order). Where only maximum
    likelihood succeeds, an iterative-only decoder may give up (noted as a
    property, not a failure). Where the symbols do not determine the block,
    the implementation must exit 1. Output, when given, must be exact.
    """
    p = ldpc.LDPCParams(k=k, n=n, symbol_size=e, n1=n1, seed=seed)
    rng = random.Random(f"dec-{k}-{n}-{seed}")
    src = rng.randbytes(k * e)
    syms = _symbols(src, ldpc.encode(p, src), e)
    ml_only_gave_up = 0
    outcomes = {"peel": 0, "ml": 0, "none": 0}
    for trial in range(8):
        quarter = k + (n - k) // 4
        size = rng.randint(quarter, n) if trial % 2 == 0 else rng.randint(k, quarter)
        esis = rng.sample(range(n), size)
        kind, gave_up = _check_subset(impl, p, src, syms, esis, rng)
        outcomes[kind] += 1
        ml_only_gave_up += gave_up
    record_property("subsets", str(outcomes))
    record_property("ml_only_subsets_given_up", ml_only_gave_up)


def _check_subset(
    impl, p, src: bytes, syms: list[bytes], esis: list[int], rng: random.Random
) -> tuple[str, int]:
    """Decode the symbols ``esis`` with the implementation and judge it against what the
    symbols determine: (kind of subset: peel / ml / none, 1 if an ML-only subset was given up)."""
    pairs = [(i, syms[i]) for i in esis]
    peel = ldpc.decode(p, pairs, ml=False) is not None
    ml = peel or ldpc.decode(p, pairs, ml=True) is not None
    kind = "peel" if peel else "ml" if ml else "none"
    cp = _decode(impl, "ldpc", [p.k, p.n, p.n1, p.seed, p.symbol_size], pairs, rng)
    assert cp.returncode in (0, 1), f"exit {cp.returncode}: {cp.stderr.decode(errors='replace')}"
    if cp.returncode == 0:
        assert cp.stdout == src, f"wrong source block from {len(esis)} symbols ({kind})"
        return kind, 0
    assert cp.stdout == b"", "exit 1 but wrote data"
    if kind == "peel":
        pytest.fail(
            f"gave up on {len(esis)} symbols that iterative decoding (RFC 5170 App. A) solves"
        )
    return kind, int(kind == "ml")


@pytest.mark.conformance(protocol="fec", section=LDPC_DEC, role="decoder")
def test_ldpc_too_few_symbols_fails_cleanly(impl):
    """k-1 symbols, and a k-symbol set whose equations are rank deficient: exit 1, no data."""
    k, n, n1, seed, e = 20, 40, 3, 77, 4
    p = ldpc.LDPCParams(k=k, n=n, symbol_size=e, n1=n1, seed=seed)
    rng = random.Random("too-few")
    src = rng.randbytes(k * e)
    syms = _symbols(src, ldpc.encode(p, src), e)
    few = [(i, syms[i]) for i in rng.sample(range(n), k - 1)]
    deficient = None
    for _ in range(200):
        cand = [(i, syms[i]) for i in rng.sample(range(n), k)]
        if ldpc.decode(p, cand, ml=True) is None:
            deficient = cand
            break
    assert deficient is not None
    for pairs in (few, deficient, []):
        cp = _decode(impl, "ldpc", [k, n, n1, seed, e], pairs, rng, dup=False)
        assert cp.returncode == 1, (
            f"{len(pairs)} symbols: exit {cp.returncode}, want 1 (undecodable)"
        )
        assert cp.stdout == b""


@pytest.mark.conformance(protocol="fec", section=LDPC_DEC, role="decoder")
def test_ldpc_decode_source_only_and_repair_heavy(impl):
    """All source symbols alone; and every repair symbol plus the fewest sources peeling needs."""
    k, n, n1, seed, e = 16, 32, 3, 1, 16
    p = ldpc.LDPCParams(k=k, n=n, symbol_size=e, n1=n1, seed=seed)
    src = source_block(ldpc_name(k, n, n1, seed, e), k * e)
    syms = _symbols(src, ldpc.encode(p, src), e)
    rng = random.Random("heavy")
    cp = _decode(impl, "ldpc", [k, n, n1, seed, e], [(i, syms[i]) for i in range(k)], rng)
    assert cp.returncode == 0 and cp.stdout == src
    pairs = [(i, syms[i]) for i in range(k, n)]
    for i in range(k):
        if ldpc.decode(p, pairs, ml=False) is not None:
            break
        pairs.append((i, syms[i]))
    cp = _decode(impl, "ldpc", [k, n, n1, seed, e], pairs, rng)
    assert cp.returncode == 0, cp.stderr.decode(errors="replace")
    assert cp.stdout == src


# --- G > 1 symbols per packet, larger blocks -----------------------------------------------

G_SETS = [(32, 48, 3, 5, 2), (64, 96, 3, 2026, 4), (64, 96, 3, 2026, 8), (200, 300, 5, 424242, 4)]
G_SEC = "RFC 5170 sec. 5.6, 5.7"


@pytest.mark.conformance(protocol="fec", section=G_SEC, role="encoder")
@pytest.mark.parametrize(
    "k,n,n1,seed,g", G_SETS, ids=[f"k{k}-n{n}-N1_{n1}-seed{s}-G{g}" for k, n, n1, s, g in G_SETS]
)
def test_ldpc_symbol_groups_match_ours(impl, k, n, n1, seed, g):
    """With G symbols per packet, the symbols of each packet (the txseqToID / IDtoTxseq
    tables, their PRNG continuing after the matrix) equal ours: a receiver must know which
    ESIs a packet's payload holds. Optional command (``groups``): exit 127 makes it unsupported."""
    from m2c.conformance.adapter import groups

    cp = impl.run("groups", "ldpc", k, n, n1, seed, g)
    assert cp.returncode == 0, cp.stderr.decode(errors="replace")
    lines = [line for line in cp.stdout.decode().splitlines() if line.strip()]
    got = [[int(x) for x in line.split()] for line in lines]
    want = groups(k, n, n1, seed, g)
    assert len(got) == len(want), f"{len(got)} packets, want {n // g}"
    bad = [i for i, (a, b) in enumerate(zip(got, want, strict=True)) if a != b]
    assert not bad, f"packets differ from #{bad[0]}: {got[bad[0]]} != {want[bad[0]]}"


@pytest.mark.conformance(protocol="fec", section="RFC 5170 sec. 5.6, 6.4, App. A", role="decoder")
@pytest.mark.parametrize("g", [4, 8])
def test_ldpc_decode_lost_packets_of_g_symbols(impl, record_property, g):
    """Packets of G symbols (source packets of consecutive ESIs, repair packets in the
    sec. 5.6 order) are lost whole, 10-35 % of them: the surviving symbols, shuffled, must
    decode wherever iterative decoding can, never when they do not determine the block,
    exactly when they do."""
    from m2c.conformance.adapter import groups

    k, n, n1, seed, e = 256, 384, 3, 777, 8
    p = ldpc.LDPCParams(k=k, n=n, symbol_size=e, n1=n1, seed=seed)
    rng = random.Random(f"groups-{g}")
    src = rng.randbytes(k * e)
    syms = _symbols(src, ldpc.encode(p, src), e)
    packets = groups(k, n, n1, seed, g)
    outcomes = {"peel": 0, "ml": 0, "none": 0}
    for loss in (0.10, 0.20, 0.30, 0.35):
        kept = rng.sample(packets, round(len(packets) * (1 - loss)))
        kind, _ = _check_subset(impl, p, src, syms, [i for pkt in kept for i in pkt], rng)
        outcomes[kind] += 1
    record_property("subsets", str(outcomes))


@pytest.mark.conformance(protocol="fec", section=LDPC_DEC, role="decoder")
def test_ldpc_decode_arbitrary_subsets_at_large_k(impl, record_property):
    """k = 5000, n = 7500: random subsets from k+5 % up, and a subset missing a run of 1000
    consecutive ESIs (a burst), judged as in the random erasure case."""
    k, n, n1, seed, e = 5000, 7500, 3, 31337, 4
    p = ldpc.LDPCParams(k=k, n=n, symbol_size=e, n1=n1, seed=seed)
    rng = random.Random("large-k")
    src = rng.randbytes(k * e)
    syms = _symbols(src, ldpc.encode(p, src), e)
    outcomes = {"peel": 0, "ml": 0, "none": 0}
    subsets = [rng.sample(range(n), round(k * f)) for f in (1.05, 1.15, 1.3)]
    burst = rng.randrange(0, n - 1000)
    subsets.append([i for i in range(n) if not burst <= i < burst + 1000])
    for esis in subsets:
        kind, _ = _check_subset(impl, p, src, syms, esis, rng)
        outcomes[kind] += 1
    record_property("subsets", str(outcomes))


# --- Reed-Solomon (zfec-compatible) ----------------------------------------------------

@pytest.mark.conformance(protocol="fec", section=RS_SEC, role="encoder")
@pytest.mark.parametrize("k,n,e", RS_SETS, ids=[rs_name(*s) for s in RS_SETS])
def test_rs_repair_matches_zfec(impl, k, n, e):
    """Repair symbols equal zfec's own encoder (checked directly, not through our wrapper)."""
    src = random.Random(f"rs-{k}-{n}").randbytes(k * e)
    blocks = [src[i * e:(i + 1) * e] for i in range(k)]
    want = b"".join(zfec.Encoder(k, n).encode(blocks, list(range(k, n)))) if n > k else b""
    cp = impl.run("encode", "rs", k, n, e, input=src)
    assert cp.returncode == 0, cp.stderr.decode(errors="replace")
    assert cp.stdout == want


@pytest.mark.conformance(protocol="fec", section=RS_SEC, role="encoder")
@pytest.mark.parametrize("name", [n for n, v in _VECTORS if v["code"] == "rs"] or ["none"])
def test_rs_stored_vectors(impl, name):
    vecs = dict(_VECTORS)
    if name not in vecs:
        pytest.skip(NO_CORPUS)
    v = vecs[name]
    cp = impl.run("encode", "rs", v["k"], v["n"], v["E"], input=v["source"])
    assert cp.returncode == 0, cp.stderr.decode(errors="replace")
    assert cp.stdout.hex() == v["repair"].hex()


@pytest.mark.conformance(protocol="fec", section=RS_SEC, role="decoder")
@pytest.mark.parametrize("k,n,e", [(4, 8, 4), (10, 14, 8), (200, 256, 2)])
def test_rs_any_k_symbols_decode(impl, k, n, e):
    """Any k distinct symbols give the block (MDS); k-1 exit 1 with no data."""
    rng = random.Random(f"rsdec-{k}-{n}")
    src = rng.randbytes(k * e)
    syms = _symbols(src, rs.encode(rs.RSParams(k, n, e), src), e)
    subsets = [rng.sample(range(n), k) for _ in range(3)] + [list(range(n - k, n))[:k]]
    for esis in subsets:
        cp = _decode(impl, "rs", [k, n, e], [(i, syms[i]) for i in esis], rng)
        assert cp.returncode == 0, cp.stderr.decode(errors="replace")
        assert cp.stdout == src, f"wrong block from ESIs {sorted(esis)[:8]}..."
    too_few = [(i, syms[i]) for i in rng.sample(range(n), k - 1)]
    cp = _decode(impl, "rs", [k, n, e], too_few, rng, dup=False)
    assert cp.returncode == 1 and cp.stdout == b""
