"""Time one maximum-likelihood elimination of a realistic LDPC-Staircase block.

``python -m m2c.fec.elimbench [--k 2000] [--n1 5] [--size 1424] [--extra 0.02]
[--loss 0.5] [--reps 3] [--profile]``: encode a random block (n = 2k), drop a
random ``loss`` fraction of the n symbols, keep ``k * (1 + extra)`` of the rest
(the rest of the repair symbols arrive too late), feed them to the iterative
decoder and time ``solve(partial=False)`` (structure pass, then values) and
``solve(partial=True)`` on copies of the stalled decoder.  Prints seconds per
elimination; ``DELIVERYKIT_PURE=1`` times the pure-Python twin.  ``--old REV``
also times m2c/fec/ldpc.py as of git revision REV (e.g. 669082b, the last
all-Python elimination) on the same stalled decoder states, side by side.
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import cast

from deliverykit import cliutil
from deliverykit.fastpath import have_c
from m2c.fec import ldpc


def stalled_decoder(k: int, n1: int, size: int, extra: float, loss: float, seed: int
                    ) -> tuple[ldpc.LDPCDecoder, bytes]:
    """A decoder fed ~k*(1+extra) symbols that peeling alone did not finish, and the source."""
    rng = random.Random(seed)
    params = ldpc.LDPCParams(k=k, n=2 * k, symbol_size=size, n1=n1, seed=1 + seed)
    src = rng.randbytes(k * size)
    rep = ldpc.encode(params, src)
    syms = [src[i * size:(i + 1) * size] for i in range(k)] + [
        rep[i * size:(i + 1) * size] for i in range(k)]
    order = [i for i in range(2 * k) if rng.random() >= loss]
    rng.shuffle(order)
    dec = ldpc.LDPCDecoder(params)
    for esi in order[: int(k * (1 + extra))]:
        if dec.add(esi, syms[esi]):
            break
    return dec, src


def old_decoder_class(rev: str) -> type:
    """LDPCDecoder from m2c/fec/ldpc.py at git revision ``rev`` (run inside the repo)."""
    root = Path(__file__).resolve().parents[2]
    text = subprocess.run(["git", "-C", str(root), "show", f"{rev}:m2c/fec/ldpc.py"],
                          check=True, capture_output=True, text=True).stdout
    path = Path(tempfile.mkdtemp(prefix="elimbench-")) / "ldpc_old.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location("ldpc_old", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["ldpc_old"] = mod
    spec.loader.exec_module(mod)
    return cast(type, mod.LDPCDecoder)


def as_old(dec: ldpc.LDPCDecoder, cls: type) -> ldpc.LDPCDecoder:
    """The same stalled state in an old-revision decoder (same state layout)."""
    old: ldpc.LDPCDecoder = cls(dec.params)
    for a in ("_unknown", "_partial", "_values", "_known", "_got"):
        setattr(old, a, bytearray(getattr(dec, a)))
    E = dec.params.symbol_size
    for i, b in dec.known_source().items():  # sources the decoder holds are not in _values
        old._values[i * E:(i + 1) * E] = b
    # old revisions (the all-Python elimination) keep these counters as plain attributes
    old.__dict__.update(source_known=dec.source_known, received=dec.received)
    return old


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k", type=cliutil.positive_int, default=2000,
                    help="source symbols of the block (default %(default)s; n = 2k)")
    ap.add_argument("--n1", type=cliutil.int_in(3, 10, "N1"), default=5,
                    help="RFC 5170 N1, ones per column of H1 (default %(default)s)")
    ap.add_argument("--size", type=cliutil.positive_int, default=1424,
                    help="symbol size, bytes (default %(default)s)")
    ap.add_argument("--extra", type=cliutil.nonnegative_float, default=0.02,
                    help="symbols kept beyond k, as a fraction of k (default %(default)s)")
    ap.add_argument("--loss", type=cliutil.nonnegative_float, default=0.5,
                    help="fraction of the n symbols lost first (default %(default)s)")
    ap.add_argument("--reps", type=cliutil.positive_int, default=3,
                    help="blocks timed (default %(default)s)")
    ap.add_argument("--profile", action="store_true",
                    help="also print a cProfile of one elimination")
    ap.add_argument("--old", metavar="REV", help="also time m2c/fec/ldpc.py at git REV")
    a = ap.parse_args(argv)
    print(f"C fast paths: {have_c()}")
    old_cls = old_decoder_class(a.old) if a.old else None
    for rep in range(a.reps):
        dec0, src = stalled_decoder(a.k, a.n1, a.size, a.extra, a.loss, rep)
        if dec0.complete:
            print(f"rep {rep}: peeling alone finished; skipped")
            continue
        for label, dec in (("now", dec0), (a.old, as_old(dec0, old_cls) if old_cls else None)):
            if dec is not None:
                run_one(a, rep, label, dec, src)
    return 0


def run_one(a: argparse.Namespace, rep: int, label: str, dec: ldpc.LDPCDecoder, src: bytes
            ) -> None:
    """Time solve(partial=False) and solve(partial=True) on copies of ``dec``."""
    left = a.k - dec.source_known
    times = {}
    for partial in (False, True):
        d = copy.deepcopy(dec)
        if a.profile and partial:
            import cProfile
            import pstats
            pr = cProfile.Profile()
            pr.enable()
            d.solve(partial=True)
            pr.disable()
            pstats.Stats(pr).sort_stats("tottime").print_stats(12)
            d = copy.deepcopy(dec)
        t0 = time.perf_counter()
        ok = d.solve(partial=partial)
        times[partial] = time.perf_counter() - t0
        if ok and d.source_block() != src:
            raise SystemExit("decoded block differs from the source")
    print(f"rep {rep} [{label}]: k={a.k} N1={a.n1} E={a.size} received={dec.received} "
          f"sources left after peeling={left} decoded={ok} deficit={d.ml_deficit} "
          f"solve(partial=False)={times[False]:.4f}s solve(partial=True)={times[True]:.4f}s")


if __name__ == "__main__":
    raise SystemExit(main())
