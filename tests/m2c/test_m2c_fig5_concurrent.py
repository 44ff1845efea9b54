"""fig5 --flows TCP_ft (issue 18): TCP_ft repetitions run at once as Dask tasks, each in
its own namespaces and tbf, and leave nothing behind (root, real Linux TCP)."""

from __future__ import annotations

import csv
import os
import subprocess
import time

import pytest

from deliverykit.testing import require_root, require_tool
from m2c.experiments import fig5


def _netns() -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True)
    return [line.split()[0] for line in out.stdout.splitlines() if line.strip()]


@pytest.mark.root
@pytest.mark.slow
def test_two_repetitions_at_once_complete_in_distinct_namespaces_and_leave_none(
        tmp_path, capsys) -> None:
    require_root()
    require_tool("ip", "tc")
    rc = fig5.main(["--flows", "TCP_ft", "--size", "1000000", "--bottleneck", "4e6",
                    "--receivers", "5", "--competing", "background", "--repeats", "2",
                    "--workers", "2", "--first-repeat", "3", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0
    (path,) = tmp_path.glob("fig5-tcpft-1MB-4Mbps-w2-from3.csv")
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    assert sorted(int(r["seed"]) for r in rows) == [3, 4]  # both repetitions finished
    for r in rows:
        assert r["scenario"] == "m2c-fig5-TCP_ft" and r["commit"]
        assert float(r["bottleneck"]) == 4e6 and int(r["size"]) == 1_000_000
        # all five 1 MB downloads shared 4 Mb/s: no faster than the link allows
        assert float(r["time_max"]) >= 5 * 1_000_000 * 8 / 4e6 * 0.9
    stems = {r["testbed"] for r in rows}
    assert len(stems) == 2 and all(s.startswith(fig5.TCPFT_PREFIX + "-") for s in stems)
    # the two ran at the same time: each started before the other ended
    a, b = rows
    assert a["started_utc"] <= b["finished_utc"] and b["started_utc"] <= a["finished_utc"]
    # ... but built their testbeds one at a time (the setup lock): one's build ended
    # (``built``, taken before the lock is freed) before the other's build began; the
    # first's ``transfer_started`` may come after that (it is taken once its server is up)
    first, second = sorted(rows, key=lambda r: float(r["setup_started"]))
    assert float(first["built"]) <= float(second["setup_started"])
    assert all(int(r["setup_attempts"]) >= 1 for r in rows)
    left = [n for n in _netns() if any(n.startswith(s + "-") for s in stems)]
    assert left == []
    assert "| 4 Mb/s, testbed, 1 MB | 2 |" in out and "| 4 Mb/s, paper 5(c), 48 MB | 20 |" in out


@pytest.mark.root
@pytest.mark.slow
def test_a_repetition_past_the_deadline_stops_and_removes_its_namespaces() -> None:
    from deliverykit.testbed import TestbedTimeout

    require_root()
    require_tool("ip", "tc")
    mine = f"{fig5.TCPFT_PREFIX}-{os.getpid()}-"
    point = {"bottleneck": 1e6, "size": 1_000_000, "receivers": 5, "competing": "background",
             "deadline": time.time() + 8}  # five 1 MB downloads at 1 Mb/s take ~40 s
    with pytest.raises(TestbedTimeout, match="deadline"):
        fig5.tcpft_task(point, 0)
    assert [n for n in _netns() if n.startswith(mine)] == []


@pytest.mark.root
@pytest.mark.slow
def test_the_setup_lock_is_free_while_the_transfer_runs(tmp_path) -> None:
    """The processes a repetition forks inherit the lock's file; the lock must still be
    released when the transfer starts, or the next repetition waits for the whole run."""
    import fcntl
    import threading

    require_root()
    require_tool("ip", "tc")
    lock = str(tmp_path / "setup.lock")
    marks: dict[str, float] = {}
    out: list[object] = []

    def one() -> None:  # five 1 MB downloads at 1 Mb/s: ~40 s of transfer
        try:
            out.append(fig5.one_run("TCP_ft", 1e6, 1_000_000, 5, "background", 300,
                                    prefix=fig5.TCPFT_PREFIX, setup_lock=lock, marks=marks))
        except BaseException as e:  # noqa: BLE001 -- the test thread reports it below
            out.append(e)

    t = threading.Thread(target=one)
    t.start()
    try:
        for _ in range(3000):  # the testbed build: a safety bound, not a timed assertion
            if "transfer" in marks or out:
                break
            time.sleep(0.1)
        assert "transfer" in marks, out
        with open(lock, "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)  # BlockingIOError if still held
            fcntl.flock(f, fcntl.LOCK_UN)
        assert not out  # checked while the transfer was still running
    finally:
        t.join(600)
    (rows,) = out
    assert isinstance(rows, list) and all(r["ok"] for r in rows)


def test_a_repetition_that_cannot_end_before_the_deadline_does_not_start(tmp_path) -> None:
    from deliverykit.testbed import TestbedTimeout

    mine = f"{fig5.TCPFT_PREFIX}-{os.getpid()}-"
    # five 4 MB downloads through 1 Mb/s need 160 s at least; the deadline is in 60 s
    point = {"bottleneck": 1e6, "size": 4_000_000, "receivers": 5, "competing": "background",
             "deadline": time.time() + 60, "setup_lock": str(tmp_path / "lock")}
    with pytest.raises(TestbedTimeout, match="not started: it needs 160 s"):
        fig5.tcpft_task(point, 0)
    assert [n for n in _netns() if n.startswith(mine)] == []
