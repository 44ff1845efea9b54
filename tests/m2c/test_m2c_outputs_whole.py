"""Outputs appear under their final name only when complete (issue 13: "an output
file appears under its final name only when complete and verified"): the session
description of ``m2c send --sdp`` (receivers read it while the sender runs),
``m2c receive --json`` and the experiments' CSV and JSON files."""

from __future__ import annotations

import os
import resource
import signal
import stat
import subprocess
import sys

import pytest

from deliverykit.outputs import replace_when_done, write_when_done
from m2c.experiments import fig5


def parts(d) -> list[str]:
    return sorted(n for n in os.listdir(d) if n.endswith(".part"))


def _limit_file_size() -> None:
    """preexec_fn: files of at most 200 bytes (a write beyond fails with EFBIG)."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (200, 200))


def test_a_session_description_that_cannot_be_written_whole_never_appears(tmp_path):
    src = tmp_path / "f.bin"
    src.write_bytes(os.urandom(5000))
    sdp = tmp_path / "s.json"
    r = subprocess.run([sys.executable, "-m", "m2c", "send", str(src), "--sdp", str(sdp),
                        "--duration", "1", "--group", "239.186.1.1", "--port", "41500"],
                       capture_output=True, text=True, timeout=60, preexec_fn=_limit_file_size)
    assert r.returncode == 1, r.stderr
    assert "File too large" in r.stderr and "Traceback" not in r.stderr
    assert not sdp.exists()  # was: 200 bytes of JSON a receiver would choke on
    assert parts(tmp_path) == []


def test_fig5_outputs_are_whole_or_absent(tmp_path):
    rows = [{"run": 0, "flow": "M2C_ft", "ok": True, "time": 1.0}]
    fig5.write_outputs(str(tmp_path), rows, [], {"experiment": "fig5"})
    before = (tmp_path / "fig5.json").read_bytes()
    bad = [{**rows[0], "trace": {1, 2}}]  # not JSON: json.dump fails half-way
    with pytest.raises(TypeError):
        fig5.write_outputs(str(tmp_path), bad, [], {"experiment": "fig5"})
    assert (tmp_path / "fig5.json").read_bytes() == before  # was: a cut file
    assert parts(tmp_path) == []


def test_replace_when_done_keeps_devices_links_and_modes(tmp_path):
    write_when_done("/dev/null", "x")  # written into, never replaced
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    target = tmp_path / "t.json"
    target.write_text("old")
    os.chmod(target, 0o600)
    link = tmp_path / "l.json"
    link.symlink_to(target)
    write_when_done(link, "new")
    assert link.is_symlink() and target.read_text() == "new"
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o600
    with pytest.raises(RuntimeError), replace_when_done(tmp_path / "n.json") as f:
        f.write("half")
        raise RuntimeError("fails before the end")
    assert not (tmp_path / "n.json").exists() and parts(tmp_path) == []


@pytest.mark.parametrize("mod, args", [
    ("dupsim", ["--quick", "--json", "/nonexistent/x.json"]),
    ("hetero", ["--quick", "--json", "/nonexistent/x.json"]),
    ("fig5", ["--quick", "--json", "/nonexistent/x.json"]),
    ("fig5", ["--quick", "--out", "/proc/version/results"]),
])
def test_experiment_output_paths_are_checked_before_the_run(mod, args):
    """An unwritable --json or --out is one line and exit 2 while parsing, not a
    traceback after the whole experiment ran (the run's results lost)."""
    r = subprocess.run([sys.executable, "-m", f"m2c.experiments.{mod}", *args],
                       capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines()[-1].startswith("usage:") is False
    assert r.stdout == ""  # nothing ran
