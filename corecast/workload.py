"""Synthetic client populations with a skewed distribution over ASes.

The paper's section 6 experiment used a real client list of 1,429 clients
(Veetle trace) and scaled it x1..x7 "using the same AS distribution"; section
5.2 reports that just over 50% of ASes hold a single client while a few hold
hundreds.  Without the trace we draw AS sizes from a Zipf law (exponent 1.3),
seeded, which gives that shape; every AS gets one /24 EID prefix and one RLOC.
"""

from __future__ import annotations

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
