"""Application scheduler (paper section 6.1, derived from Birk & Crupnicoff 2003).

B blocks are ordered into buffers of N hierarchical levels so that the
distance between two occurrences of a block is maximised:

- level 1 of buffer b carries block b (b in [0, B));
- level n (n >= 2) of buffer b carries block (b + x_n) mod B, where x_n is
  the middle of the longest interval between the offsets x_1 = 0, ..., x_{n-1}
  already used by the lower levels (on the circle of B positions; the first
  longest interval wins a tie; middle = start + floor(length / 2)).

Example from the paper (B = 10): x_2 = 5, then level 3 picks 2 (the middle of
the interval [0, 5) of length 5).  When every offset is used (N > B) the
sequence of offsets repeats.  A receiver getting the first L levels of every
buffer thus collects all blocks in about B/L buffers, whatever buffer it
starts with (Fig. 3(d)).
"""

from __future__ import annotations

import bisect

from m2c.fec.errors import FECError

__all__ = ["level_offsets", "AppScheduler", "blocks_until_complete", "unsent_at_first_duplicate"]


def level_offsets(n_blocks: int, n_levels: int) -> list[int]:
    """x_1 .. x_N for B = n_blocks."""
    if n_blocks < 1 or n_levels < 1:
        raise FECError("need B >= 1 and N >= 1")
    xs: list[int] = []
    used: list[int] = []  # sorted distinct offsets of the current round
    for _ in range(n_levels):
        if len(used) == n_blocks:
            used = []
        if not used:
            x = 0
        else:
            best_len, x = -1, 0
            for i, lo in enumerate(used):
                hi = used[i + 1] if i + 1 < len(used) else used[0] + n_blocks
                if hi - lo > best_len:
                    best_len, x = hi - lo, lo + (hi - lo) // 2
            x %= n_blocks
        bisect.insort(used, x)
        xs.append(x)
    return xs


class AppScheduler:
    """Buffers of N levels over B blocks (a block = one FEC symbol in M2C's file transfer)."""

    def __init__(self, n_blocks: int, n_levels: int) -> None:
        self.n_blocks = n_blocks
        self.n_levels = n_levels
        self.offsets = level_offsets(n_blocks, n_levels)

    def buffer(self, b: int) -> list[int]:
        """Blocks of buffer b, most important (level 1) first."""
        B = self.n_blocks
        return [(b + x) % B for x in self.offsets]


def blocks_until_complete(sched: AppScheduler, levels: int, first_buffer: int,
                          need: int | None = None) -> int:
    """Buffers a receiver of the first ``levels`` levels needs, starting at
    ``first_buffer``, to hold ``need`` distinct blocks (default: all B)."""
    need = sched.n_blocks if need is None else need
    seen: set[int] = set()
    b = first_buffer
    n = 0
    while len(seen) < need:
        seen.update(sched.buffer(b)[:levels])
        b += 1
        n += 1
        if n > 4 * sched.n_blocks + 4:
            raise FECError("never completes")
    return n


def unsent_at_first_duplicate(sched: AppScheduler, levels: int, first_buffer: int) -> int:
    """Blocks still missing when the receiver of ``levels`` levels first gets a duplicate."""
    seen: set[int] = set()
    b = first_buffer
    while True:
        for blk in sched.buffer(b)[:levels]:
            if blk in seen:
                return sched.n_blocks - len(seen)
            seen.add(blk)
        b += 1
