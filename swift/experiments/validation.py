"""swift's scenarios for ``deliverykit sim validate`` (entry point
``deliverykit.sim_validations``): three small swarms, each one
:class:`deliverykit.sim.Scenario` that both backends read (:mod:`swift.experiments.swarm`).

- ``crowd6``: a 6-leecher flash crowd with the paper's link parameters
  (seeder 20 Mb/s, leecher upload 1.2 Mb/s);
- ``lossy2``: 4 leechers, 2 % loss on every packet every peer sends;
- ``hetero-delay``: 4 leechers in the Fig. 5 groups' delays (10, 25, 50,
  100 ms one way on what they send), no loss.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable

from deliverykit.sim import Scenario
from deliverykit.sim.validate import Case, RunResult
from swift.experiments.flashcrowd import configs
from swift.experiments.swarm import GROUPS, Backend, SwarmRun, crowd_scenario, run

#: bytes that count as start-up (the start of the video, in order)
STARTUP_BYTES = 64 * 1024


def metrics(r: SwarmRun) -> dict[str, float | None]:
    """The validation metrics (deliverykit.sim.validate.METRICS) of one swarm run."""
    ls = r.leechers
    comps = [x.completion_s for x in ls if x.completion_s is not None]
    starts = [x.startup_s for x in ls if x.startup_s is not None]
    chunks = math.ceil(int(r.scenario.params["size"]) / 1024)
    by_leechers = sum(x.sent_chunks for x in ls)
    got = sum(x.stats.get("verified", 0) + x.stats.get("dup", 0) for x in ls)
    return {
        "mean_completion_s": statistics.fmean(comps) if comps else None,
        "min_completion_s": min(comps) if comps else None,
        "max_completion_s": max(comps) if comps else None,
        "mean_startup_s": statistics.fmean(starts) if starts else None,
        "leecher_upload_share": by_leechers / (chunks * len(ls)) if ls else None,
        "chunks_got_per_chunk": got / (chunks * len(ls)) if ls else None,
    }


def _runner(build: Callable[[int, int], Scenario]) -> Callable[[int, int, str], RunResult]:
    def run_case(size: int, seed: int, backend: str) -> RunResult:
        r = run(build(size, seed), Backend(backend), *configs(STARTUP_BYTES), prefix="skval")
        return RunResult(metrics(r), r.wall_s, sum(x.verified for x in r.leechers),
                         sum(x.completion_s is not None for x in r.leechers), len(r.leechers))
    return run_case


def cases() -> list[Case]:
    delays = {g: d / 1000 for g, (d, _) in GROUPS.items()}
    specs = [
        ("crowd6", "6-leecher flash crowd, seeder 20 Mb/s, leecher upload 1.2 Mb/s",
         lambda size, seed: crowd_scenario(6, size, "flash", 1.2e6, STARTUP_BYTES, seed,
                                           limit=300.0)),
        ("lossy2", "4 leechers, 2 % loss on every uplink, 4 Mb/s leecher upload",
         lambda size, seed: crowd_scenario(4, size, "flash", 4e6, STARTUP_BYTES, seed,
                                           limit=300.0, loss=0.02)),
        ("hetero-delay", "4 leechers, one-way 10/25/50/100 ms on their uplinks (Fig. 5)",
         lambda size, seed: crowd_scenario(4, size, "flash", 4e6, STARTUP_BYTES, seed,
                                           limit=300.0, delays=delays)),
    ]
    return [Case(name, about, build, _runner(build)) for name, about, build in specs]
