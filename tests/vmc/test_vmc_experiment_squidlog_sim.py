"""vmc experiment squidlog --backend sim (issue 19 item 4): the log a real Squid writes, replayed
Normal vs VMC in simulated time through the same sharing core; an existing log by --log."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from vmc.experiments.squidlog import Backend, run


@pytest.mark.slow
@pytest.mark.tool("squid")
def test_real_squids_log_replayed_in_simulated_time(tmp_path: Path) -> None:
    log = tmp_path / "access.log"
    res = run(quick=True, scenario="high-vhigh", n=24, log_out=str(log), backend=Backend.SIM,
              batch=10)
    # the real Squid wrote the log (as in the loopback experiment) ...
    assert res["issued"] == 24 and res["failed_through_squid"] == 0
    assert res["cleaned"] == 24 and res["urls_as_issued"]
    assert res["result_codes"].get("TCP_MISS/200") == 24
    # ... and the simulated replay carried every logged request, in batches of 10
    rep = res["replay"]
    assert rep["backend"].startswith("sim") and rep["requests"] == 24 and rep["batch"] == 10
    assert rep["failed"] == 0 and rep["incomplete_batches"] == 0
    assert 0 < rep["vmc_MB"] <= rep["normal_MB"]
    # the written log replays by --log to the same figures (the run is deterministic; no squid)
    out = subprocess.run(
        [sys.executable, "-m", "vmc.experiments.squidlog", "--backend", "sim", "--log", str(log),
         "--batch", "10", "--scenario", "high-vhigh"],
        capture_output=True, text=True, timeout=300,
    )
    assert out.returncode == 0, out.stderr
    again = json.loads(out.stdout)["replay"]
    for key in ("requests", "normal_MB", "vmc_MB", "bandwidth_saving_%", "latency_sum_vmc_s",
                "elapsed_vmc_s", "joins"):
        assert again[key] == rep[key], key


def test_a_malformed_log_is_one_line_error(tmp_path: Path) -> None:
    bad = tmp_path / "access.log"
    bad.write_text("1000000000.000     20 10.0.0.1 TCP_MISS/200 1234 GET http://a.example/x\n"
                   "not a squid line at all\n")
    out = subprocess.run(
        [sys.executable, "-m", "vmc.experiments.squidlog", "--backend", "sim", "--log", str(bad)],
        capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    assert out.stderr.strip().splitlines()[-1].startswith("vmc experiment squidlog: error: --log")
    missing = subprocess.run(
        [sys.executable, "-m", "vmc.experiments.squidlog", "--backend", "sim", "--log",
         str(tmp_path / "none.log")], capture_output=True, text=True, timeout=120,
    )
    assert missing.returncode == 2 and "no such file" in missing.stderr
