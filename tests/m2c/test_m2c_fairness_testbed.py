"""M2C against M2C on the namespace testbed (paper 7.3; m2c/experiments/fairness_testbed.py):
two sessions behind one tbf, each session's rate from a capture of the shared link."""

from __future__ import annotations

import socket
import struct

import pytest

from m2c.experiments import fairness, fairness_testbed


def _pcap(path, frames) -> None:
    """A classic pcap of raw IPv4/UDP packets (linktype 101): (ts, dst, ip_length)."""
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 96, 101))
        for ts, dst, length in frames:
            ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, length, 0, 0, 1, 17, 0,
                             socket.inet_aton("10.0.6.1"), socket.inet_aton(dst))
            pkt = ip + struct.pack("!HHHH", 40000, 45000, length - 20, 0)
            sec, usec = int(ts), round((ts - int(ts)) * 1e6)
            f.write(struct.pack("<IIII", sec, usec, len(pkt), length) + pkt)


def test_session_bytes_counts_each_sessions_groups_inside_the_window(tmp_path):
    p = tmp_path / "c.pcap"
    _pcap(p, [(99.5, "239.196.1.1", 1500),   # before the window
              (100.0, "239.196.1.1", 1500), (100.5, "239.196.1.3", 1500),
              (101.0, "239.196.2.1", 1000), (101.5, "239.9.9.9", 1500),  # no session's
              (102.5, "239.196.2.2", 1500)])  # after it
    owner = {"239.196.1.1": "a", "239.196.1.3": "a", "239.196.2.1": "b", "239.196.2.2": "b"}
    got, stats = fairness_testbed.session_bytes(str(p), owner, 100.0, 102.0)
    assert got == {"a": 3000, "b": 1000}
    assert stats["malformed"] == 0


def test_the_testbed_builds_the_simulators_scenario():
    p = fairness_testbed.plan(4e6, 1_000_000, 10.0, 0)
    sc = fairness.scenario(4e6, 1_000_000, 10.0, 0)
    assert (p.rate_bps, p.queue_pkts, p.offset, p.size) == (4e6, 25, 10.0, 1_000_000)
    assert p.groups == (sc.multicast[0].addr,
                        sc.multicast[len(sc.multicast) // 2].addr)
    assert p.params["min_rate"] == sc.params["min_rate"] and p.params["k"] == 2


@pytest.mark.root
@pytest.mark.tool("tcpdump")
@pytest.mark.slow
def test_two_sessions_share_the_bottleneck_on_the_testbed():
    row = fairness_testbed.run_one(4e6, 700_000, 0.0, 0)
    assert row["a_verified"] and row["b_verified"], (row["a_end"], row["b_end"])
    assert row["both_s"] > 0 and row["a_bytes"] > 0 and row["b_bytes"] > 0
    for s in ("a", "b"):  # the rates are the captured bytes over the time both ran
        assert row[f"{s}_kbps"] == pytest.approx(row[f"{s}_bytes"] * 8 / row["both_s"] / 1000)
    assert row["jain"] == pytest.approx(fairness.jain([row["a_kbps"], row["b_kbps"]]))
    assert 0.5 <= row["jain"] <= 1.0
    assert row["a_share"] + row["b_share"] == pytest.approx(1.0)
    # what crossed the shared link fits in it (IP bytes of 1,514-byte frames at tbf's rate)
    assert 0.2 < row["link_use"] <= 1.02
    assert row["capture_dropped"] == 0


@pytest.mark.root
@pytest.mark.tool("tcpdump")
@pytest.mark.slow
def test_the_command_runs_on_the_testbed_and_writes_its_rows(tmp_path):
    import json
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "m2c", "experiment", "fairness", "--backend",
                        "netns", "--size", "400000", "--seeds", "1", "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "two M2C sessions (netns)" in r.stdout and "jain" in r.stdout
    doc = json.loads((tmp_path / "fairness-netns.json").read_text())
    assert doc["meta"]["backend"] == "netns"
    (row,) = doc["rows"]
    assert row["backend"] == "netns" and row["a_verified"] and row["b_verified"]
    assert doc["summary"]["jain"][0] == pytest.approx(row["jain"])
