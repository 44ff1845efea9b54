"""The overhead experiment over several sittings (issue 18): every run appended to
``OUT/overhead.part.jsonl`` as it is measured, ``--resume`` measures only the missing
ones in the same order, another configuration or an existing part file without
``--resume`` is refused, ``--table`` reads a partial file, and the summary's whole-machine
figure leaves out runs whose idle window was busy."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from corecast.experiments import overhead as ov

ARGS = ["--quick", "--scales", "1,2", "--reps", "2", "--chunks", "1", "--no-kernel"]


def _config(**over: Any) -> dict[str, Any]:
    cfg = ov.configuration((1, 2), (12_000.0,), None, 1, 0, (ov.Lookup.TRIE,), (True,), False,
                           0.5)
    cfg.update(over)
    return cfg


def _row(rep: int, scale: int, subject: str, config: dict[str, Any], idle: float = 1.0,
         sys_us: float = 2.0, itr_us: float | None = 10.0) -> dict[str, Any]:
    """A row with the fields a measured run writes (values made up)."""
    return {"rep": rep, "scale": scale, "clients": 1429 * scale, "rate": 12_000.0,
            "subject": subject, "mode": subject.split("/")[0], "sent": 1429, "cap_rx": 1429,
            "send_pps": 12_000, "sys_busy_pct": 30.0, "idle_busy_pct": idle,
            "sys_us_per_pkt": sys_us,
            "load_avg": 0.5, "cpu_us_per_pkt": itr_us, "loss_pct": 0.0, "mappings": 200,
            "core_us_per_pkt": None if itr_us is None else 0.5, "commit": "abc", "host": "h",
            "speedups": None, "utc": "2026-11-28T00:00:00+00:00", "config": config}


def _write(path: Path, rows: list[dict[str, Any]], tail: str = "") -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + tail)


def _cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "corecast", "experiment", "overhead", *args],
                          capture_output=True, text=True, timeout=timeout, check=False)


# ------------------------------------------------------------------ the part file, no namespaces


def test_plan_is_the_interleaved_order_and_keys_name_a_row():
    subs = ov.subjects(kernel=True)
    keys = ov.plan(2, (1, 7), (12_000.0, 30_000.0), subs)
    assert len(keys) == 2 * 2 * 2 * 3 and len(set(keys)) == len(keys)
    assert keys[:4] == [(0, 1, 12_000.0, "kernel"), (0, 1, 12_000.0, "plain/trie"),
                        (0, 1, 12_000.0, "corecast/trie/hash on"), (0, 1, 30_000.0, "kernel")]
    assert keys[6][:2] == (0, 7) and keys[12][0] == 1
    assert ov.row_key(_row(1, 7, "kernel", _config())) == (1, 7, 12_000.0, "kernel")


def test_read_part_keeps_whole_lines_and_flags_a_cut_short_one(tmp_path):
    part = tmp_path / ov.PART
    rows = [_row(0, 1, "plain/trie", _config()), _row(0, 1, "corecast/trie/hash on", _config())]
    _write(part, rows, tail='{"rep": 0, "sca')
    pf = ov.read_part(str(part))
    assert pf.rows == rows and pf.torn and pf.whole == len(part.read_bytes()) - 15
    _write(part, rows)
    assert not ov.read_part(str(part)).torn
    _write(part, [rows[0]], tail="not json\n" + json.dumps(rows[1]) + "\n")
    with pytest.raises(ValueError, match="line 2: not a row"):
        ov.read_part(str(part))


def test_check_part_refuses_another_configuration_naming_the_difference(tmp_path):
    part = tmp_path / ov.PART
    _write(part, [_row(0, 1, "plain/trie", _config(chunks=3, pad=100))])
    with pytest.raises(ValueError) as e:
        ov.check_part(ov.read_part(str(part)), _config(), reps=2)
    msg = str(e.value)
    assert "line 1: another configuration" in msg
    assert "chunks 3 there, 1 here" in msg and "pad 100 there, 0 here" in msg
    assert "--chunks 3" in msg and "--pad 100" in msg  # the options that resume it
    _write(part, [_row(0, 1, "plain/trie", _config(c_path=not _config()["c_path"]))])
    with pytest.raises(ValueError, match="c_path"):
        ov.check_part(ov.read_part(str(part)), _config(), reps=2)


def test_check_part_refuses_a_repetition_beyond_reps_and_a_key_twice(tmp_path):
    part = tmp_path / ov.PART
    _write(part, [_row(0, 1, "plain/trie", _config()), _row(2, 1, "plain/trie", _config())])
    with pytest.raises(ValueError, match="repetition 3, this run has --reps 2"):
        ov.check_part(ov.read_part(str(part)), _config(), reps=2)
    assert len(ov.check_part(ov.read_part(str(part)), _config(), reps=3)) == 2
    _write(part, [_row(0, 1, "plain/trie", _config())] * 2)
    with pytest.raises(ValueError, match="line 2: .* measured twice"):
        ov.check_part(ov.read_part(str(part)), _config(), reps=2)


def test_sys_is_summarised_over_quiet_idle_windows_only(capsys):
    cfg = _config(kernel=True)
    rows = [_row(0, 1, "kernel", cfg, idle=2.0, sys_us=1.0, itr_us=None),
            _row(1, 1, "kernel", cfg, idle=60.0, sys_us=0.0, itr_us=None),
            _row(0, 1, "plain/trie", cfg, idle=3.0, sys_us=3.0),
            _row(1, 1, "plain/trie", cfg, idle=9.99, sys_us=5.0),
            _row(0, 1, "corecast/trie/hash on", cfg, idle=99.0, sys_us=0.0),
            _row(1, 1, "corecast/trie/hash on", cfg, idle=10.0, sys_us=0.0)]
    per = ov._summarise(rows, quiet_below=10.0)[0]["subjects"]
    assert per["kernel"]["sys_us_per_pkt"] == 1.0 and per["kernel"]["sys_n"] == 1
    assert per["kernel"]["sys_excluded"] == 1
    assert per["plain/trie"]["sys_us_per_pkt"] == 4.0 and per["plain/trie"]["sys_n"] == 2
    assert per["plain/trie"]["sys_over_kernel"] == 4.0
    cc = per["corecast/trie/hash on"]
    assert cc["sys_us_per_pkt"] is None and cc["sys_n"] == 0 and cc["sys_excluded"] == 2
    assert "sys_over_kernel" not in cc and cc["reps"] == 2
    # a busy kernel row leaves no ratio rather than a ratio over 0
    assert "sys_over_kernel" not in ov._summarise(rows, quiet_below=1.0)[0]["subjects"][
        "plain/trie"]
    assert ov.sources(rows, 10.0)["sys_excluded"] == 3
    ov.print_table(rows, 10.0)
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if "corecast/trie/hash on" in ln)
    assert " busy " in line and "3 of 6 runs left out" in out
    assert "commits: abc (6)" in out


def test_an_existing_part_file_is_never_overwritten_without_resume(tmp_path):
    part = tmp_path / ov.PART
    _write(part, [_row(0, 1, "plain/trie", _config())])
    before = part.read_bytes()
    r = _cli(*ARGS, "--out", str(tmp_path))
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "overhead.part.jsonl exists (a stopped run's rows): resume it (--resume)" in r.stderr
    assert "never overwritten" in r.stderr
    assert part.read_bytes() == before and not (tmp_path / "overhead.json").exists()


def test_resume_with_another_configuration_is_refused(tmp_path):
    part = tmp_path / ov.PART
    _write(part, [_row(0, 1, "plain/trie", _config())])
    before = part.read_bytes()
    r = _cli(*ARGS, "--pad", "50", "--out", str(tmp_path), "--resume")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "another configuration (pad 0 there, 50 here)" in r.stderr.splitlines()[-1]
    assert part.read_bytes() == before and not (tmp_path / "overhead.json").exists()


def test_table_reads_a_partial_part_file(tmp_path):
    part = tmp_path / ov.PART
    _write(part, [_row(0, 1, "plain/trie", _config()), _row(1, 1, "plain/trie", _config()),
                  _row(0, 1, "corecast/trie/hash on", _config())], tail='{"rep": 1')
    r = _cli("--table", str(part))
    assert r.returncode == 0, r.stderr
    assert "configuration: --quick --scales 1,2" in r.stdout and "--no-kernel" in r.stdout
    assert "3 runs;" in r.stdout and "cut-short line" in r.stderr
    cells = {ln.split()[2]: ln.split() for ln in r.stdout.splitlines()
             if ln.strip().startswith("1 ") and "/" in ln}
    assert cells["plain/trie"][3] == "2" and cells["corecast/trie/hash"][4] == "1"
    assert _cli("--table", str(tmp_path / "nope")).returncode == 2


def test_resume_drops_a_cut_short_line_and_finishes_a_complete_file(tmp_path):
    """Every run of the configuration in the part file, then a line a crash cut short:
    ``--resume`` drops that line, measures nothing, and writes overhead.json."""
    part = tmp_path / ov.PART
    rows = [_row(rep, scale, subject, _config()) for rep, scale, _, subject
            in ov.plan(2, (1, 2), (12_000.0,), ov.subjects())]
    _write(part, rows, tail='{"rep": 1, "scale": 2')
    r = _cli(*ARGS, "--out", str(tmp_path), "--resume")
    assert r.returncode == 0, r.stderr
    assert "ended in a cut-short line" in r.stderr and "8 of 8 runs already in" in r.stderr
    assert "(0 this sitting, 8 from the part file)" in r.stderr
    assert [json.loads(ln) for ln in part.read_text().splitlines()] == rows
    assert part.read_text().endswith("\n")
    result = json.loads((tmp_path / "overhead.json").read_text())
    assert result["rows"] == rows and result["new_rows"] == 0
    assert result["sources"]["commits"] == {"abc": 8}
    assert (tmp_path / "overhead.png").stat().st_size > 0


# ------------------------------------------------------------------ real runs, real signals


def _stop_after(out: Path, rows: int, sig: int, *extra: str,
                group: bool = False) -> subprocess.CompletedProcess[str]:
    """Start the experiment, send ``sig`` once its part file holds ``rows`` rows: to the
    command alone (``kill PID``), or with ``group`` to its whole process group, the ITR and
    namespace helpers it forked included, as Ctrl-C at a terminal does."""
    part = out / ov.PART
    p = subprocess.Popen([sys.executable, "-m", "corecast", "experiment", "overhead", *ARGS,
                          "--out", str(out), *extra], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True,
                         # a foreground Ctrl-C target has SIGINT at its default
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # noqa: PLW1509
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and p.poll() is None:
            if part.exists() and part.read_bytes().count(b"\n") >= rows:
                break
            time.sleep(0.05)
        assert p.poll() is None, p.communicate()[1]
        if group:
            os.killpg(p.pid, sig)
        else:
            p.send_signal(sig)
        o, e = p.communicate(timeout=180)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    leftover = [ns for ns in os.listdir("/run/netns") if ns.startswith(f"ccovh-{p.pid}-")] \
        if os.path.isdir("/run/netns") else []
    assert not leftover, f"the stopped run left its namespaces: {leftover}"
    return subprocess.CompletedProcess(p.args, p.returncode, o, e)


@pytest.mark.root
@pytest.mark.slow
def test_stopped_twice_then_resumed_gives_the_rows_of_one_whole_run(tmp_path):
    out = tmp_path / "sittings"
    part = out / ov.PART
    first = _stop_after(out, 3, signal.SIGINT, group=True)
    assert first.returncode == 130 and "Traceback" not in first.stderr, first.stderr
    kept = part.read_bytes().count(b"\n")
    assert 3 <= kept < 8 and f"stopped; {kept} of 8 runs in" in first.stderr
    assert not (out / "overhead.json").exists() and not (out / "overhead.png").exists()

    table = _cli("--table", str(part))
    assert table.returncode == 0 and f"{kept} runs;" in table.stdout, table.stderr

    second = _stop_after(out, kept + 1, signal.SIGTERM, "--resume")
    assert second.returncode == 143 and "Traceback" not in second.stderr, second.stderr
    assert f"{kept} of 8 runs already in" in second.stderr
    again = part.read_bytes().count(b"\n")
    assert kept < again and not (out / "overhead.json").exists()

    done = _cli(*ARGS, "--out", str(out), "--resume", timeout=300)
    assert done.returncode == 0, done.stderr
    assert f"({8 - again} this sitting, {again} from the part file)" in done.stderr
    result = json.loads((out / "overhead.json").read_text())
    assert (out / "overhead.png").stat().st_size > 0 and part.exists()  # the part file stays
    lines = [json.loads(ln) for ln in part.read_text().splitlines()]
    assert [ov.row_key(r) for r in lines] == [ov.row_key(r) for r in result["rows"]]
    assert result["metadata"]["params"]["resumed_rows"] == again

    whole = ov.run(quick=True, scales=(1, 2), reps=2, chunks=1, kernel=False)
    assert [ov.row_key(r) for r in result["rows"]] == [ov.row_key(r) for r in whole["rows"]]
    assert set(result["rows"][0]) == set(whole["rows"][0])
    for r in result["rows"]:
        assert r["config"] == whole["rows"][0]["config"] and r["commit"] == lines[0]["commit"]
        assert r["itr_in"] > 0 and r["loss_pct"] <= 100
    assert result["sources"]["rows"] == 8 and sum(result["sources"]["commits"].values()) == 8
