"""``vmc``: wrong arguments, unusable paths and busy ports are one clear line and a non-zero
exit, never a traceback."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest


def vmc(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vmc", *args], capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.parametrize("args, message", [
    (("origin", "--listen", "127.0.0.1:70000"), "port 70000 is outside 0-65535"),
    (("origin", "--listen", "bad"), "expected HOST:PORT"),
    (("origin", "--rate", "-5"), "must be zero or a positive number"),
    (("proxy", "--upstream", "127.0.0.1:99999"), "port 99999 is outside"),
    (("proxy", "--default", "127.0.0.1:9", "--status-allow", "notacidr"),
     "not an IPv4 or IPv6 prefix"),
    (("proxy", "--default", "127.0.0.1:9", "--max-connections", "0"), "positive integer"),
    (("proxy", "--default", "127.0.0.1:9", "--buffer-budget", "lots"), "bad size"),
    (("proxy", "--default", "127.0.0.1:9", "--client-write-timeout", "-1"),
     "zero or a positive number"),
    (("get", "http://127.0.0.1:9/", "--proxy", "127.0.0.1:70000"), "port 70000 is outside"),
    (("get", "http://127.0.0.1:9/", "-o", "/nonexistent/c.bin"), "no such directory"),
    (("replay", "/nonexistent.log"), "no such file"),
    (("workload", "-o", "/nonexistent/w.log"), "no such directory"),
    (("workload", "-n", "0"), "positive integer"),
    (("experiment", "bogus"), "unknown experiment 'bogus'"),
])
def test_bad_arguments_are_usage_errors(args, message):
    r = vmc(*args)
    assert r.returncode == 2, r.stderr
    assert message in r.stderr
    assert "Traceback" not in r.stderr


def test_busy_port_is_one_line():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        for role in (("origin",), ("proxy", "--default", "127.0.0.1:9")):
            r = vmc(*role, "--listen", f"127.0.0.1:{port}", "--loop", "asyncio", timeout=30)
            assert r.returncode == 1, r.stderr
            assert r.stderr.startswith("vmc: error: ") and "in use" in r.stderr, r.stderr
            assert "Traceback" not in r.stderr


def test_experiment_lists_and_hands_over_help():
    r = vmc("experiment")
    assert r.returncode == 2 and "tables" in r.stdout and "testbed" in r.stdout
    r = vmc("experiment", "tables", "--help")
    assert r.returncode == 0 and r.stdout.startswith("usage: vmc experiment tables")
