"""Captures that kept less than was on the wire (issue 13 item 13).

``tcpdump -s 65535`` on loopback cuts the kernel's 65,549-byte frames: the
analyser used to print ``truncated 0`` and a VMC sharing ratio of 1.65 where
the proxy shared 3.0.  Now the cut frames are counted, and every figure they
affect is marked in the ``unreliable`` column, in text, JSON and CSV; a
figure not so marked must be right.
"""

from __future__ import annotations

import csv
import json
import subprocess
import time

import pytest
from analysis_support import PY, free_tcp_port, tcpdump
from test_analysis_vmc import _wait_port

SIZE = 4_000_000


def _summary(rows: list[dict]) -> dict:
    return {r["what"]: r for r in rows}


@pytest.mark.root
@pytest.mark.tool("tcpdump", "curl")
@pytest.mark.slow
def test_vmc_capture_with_snaplen_65535_marks_what_the_cut_frames_affect(tmp_path, procs):
    """A first client starts a paced 4 MB stream; two late ones join after 1 s and get the
    cached prefix from the proxy at once, in frames longer than 65535 bytes."""
    op, pp = free_tcp_port(), free_tcp_port()
    cap = tmp_path / "vmc.pcap"
    with tcpdump(cap, f"tcp and (port {op} or port {pp})", snaplen=65535):
        procs.append(subprocess.Popen([PY, "-m", "vmc", "origin", "--listen", f"127.0.0.1:{op}"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        procs.append(subprocess.Popen([PY, "-m", "vmc", "proxy", "--listen", f"127.0.0.1:{pp}",
                                       "--upstream", f"127.0.0.1:{op}"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        _wait_port(op)
        _wait_port(pp)
        url = f"http://127.0.0.1:{op}/movie.bin?size={SIZE}&rate=2000000"
        curls = [subprocess.Popen(["curl", "-sS", "-x", f"127.0.0.1:{pp}", url, "-o",
                                   str(tmp_path / "a")])]
        time.sleep(1.0)
        curls += [subprocess.Popen(["curl", "-sS", "-x", f"127.0.0.1:{pp}", url, "-o",
                                    str(tmp_path / n)]) for n in "bc"]
        procs.extend(curls)
        assert all(c.wait(60) == 0 for c in curls)
        status = json.loads(subprocess.run(
            ["curl", "-sS", f"http://127.0.0.1:{pp}/_vmc/status"], capture_output=True,
            text=True, timeout=10, check=True).stdout)
    for n in "abc":
        assert (tmp_path / n).stat().st_size == SIZE
    truth = {"origin_bytes": status["origin_bytes"], "client_bytes": 3 * SIZE,
             "sharing_ratio": round(3 * SIZE / status["origin_bytes"], 4)}
    assert truth["sharing_ratio"] > 2.5  # the stream was shared

    out = tmp_path / "a.json"
    r = subprocess.run([PY, "-m", "deliverykit", "analyse", str(cap), "--no-progress", "--only",
                        "vmc", "--opt", f"proxy=127.0.0.1:{pp}", "--json", str(out), "--csv",
                        str(tmp_path / "csv"), "--rows", "100"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    res = json.loads(out.read_text())
    cut = res["capture"]["truncated"]
    assert cut > 0, "no frame over the snap length: the test did not exercise truncation"
    assert res["analysers"]["vmc"]["truncated_frames"] == cut
    assert any("shorter than they were on the wire" in w for w in res["warnings"])
    s = _summary(res["results"]["vmc"]["vmc_summary"])
    wrong = [k for k, v in truth.items() if s[k]["value"] != v]
    assert wrong, "every figure right despite cut frames: nothing to mark"
    for k in wrong:  # a wrong figure is always marked
        assert s[k]["unreliable"], (k, s[k], truth[k])
    for k in ("client_bytes", "sharing_ratio", "bandwidth_saving"):  # the cut frames were
        assert s[k]["unreliable"]                                   # proxy -> client
    # the same marks in text and CSV
    assert "WARNING:" in r.stdout and "UNRELIABLE" in r.stdout
    with open(tmp_path / "csv" / "vmc-vmc_summary.csv", newline="") as fh:
        rows = {row["what"]: row for row in csv.DictReader(fh)}
    assert rows["sharing_ratio"]["unreliable"]
    with open(tmp_path / "csv" / "capture-stats.csv", newline="") as fh:
        stats = {row["what"]: row["value"] for row in csv.DictReader(fh)}
    assert int(stats["truncated"]) == cut

    # captured whole (-s 0, as the README says), the same analyser agrees with the proxy
    # (checked in test_analysis_vmc.py::test_proxy_origin_capture)


@pytest.mark.root
@pytest.mark.tool("tcpdump", "curl")
def test_origin_transfer_with_snaplen_65535(tmp_path, procs):
    """Unpaced 4 MB responses straight from the origin to a slower reader: the kernel
    coalesces its 16 KiB writes into frames over 65535 bytes. Figures those frames fed are
    marked; the ones not marked (the request counts) are right."""
    op = free_tcp_port()
    cap = tmp_path / "o.pcap"
    with tcpdump(cap, f"tcp and port {op}", snaplen=65535):
        procs.append(subprocess.Popen([PY, "-m", "vmc", "origin", "--listen", f"127.0.0.1:{op}"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        _wait_port(op)
        for name in "xy":
            # A reader slower than the origin keeps the origin's socket buffer full, so every
            # window update goes out as full 64 KiB segments whatever the machine's load (an
            # eager reader on a loaded machine could take each 16 KiB write on its own).
            subprocess.run(["curl", "-sS", "--limit-rate", "4M", "-o", "/dev/null",
                            f"http://127.0.0.1:{op}/{name}?size={SIZE}"], check=True, timeout=30)
    r = subprocess.run([PY, "-m", "deliverykit", "analyse", str(cap), "--no-progress", "--only",
                        "vmc", "--opt", f"origin={op}", "--json", "-"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["capture"]["truncated"] > 0, "no frame over the snap length"
    vmc = res["results"]["vmc"]
    s = _summary(vmc["vmc_summary"])
    assert s["origin_bytes"]["value"] != 2 * SIZE  # what the old analyser showed as fact
    assert s["origin_bytes"]["unreliable"] and s["origin_status_200"]["unreliable"]
    assert s["truncated_segments"]["value"] == res["capture"]["truncated"]
    assert s["origin_requests"]["value"] == 2
    rows = vmc["vmc_requests"]
    assert sorted(r["target"] for r in rows) == ["/x?size=4000000", "/y?size=4000000"]
    assert s["open_connections_at_end"]["value"] == 0  # a cut connection still closes
    assert all(r["unreliable"] for r in rows if r["body_bytes"] != SIZE)
    (u,) = [u for u in vmc["vmc_uris"] if u["uri"].endswith("/x?size=4000000")]
    assert u["unreliable"] or u["origin_bytes"] == SIZE
    assert "warning:" in r.stderr
