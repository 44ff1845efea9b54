"""``corecast``: wrong arguments and unusable files are one clear line and a non-zero exit,
never a traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest


def corecast(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "corecast", *args], capture_output=True,
                          text=True, timeout=timeout)


ITR = ("itr", "--rloc", "127.0.0.1", "--cc-range", "10.255.0.0/16", "--duration", "1")


@pytest.mark.parametrize("args, message", [
    (("mapserver", "--addr", "127.0.0.1", "--site", "a:10.0.0.0/8:1:k", "--port", "70000"),
     "port 70000 is outside"),
    (("mapserver", "--addr", "127.0.0.1", "--site", "bogus"), "expected NAME:PREFIX"),
    (("mapserver", "--addr", "127.0.0.1", "--site", "a:notaprefix:1:k"),
     "not an IPv4 or IPv6 prefix"),
    ((*ITR, "--inside", "127.0.0.1:9", "--map-cache", "/nonexistent"), "no such file"),
    (("plan", "--k", "0"), "positive integer"),
    (("plan", "--D", "0"), "positive integer"),
    (("plan", "--C", "-1"), "positive number"),
    (("deploy", "--chunks", "-3"), "positive integer"),
    (("experiment", "bogus"), "unknown experiment 'bogus'"),
    # RFC 9302 sec. 5: 0 is the Null Map-Version; 4096 would wrap to it
    ((*ITR, "--inside", "127.0.0.1:9", "--data-port", "0", "--map-version", "4096"),
     "outside 1..4095"),
    ((*ITR, "--inside", "127.0.0.1:9", "--data-port", "0", "--map-version", "0"),
     "outside 1..4095"),
    (("etr", "--rloc", "127.0.0.1", "--cc-range", "10.255.0.0/16", "--map-version", "5000"),
     "outside 1..4095"),
])
def test_bad_arguments_are_usage_errors(args, message):
    r = corecast(*args)
    assert r.returncode == 2, r.stderr
    assert message in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("args, message", [
    (("mapserver", "--addr", "999.1.1.1", "--site", "a:10.0.0.0/8:1:k", "--duration", "1"),
     "corecast: error: "),
    (("etr", "--rloc", "127.0.0.1", "--prefix", "10.1.0.0/16", "--trust-rloc", "127.0.0.2",
      "--cc-range", "notaprefix", "--duration", "1"),
     "does not appear to be an IPv4 or IPv6 network"),
    ((*ITR, "--inside", "nohost"), "expected HOST:PORT"),
    (("experiment", "trace", "--clients", "/nonexistent"), "No such file or directory"),
])
def test_refused_values_are_one_line(args, message):
    r = corecast(*args)
    assert r.returncode == 1, r.stderr
    assert r.stderr.startswith("corecast: error: ") and message in r.stderr
    assert "Traceback" not in r.stderr


def test_experiment_lists_and_hands_over_help():
    r = corecast("experiment")
    assert r.returncode == 2 and "fig2-testbed" in r.stdout and "trace" in r.stdout
    r = corecast("experiment", "trace", "--help")
    assert r.returncode == 0 and r.stdout.startswith("usage: corecast experiment trace")
