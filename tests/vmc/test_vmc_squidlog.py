"""The replay reads what a real Squid writes: generate, log through squid, parse strictly,
replay."""

from __future__ import annotations

from pathlib import Path

import pytest

from vmc.experiments.squidlog import run
from vmc.workload.squid import clean, read_log


@pytest.mark.slow
@pytest.mark.tool("squid")
def test_real_squid_access_log_replayed_through_vmc(tmp_path: Path) -> None:
    log = tmp_path / "access.log"
    res = run(quick=True, scenario="high-vhigh", n=24, log_out=str(log))
    # Squid wrote one native line per request (plus its readiness probe), every line parses.
    assert res["issued"] == 24 and res["failed_through_squid"] == 0
    assert res["parsed"] == res["squid_log_lines"] == 25
    assert res["cleaned"] == 24 and res["urls_as_issued"]
    assert res["result_codes"].get("TCP_MISS/200") == 24
    assert res["origin_requests"] == 24  # squid did not cache: the log is the clients' trace
    # Squid counts the response head in its bytes: every logged size is the body plus a head.
    assert 100 < res["head_bytes_per_entry"] < 2000
    entries = clean(read_log(log.read_text().splitlines(), strict=True))
    assert len(entries) == 24 and all(e.hierarchy == "HIER_DIRECT" for e in entries)
    # The replay of Squid's own log through our proxy: every request served, never more origin
    # bytes than without the proxy.
    rep = res["replay"]
    assert rep["requests"] == 24 and rep["failed"] == 0
    assert 0 < rep["vmc_MB"] <= rep["normal_MB"]
