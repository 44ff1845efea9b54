"""The testbed starts every leecher's arrival clock at one signal, as the simulator does.

Spawned one after another, the testbed's leechers of a flash crowd used to start
~25 ms apart, so the testbed ran a staggered crowd where the scenario (and the
simulator) had a simultaneous one (docs/sim.md, validation, session 17).
"""

from __future__ import annotations

import os
import random
import tempfile
import time

import pytest

from swift.experiments import swarm
from swift.experiments.flashcrowd import configs


@pytest.mark.root
@pytest.mark.timeout(120)
def test_no_leecher_starts_before_the_start_signal() -> None:
    from deliverykit.testbed import Testbed
    from swift.aio.node import tree_for_file

    seeder_cfg, leecher_cfg = configs(0)
    size = 64 * 1024
    data = random.Random(5).randbytes(size)
    with tempfile.TemporaryDirectory(prefix="swift-start-") as d:
        path = os.path.join(d, "content.bin")
        with open(path, "wb") as f:
            f.write(data)
        root = tree_for_file(path, seeder_cfg.hash_func, seeder_cfg.chunk_size).root_hash.hex()
        with Testbed(prefix="swst") as tb:
            lan = tb.bridge("lan", snooping=False, querier=False)
            sh = tb.host("seed")
            tb.attach(sh, lan, "10.79.0.1/24")
            ready = tb.event()
            st = tb.spawn(sh, swarm._seed, path, seeder_cfg, ready, 60.0)
            assert ready.wait(30)
            go, preps, tasks = tb.event(), [], []
            for i, arrive in enumerate((0.0, 0.0, 0.3)):
                h = tb.host(f"l{i}")
                tb.attach(h, lan, f"10.79.0.{10 + i}/24")
                prep = tb.event()
                preps.append(prep)
                tasks.append(tb.spawn(h, swarm._leech, root, "10.79.0.1", arrive, leecher_cfg,
                                      {"size": size}, 30.0, os.path.join(d, f"l{i}.bin"),
                                      None, prep, go))
            assert all(p.wait(30) for p in preps)
            time.sleep(0.3)  # every node built, none may connect yet
            signalled = time.time()
            go.set()
            res = [t.result(timeout=60) for t in tasks]
            st.kill()
            for i in range(3):
                with open(os.path.join(d, f"l{i}.bin"), "rb") as f:
                    assert f.read() == data
    # each arrival clock starts at the signal, not when its process got going
    assert all(r["started_at"] >= signalled for r in res)
    assert all(r["completion_s"] is not None for r in res)
