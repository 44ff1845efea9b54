"""Symbols an LDPC-Staircase block needs, iterative-only against ML decoding.

``python -m m2c.fec.overhead [--k 2801] [--n1 3 5] [--blocks 5]``: per N1 and
decoding mode (:class:`m2c.fec.ldpc.Decoding`), encode ``--blocks`` random
blocks (n = 2k, 8-byte symbols: the count does not depend on the size), feed
the n symbols in a random order and count those received when the block
decodes; an ML decoder tries an elimination every 5 symbols past k, as a
receiver does.  Prints the mean extra symbols in percent of k (``sym``).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys

from deliverykit import cliutil
from m2c.fec.ldpc import Decoding, LDPCDecoder, LDPCParams, encode


def needed(k: int, n1: int, seed: int, mode: Decoding, every: int = 5) -> int:
    """Symbols received (random order, seeded) when the block decodes."""
    p = LDPCParams(k, 2 * k, 8, n1=n1, seed=seed)
    rng = random.Random(seed)
    src = rng.randbytes(k * 8)
    rep = encode(p, src)
    syms = [src[i * 8:(i + 1) * 8] for i in range(k)] + [
        rep[i * 8:(i + 1) * 8] for i in range(p.n - k)]
    order = list(range(p.n))
    rng.shuffle(order)
    dec = LDPCDecoder(p, mode)
    for c, esi in enumerate(order, 1):
        if dec.add(esi, syms[esi]) or (c >= k and (c - k) % every == 0 and dec.solve()):
            return c
    raise RuntimeError(f"block k={k} N1={n1} seed={seed} did not decode from all n symbols")


@cliutil.cli_main("python -m m2c.fec.overhead")
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m m2c.fec.overhead",
                                 description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--k", type=cliutil.positive_int, default=2801,
                    help="source symbols (default 2801: 4 MB in 1,428-byte symbols)")
    ap.add_argument("--n1", type=cliutil.int_in(3, 10, "N1"), nargs="+", default=[3, 5])
    ap.add_argument("--blocks", type=cliutil.positive_int, default=5)
    a = ap.parse_args(argv)
    for n1 in a.n1:
        for mode in Decoding:
            extra = [needed(a.k, n1, seed, mode) / a.k - 1 for seed in range(1, a.blocks + 1)]
            print(f"N1={n1} {mode.value:9s} sym {100 * statistics.mean(extra):6.2f} % "
                  f"(min {100 * min(extra):.2f}, max {100 * max(extra):.2f}; {a.blocks} blocks, "
                  f"k={a.k}, n=2k)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
