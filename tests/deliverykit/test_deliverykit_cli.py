"""The ``deliverykit`` command: subcommands reach their own parsers; bad input is one clear line."""

from __future__ import annotations

import subprocess
import sys

import pytest


def dk(*args: str, input_: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "deliverykit", *args], capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize("args", [("analyse", "--help"), ("analyse", "-h"), ("demo", "--help")])
def test_help_reaches_the_subcommand(args):
    r = dk(*args)
    assert r.returncode == 0, r.stderr
    assert f"usage: deliverykit {args[0]}" in r.stdout


def test_unknown_demo_system_names_the_known_ones():
    r = dk("demo", "bogus")
    assert r.returncode == 2
    assert "unknown system 'bogus'" in r.stderr and "corecast" in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("args, message", [
    (("--opt", "nokv"), "--opt takes KEY=VALUE"),
    (("--json", "/nonexistent-dir/out.json"), "--json: no such directory"),
    (("--only", "vmc", "--opt", "proxy=garbage"), "--opt:"),
    (("--only", "corecast", "--opt", "as-table=/nonexistent.csv"), "No such file"),
    (("--only", "m2c", "--opt", "interval=0"), "interval='0': needs a positive number"),
    (("--only", "ppspp", "--opt", "interval=-1"), "interval='-1': needs a positive number"),
    (("--only", "vmc", "--opt", "max-connections=lots"), "needs a positive number"),
    (("--only", "ppspp", "--opt", "ppspp-port=0"), "needs ports 1-65535"),
    (("--only", "m2c", "--opt", "ppspp-port=6778"), "no analyser run here takes ppspp-port"),
    (("--opt", "intervall=1"), "no analyser run here takes intervall"),
])
def test_analyse_refuses_bad_options_before_reading(tmp_path, args, message):
    cap = tmp_path / "empty.pcap"  # a valid pcap header, no records
    cap.write_bytes(bytes.fromhex("d4c3b2a1020004000000000000000000ffff000001000000"))
    r = dk("analyse", str(cap), *args)
    assert r.returncode == 2
    assert message in r.stderr
    assert "Traceback" not in r.stderr


def test_analyse_of_an_empty_capture_says_so(tmp_path):
    cap = tmp_path / "empty.pcap"
    cap.write_bytes(bytes.fromhex("d4c3b2a1020004000000000000000000ffff000001000000"))
    r = dk("analyse", str(cap), "--only", "flows")
    assert r.returncode == 0, r.stderr
    assert "flows: flows: no rows" in r.stdout
    assert "records 0" in r.stdout


def test_info_survives_a_closed_pipe():
    r = subprocess.run(f"{sys.executable} -m deliverykit info | head -c 5", shell=True,
                       capture_output=True, text=True, timeout=60)
    assert "Traceback" not in r.stderr and "BrokenPipe" not in r.stderr
