"""The ``vmc`` command line as real subprocesses, and the demo."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from vmc.aio.origin import expected
from vmc.cli import size
from vmc.workload.squid import read_log

PY = [sys.executable, "-m", "vmc"]


def _start(args: list[str]) -> tuple[subprocess.Popen, str]:
    p = subprocess.Popen(PY + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    m = re.search(r"http://([0-9.]+:\d+)/", line)
    if not m:
        p.kill()
        raise AssertionError(f"no address in {line!r}: {p.stderr.read()}")
    return p, m.group(1)


def _stop(p: subprocess.Popen) -> None:
    p.terminate()
    try:
        p.wait(5)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait(5)
    for f in (p.stdout, p.stderr):
        if f:
            f.close()


def test_size_units() -> None:
    assert size("8MiB") == 8 << 20 and size("64k") == 64000
    assert size("1e6") == 10**6 and size("12") == 12


@pytest.mark.tool("curl")
def test_cli_origin_proxy_get(tmp_path: Path) -> None:
    origin, oaddr = _start(["origin", "--listen", "127.0.0.1:0", "--rate", "2e6"])
    try:
        stats_file = tmp_path / "stats.json"
        proxy, paddr = _start(["proxy", "--listen", "127.0.0.1:0", "--upstream", oaddr,
                               "--window", "4MiB", "--stats-out", str(stats_file),
                               "--buffer-budget", "64MiB"])
        try:
            url = f"http://{oaddr}/cli.bin?size=300000"
            out = tmp_path / "x"
            r = subprocess.run(PY + ["get", url, "--proxy", paddr, "-o", str(out)],
                               capture_output=True, text=True, timeout=60)
            assert r.returncode == 0, r.stderr
            info = json.loads(r.stdout)
            assert info["status"] == 200 and info["length"] == 300000 and info["digest_ok"] is True
            assert out.read_bytes() == expected("/cli.bin", 300000)
            c = subprocess.run(["curl", "-sS", "-x", f"http://{paddr}", url,
                                "-o", str(tmp_path / "y")], timeout=60)
            assert c.returncode == 0 and (tmp_path / "y").read_bytes() == out.read_bytes()
            st = subprocess.run(["curl", "-sS", f"http://{paddr}/_vmc/status"], capture_output=True,
                                timeout=30)
            snap = json.loads(st.stdout)
            assert snap["client_bytes"] == 600000 and snap["requests"] == 2
            assert snap["buffer_budget"] == 64 << 20 and snap["buffer_committed"] == 0
            bad = subprocess.run(PY + ["get", "http://127.0.0.1:9/x", "--proxy", paddr, "-q"],
                                 capture_output=True, text=True, timeout=30)
            assert bad.returncode == 1 and "403" in bad.stderr
        finally:
            _stop(proxy)
        exported = json.loads(stats_file.read_text())  # written on SIGTERM
        assert exported["client_bytes"] == 600000
        assert exported["refused"] == {"upstream-not-allowed": 1}
    finally:
        _stop(origin)


def test_cli_proxy_refuses_to_be_open() -> None:
    r = subprocess.run(PY + ["proxy", "--listen", "127.0.0.1:0"], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 2 and "open proxy" in r.stderr


def test_cli_workload_writes_squid_log(tmp_path: Path) -> None:
    out = tmp_path / "w.log"
    r = subprocess.run(PY + ["workload", "--scenario", "low-high", "-n", "50", "-o", str(out)],
                       timeout=30)
    assert r.returncode == 0
    entries = list(read_log(out.read_text().splitlines(), strict=True))
    assert len(entries) == 50 and all(e.method == "GET" and e.status == 200 for e in entries)
    r = subprocess.run(PY + ["replay", str(out), "--limit", "15", "--speed", "50",
                             "--link-rate", "2e7"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    row = json.loads(r.stdout)
    assert row["requests"] == 15 and row["failed"] == 0 and row["vmc_MB"] <= row["normal_MB"]


def test_demo_rows() -> None:
    from vmc.demo import run

    rows = run(quick=True)
    assert all(set(r) == {"system", "what", "result"} and r["system"] == "vmc" for r in rows)
    verified = [r for r in rows if r["what"] == "all bodies verified"][0]
    assert verified["result"].startswith("True")
    ratio = [r for r in rows if r["what"].startswith("client bytes")][0]["result"]
    assert float(ratio.split("/")[1].strip().rstrip("x")) > 1.0  # some sharing happened
