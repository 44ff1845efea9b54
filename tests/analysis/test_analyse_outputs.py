"""``deliverykit analyse`` outputs (issue 13 item 14): a directory where a file is expected,
or a file where a directory is expected, is one error line and exit 1 (checked before the
capture is read); an existing output file is replaced atomically (written under a temporary
name beside it, then renamed), never left half-written, and no temporary file stays behind.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from analysis_support import PY

SHARED = Path(__file__).resolve().parents[3] / "shared" / "captures"
#: a real libswift <-> libswift exchange (see ../shared/captures/README.md): ppspp rows + plots
REAL = SHARED / "libswift" / "ref_ls_ls_8k.pcap"


@pytest.fixture
def capture() -> Path:
    if not REAL.exists():
        pytest.fail(f"{REAL} is missing (the shared captures of real peers)")
    return REAL


def dk(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([PY, "-m", "deliverykit", "analyse", "--no-progress", *map(str, args)],
                          capture_output=True, text=True, timeout=120)


def _one_error_line(r: subprocess.CompletedProcess, *words: str) -> None:
    assert r.returncode == 1, (r.returncode, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert lines[0].startswith("deliverykit analyse: error: ")
    for w in words:
        assert w in lines[0]


@pytest.mark.parametrize("opt", ["--csv", "--plots"])
def test_file_where_a_directory_is_expected(tmp_path, capture, opt):
    f = tmp_path / "existing.txt"
    f.write_text("keep me\n")
    r = dk(capture, opt, f)
    _one_error_line(r, opt, "is a file, not a directory")
    assert f.read_text() == "keep me\n"
    assert r.stdout == ""  # refused before the capture was read


def test_directory_below_a_file_is_refused(tmp_path, capture):
    f = tmp_path / "existing.txt"
    f.write_text("x")
    _one_error_line(dk(capture, "--csv", f / "sub"), "is a file, not a directory")


def test_json_to_a_directory(tmp_path, capture):
    d = tmp_path / "outdir"
    d.mkdir()
    r = dk(capture, "--json", d)
    _one_error_line(r, "--json", "is a directory")
    assert list(d.iterdir()) == []


def test_existing_outputs_are_replaced_whole(tmp_path, capture):
    js, csvdir, plots = tmp_path / "r.json", tmp_path / "csv", tmp_path / "plots"
    js.write_text("old")
    csvdir.mkdir()
    plots.mkdir()
    (csvdir / "ppspp-ppspp_peers.csv").write_text("old\n")
    (plots / "ppspp-throughput.png").write_text("old")
    r = dk(capture, "--only", "ppspp", "--json", js, "--csv", csvdir, "--plots", plots)
    assert r.returncode == 0, r.stderr
    res = json.loads(js.read_text())
    assert res["results"]["ppspp"]["ppspp_peers"]
    assert (csvdir / "ppspp-ppspp_peers.csv").read_text().startswith("peer,")
    assert (plots / "ppspp-throughput.png").read_bytes()[:4] == b"\x89PNG"
    for d in (tmp_path, csvdir, plots):  # no temporary name left behind
        assert not [p.name for p in d.iterdir() if p.name.startswith(".")]
    assert (csvdir / "capture-stats.csv").read_text().startswith("what,value")


def test_json_to_stdout(capture):
    r = dk(capture, "--only", "ppspp", "--json", "-")
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["analysers"]["ppspp"]["frames"] == res["capture"]["frames"] == 274


@pytest.mark.parametrize("opt, words", [
    ("addressing=bogus", ["addressing='bogus'", "chunk32"]),
    ("verify=maybe", ["verify='maybe'"]),
    ("origin=host:99999", ["origin", "99999"]),
    ("proxy=:::", ["proxy=':::'"]),
    ("interval=1e400", ["interval=", "positive number"]),
    ("interval=nan", ["interval=", "positive number"]),
    ("max-peers=1.5", ["max-peers='1.5'", "whole"]),
    ("chunk-size=1e9", ["chunk-size='1e9'", "whole"]),
])
def test_bad_option_values_are_one_line(capture, opt, words):
    r = dk(capture, "--opt", opt, "--rows", "0")
    assert r.returncode == 2, (r.returncode, r.stderr)
    lines = [ln for ln in r.stderr.strip().splitlines() if "error" in ln]
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    for w in words:
        assert w in lines[0], lines[0]


def test_closed_stdout_is_quiet(capture):
    """``deliverykit analyse CAP | head -1``: the reader left; no traceback, no error line,
    and the exit status of a process killed by SIGPIPE (141), as the other CLIs."""
    p = subprocess.Popen([PY, "-m", "deliverykit", "analyse", "--no-progress", str(capture)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout.read(20)
    p.stdout.close()
    err = p.stderr.read().decode()
    p.stderr.close()
    assert p.wait(60) == 141 and err == "", err


def test_unknown_analyser_is_a_usage_error(capture):
    r = dk(capture, "--only", "bogus")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    (line,) = [ln for ln in r.stderr.splitlines() if "error" in ln]
    assert "--only: unknown analyser 'bogus'; known: flows, corecast, m2c, ppspp, vmc" in line


def test_json_over_the_capture_is_refused(tmp_path, capture):
    cap = tmp_path / "c.pcap"
    cap.write_bytes(capture.read_bytes())
    _one_error_line(dk(cap, "--json", cap), "is the capture itself")
    assert cap.read_bytes() == capture.read_bytes()
