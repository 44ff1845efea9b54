"""Offline carousel simulation: where a receiver's extra symbols come from.

Paper sections 6.1-6.2 and 7.2's ``dup`` and ``sym``, without a network.

The real sender core (:class:`m2c.core.filetx.FileSender`: FEC, application
scheduler, sequencer) produces the PDUs of a session shaped like the
heterogeneous experiment (4 MiB, 256 kb/s .. 8 Mb/s, TSD 2 s, K = 2); a model
receiver holds, at each packet's due time, every level whose cumulative rate
is within its rate (a constant or a sawtooth between R and 2R) and loses each
packet independently with probability ``loss``; the real
:class:`~m2c.core.filetx.FileReceiver` decodes.  Each run splits the symbols
received beyond k + eps into *repeats* (an encoding symbol received twice)
and *done-block* symbols (of a block already decoded), for a choice of the
sender's ``first_level`` (symbols per first level, so buffer_time =
first_level / min_rate).

The symbol size is 64 bytes (the count of symbols per block is that of the
1424-byte experiment), so a run takes seconds, not minutes.

    .venv/bin/python -m m2c.experiments.dupsim [--quick] [--first-level 1 4] [--seeds 4]
    .venv/bin/python -m m2c.experiments.dupsim --offsets-model
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
from collections.abc import Callable

from deliverykit import cliutil
from deliverykit.outputs import replace_when_done
from m2c.aio.driver import make_session
from m2c.core.filetx import FileReceiver, FileSender

PKT = 1500  # bytes per packet at the link, as in m2c.experiments.hetero
SYMBOLS = 2946  # source symbols of a 4 MiB file in 1424-byte symbols
SCENARIOS: dict[str, tuple[str, float, float]] = {
    # name: (shape, rate in packets/s, loss)
    "1Mb/s-like, 10 % loss": ("const", 90.0, 0.10),
    "1Mb/s-like, 20 % loss": ("const", 104.0, 0.20),
    "4Mb/s-like, 15 % loss": ("const", 400.0, 0.15),
    "sawtooth 250-500/s, 15 % loss": ("saw", 250.0, 0.15),
}


def _rate_fn(shape: str, rate: float) -> Callable[[float], float]:
    if shape == "saw":
        return lambda t: rate * 2 ** ((t / 3.0) % 1.0)
    return lambda t: rate


def one(first_level: int, shape: str, rate: float, loss: float, seed: int,
        symbol: int = 64, symbols: int = SYMBOLS, max_block_length: int | None = None) -> dict:
    """One receiver joining at a seed-dependent time; counts until it decodes."""
    with tempfile.TemporaryDirectory(prefix="m2c-dupsim-") as d:
        path = os.path.join(d, "f")
        with open(path, "wb") as f:
            f.write(random.Random(seed).randbytes(symbols * symbol))
        sd = make_session(path, interface="127.0.0.1", min_rate=256_000 / 8 / PKT,
                          max_rate=8_000_000 / 8 / PKT, tsd=2.0, k=2, symbol_size=symbol,
                          max_block_length=max_block_length, seed=seed, session=seed)
    sd.first_level = first_level
    data = random.Random(seed).randbytes(symbols * symbol)
    snd = FileSender(sd, lambda o, n: data[o:o + n])
    rcv = FileReceiver(sd)
    sch = snd.schedule
    rng = random.Random(seed)
    rate_of = _rate_fn(shape, rate)
    start = 0.37 * seed
    seen: set[tuple[int, int]] = set()
    repeats = done_block = 0
    t = start
    while not rcv.complete:
        pdus = snd.next_pdus()
        for pdu, pkt in pdus:
            t = pdu.due
            if t < start:
                continue
            lvl = sch.level_of_channel(pdu.g, t)
            if lvl is None or lvl > sch.max_level_within(rate_of(t), t):
                continue
            if rng.random() < loss or pkt.data_less:
                continue
            if pkt.sbn in rcv.done:
                done_block += 1
            elif (pkt.sbn, pkt.esi) in seen:
                repeats += 1
            seen.add((pkt.sbn, pkt.esi))
            rcv.feed(pkt, PKT - 28)
            if rcv.complete:
                break
        if t - start > 20 * symbols / rate:
            raise RuntimeError("receiver never completed")
    k = rcv.pt.total_symbols
    return {"first_level": first_level, "seed": seed, "blocks": rcv.pt.blocks, "time": t - start,
            "received": rcv.symbols, "needed": rcv.needed, "k": k,
            "repeats": repeats, "done_block": done_block,
            "received/k": rcv.symbols / k, "dup": (rcv.symbols / rcv.needed - 1) * 100,
            "sym": (rcv.needed / k - 1) * 100, "eliminations": rcv.eliminations}


def offsets_model(n_blocks: int = 2 * SYMBOLS, n_levels: int = 33, need: float = 0.51,
                  losses=(0.0, 0.1, 0.2), seed: int = 1) -> list[dict]:
    """The application scheduler's offsets alone: a receiver of the first L levels of
    every buffer (L = 1..n_levels), losing each symbol with probability p, until it
    holds ``need`` of the blocks; dup % per L for Birk-Crupnicoff and, for comparison,
    a golden-ratio (Kronecker) offset sequence."""
    from m2c.core.scheduler import level_offsets

    phi = (5 ** 0.5 - 1) / 2
    seqs = {"birk-crupnicoff": level_offsets(n_blocks, n_levels),
            "golden-ratio": [round(i * phi * n_blocks) % n_blocks for i in range(n_levels)]}
    rows = []
    for p in losses:
        for name, xs in seqs.items():
            dups = []
            for L in range(1, n_levels + 1):
                rng = random.Random(seed)
                seen: set[int] = set()
                rx = b = 0
                while len(seen) < need * n_blocks:
                    for x in xs[:L]:
                        if rng.random() >= p:
                            rx += 1
                            seen.add((b + x) % n_blocks)
                    b += 1
                dups.append(100 * (rx / len(seen) - 1))
            rows.append({"offsets": name, "loss": p, "mean_dup": round(statistics.fmean(dups), 2),
                         "max_dup": round(max(dups), 2)})
    return rows


def run(quick: bool = True, first_levels=(1, 4), seeds: int | None = None,
        max_block_length: int | None = None) -> list[dict]:
    seeds = seeds or (1 if quick else 4)
    scen = dict(list(SCENARIOS.items())[:1]) if quick else SCENARIOS
    rows = []
    for name, (shape, rate, loss) in scen.items():
        for fl in first_levels:
            rs = [one(fl, shape, rate, loss, s, symbols=600 if quick else SYMBOLS,
                      max_block_length=max_block_length) for s in range(1, seeds + 1)]
            rows.append({"scenario": name, "first_level": fl, "seeds": seeds,
                         "blocks": rs[0]["blocks"],
                         **{m: round(statistics.fmean(r[m] for r in rs), 4)
                            for m in ("received/k", "dup", "sym", "repeats", "done_block",
                                      "eliminations")}})
    return rows


@cliutil.cli_main("m2c experiment dupsim")
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one scenario, one seed, 600 symbols")
    ap.add_argument("--first-level", type=cliutil.positive_int, nargs="+", default=[1, 4],
                    metavar="SYMBOLS",
                    help="symbols per first level of the sender's scheduler, one run each "
                         "(default: 1 4)")
    ap.add_argument("--seeds", type=cliutil.positive_int, metavar="N",
                    help="runs per scenario, averaged (default: 1 with --quick, else 4)")
    ap.add_argument("--max-block-length", type=cliutil.positive_int,
                    help="LDPC source symbols per block (default: the session default)")
    ap.add_argument("--offsets-model", action="store_true",
                    help="only the scheduler's offsets (fixed level counts), BC vs golden ratio")
    ap.add_argument("--json", metavar="FILE", type=cliutil.output_path,
                    help="also write the rows here as JSON")
    a = ap.parse_args(argv)
    if a.offsets_model:
        for r in offsets_model():
            print(json.dumps(r))
        return 0
    rows = run(a.quick, tuple(a.first_level), a.seeds, a.max_block_length)
    cols = ["scenario", "first_level", "blocks", "seeds", "received/k", "dup", "sym",
            "eliminations", "repeats",
            "done_block"]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join(str(r[c]) for c in cols) + " |")
    if a.json:
        with replace_when_done(a.json) as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
