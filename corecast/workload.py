"""Synthetic client populations with a skewed distribution over ASes.

The paper's section 6 experiment used a real client list of 1,429 clients
(Veetle trace) and scaled it x1..x7 "using the same AS distribution"; section
5.2 reports that just over 50% of ASes hold a single client while a few hold
hundreds.  Without the trace we draw AS sizes from a Zipf law (exponent 1.3),
seeded, which gives that shape; every AS gets one /24 EID prefix and one RLOC.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass


@dataclass(frozen=True)
class Population:
    """Clients (EID strings) grouped by AS, with each AS's EID prefix and RLOC."""

    clients: tuple[tuple[str, int], ...]  #: (client EID, AS index)
    prefixes: tuple[str, ...]  #: EID prefix of AS i
    rlocs: tuple[str, ...]  #: RLOC of AS i's ETR

    def sizes(self) -> list[int]:
        out = [0] * len(self.prefixes)
        for _, a in self.clients:
            out[a] += 1
        return out

    def map_cache_text(self) -> str:
        return "".join(f"{p} {r}\n" for p, r in zip(self.prefixes, self.rlocs))


def skewed(n_clients: int = 1429, n_ases: int = 600, seed: int = 1, scale: int = 1,
           exponent: float = 1.3) -> Population:
    """``n_clients * scale`` clients over at most ``n_ases`` candidate ASes (Zipf sizes).

    The defaults give 200 ASes holding clients, 49% of them a single client and
    the largest 393 (paper: about 200 ASes, just over 50% single, largest > 500).

    Scaling keeps the AS distribution (section 6.1): each base client is
    repeated ``scale`` times inside its AS.  AS ``i`` owns the /18 EID prefix
    10.(i >> 2).((i & 3) << 6).0/18 (16,384 hosts) and RLOC 100.64.(i >> 8).(i & 255).
    """
    rng = random.Random(seed)
    weights = [1.0 / (r + 1) ** exponent for r in range(n_ases)]
    base = rng.choices(range(n_ases), weights=weights, k=n_clients)
    used = sorted(set(base))
    index = {a: i for i, a in enumerate(used)}
    counts = [0] * len(used)
    clients = []
    for a in base:
        i = index[a]
        for _ in range(scale):
            counts[i] += 1
            n = counts[i]  # host numbers start at 1: never the prefix's network address
            # AS i owns 10.0.0.0/8 slice: 16 bits of host space per AS
            clients.append((f"10.{i >> 2 & 255}.{(i & 3) << 6 | (n >> 8) & 63}.{n & 255}", i))
    prefixes = tuple(f"10.{i >> 2 & 255}.{(i & 3) << 6}.0/18" for i in range(len(used)))
    rlocs = tuple(f"100.{64 + (i >> 16 & 63)}.{i >> 8 & 255}.{i & 255}" for i in range(len(used)))
    return Population(tuple(clients), prefixes, rlocs)


#: Fig. 4(a) (section 5.2): "just over 50% of the ASes with a single client"
PAPER_SINGLE_FRACTION = 0.5
#: Fig. 4(b), the RO trace: the top three ASes held 12,160 of 23,713 clients
PAPER_TOP3_SHARE = 12_160 / 23_713


def rank_size(ases: int = 1000, clients: int = 100_000,
              single_fraction: float = PAPER_SINGLE_FRACTION) -> tuple[list[int], float]:
    """Clients per AS from a rank-size (Zipf) law, ``n_r = max(1, floor(A r^-s))`` for
    ranks r = 1..``ases``, largest first; returns (sizes, s).

    The two parameters come from the paper's Fig. 4 and the population asked for:
    ``A = 2 (ases (1 - single_fraction))^s`` puts exactly the last ``single_fraction``
    of the ranks at one client and the others at two or more (Fig. 4(a): just over
    50% of ASes hold one client), and the exponent ``s`` is found by bisection so
    that the sizes add up to ``clients`` (the rounding remainder goes to the largest
    AS).  Deterministic: no seed.

    For 1,000 ASes this gives s = 1.33 at 25,000 clients, whose top three ASes hold
    49.5% of the clients (the RO trace of Fig. 4(b): 51% of 23,713 clients in 1,291
    ASes), and s = 1.61 at 100,000 clients (issue 18's scale), where the top three
    hold 67% (largest AS 45,006): more concentrated than RO, less than ES (top two:
    72%).  Half single-client ASes need at least 1.5 clients per AS."""
    if ases < 1 or clients < ases:
        raise ValueError("need at least one AS and at least one client per AS")
    if not 0 <= single_fraction < 1:
        raise ValueError("single_fraction must be in [0, 1)")
    knee = max(1.0, ases * (1 - single_fraction))

    def sizes(s: float) -> list[int]:
        a = 2 * knee ** s
        return [max(1, math.floor(a * r ** -s)) for r in range(1, ases + 1)]

    lo, hi = 1e-9, 8.0
    if sum(sizes(lo)) > clients:
        raise ValueError(f"{ases} ASes with {single_fraction:.0%} of them single-client need "
                         f"at least {sum(sizes(lo))} clients")
    if sum(sizes(hi)) < clients:
        raise ValueError("too many clients for this many ASes and single-client fraction")
    for _ in range(100):  # bisection on s: the total grows with s
        mid = (lo + hi) / 2
        if sum(sizes(mid)) > clients:
            hi = mid
        else:
            lo = mid
    out = sizes(lo)
    out[0] += clients - sum(out)
    return out, lo
