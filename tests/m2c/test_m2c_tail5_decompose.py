"""Session 14's decomposition of a receiver's time above its link-ideal time.

docs/results/m2c-sim/decompose-s14.py replays one receiver of the `many` crowd alone
with read-only hooks and splits T - ideal into parts (docs/m2c-results.md, "Session
14").  These tests run it on one fast lossless and one lossy receiver: the hooks
change nothing (the same completion as the replay without them), the parts add up,
and the decodable point it finds is one the decoder agrees with.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from types import ModuleType

import pytest

sys.path.insert(0, os.path.dirname(__file__))

import crowd  # noqa: E402

from m2c.fec import ldpc  # noqa: E402

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "results", "m2c-sim",
                      "decompose-s14.py")
SIZE = 4_000_000


@pytest.fixture(scope="module")
def decompose() -> ModuleType:
    spec = importlib.util.spec_from_file_location("decompose_s14", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("name", ["r918", "r438"])  # 4.74 Mb/s lossless; 5.51 Mb/s, 1.79 %
def test_parts_add_up_and_hooks_change_nothing(decompose: ModuleType, name: str) -> None:
    o = decompose.run_one(name)
    plain = crowd.replay(name, SIZE).receivers[0].completion_s
    assert o["T"] == plain  # the hooks only read
    assert o["ratio"] == pytest.approx(crowd.ratio(crowd.replay(name, SIZE), name, SIZE))
    parts = o["parts"]
    assert set(parts) == set(decompose.PARTS)
    assert sum(parts.values()) == pytest.approx(o["excess"], abs=1e-9)
    for p in ("pre", "startup", "backoff", "gran", "over", "headers", "fec", "end"):
        assert parts[p] >= 0, p
    # 72 header bytes of each 1,500-byte packet: the payload-only ideal leaves them out
    assert parts["headers"] / o["ideal"] == pytest.approx(1500 / 1428 - 1, rel=0.02)
    # the sender's uplink carries the crowd's first receiver's delay: before any packet
    assert parts["pre"] > o["up_delay_ms"] / 1e3
    assert o["K"] < o["decodable"] <= o["needed"]
    assert o["ratio_at_decodable"] <= o["ratio"]


def test_decodable_point_is_the_least(decompose: ModuleType) -> None:
    """The prefix found decodes by elimination and one symbol less does not, with the
    symbols' real values (the search itself eliminates on the structure only)."""
    import random

    k, n, E = 300, 600, 16
    params = ldpc.LDPCParams(k, n, E, 5, 7)
    src = random.Random(3).randbytes(k * E)
    enc = src + ldpc.encode(params, src)  # ESIs 0..k-1 the source, k..n-1 the repair
    order = list(range(n))
    random.Random(5).shuffle(order)

    def solves(m: int) -> bool:
        dec = ldpc.LDPCDecoder(params, ldpc.Decoding.ML)
        done = False
        for esi in order[:m]:
            done = dec.add(esi, enc[esi * E:(esi + 1) * E])
        return done or dec.solve(partial=False)

    def structure(m: int) -> bool:
        dec = ldpc.LDPCDecoder(params, ldpc.Decoding.ML)
        done = False
        for esi in order[:m]:
            done = dec.add(esi, bytes(E))
        return done or dec._eliminate(values=False)

    least = next(m for m in range(k, n + 1) if structure(m))
    assert solves(least) and not solves(least - 1)
