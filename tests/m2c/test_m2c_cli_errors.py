"""``m2c``: wrong arguments and unusable paths are one clear line and a non-zero exit, never a
traceback; a sender whose every packet is dropped says so and fails."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def m2c(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "m2c", *args], capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture
def small(tmp_path):
    f = tmp_path / "f.bin"
    f.write_bytes(bytes(range(256)) * 64)
    return f


@pytest.mark.parametrize("args, message", [
    (("send", "/nonexistent"), "no such file"),
    (("send", "{f}", "--port", "70000"), "outside 0-65535"),
    (("send", "{f}", "--port", "65530"), "leaves no room"),
    (("send", "{f}", "--group", "10.0.0.1"), "not an IPv4 multicast address"),
    (("send", "{f}", "--group", "notanip"), "not an IPv4 or IPv6 address"),
    (("send", "{f}", "--min-rate", "1000", "--max-rate", "10"), "must be below --max-rate"),
    (("send", "{f}", "--min-rate", "0"), "positive"),
    (("send", "{f}", "--k", "0"), "positive"),
    (("send", "{f}", "--symbol-size", "0"), "positive"),
    (("send", "{f}", "--symbol-size", "70000"), "does not fit"),
    (("send", "{f}", "--interface", "999.9.9.9"), "not an IPv4 or IPv6 address"),
    (("send", "{f}", "--sdp", "/nonexistent/x.json"), "no such directory"),
    (("receive", "/nonexistent.json", "-o", "{tmp}/out"), "cannot read the session description"),
    (("receive", "{f}", "-o", "/nonexistent/out"), "no such directory"),
    (("experiment", "bogus"), "unknown experiment 'bogus'"),
])
def test_bad_input_is_one_clear_line(small, tmp_path, args, message):
    args = [a.format(f=small, tmp=tmp_path) for a in args]
    r = m2c(*args)
    assert r.returncode == 2, r.stderr
    assert message in r.stderr
    assert "Traceback" not in r.stderr


def test_experiment_lists_and_hands_over_help():
    r = m2c("experiment")
    assert r.returncode == 2 and "hetero" in r.stdout and "fig5" in r.stdout
    r = m2c("experiment", "fig5", "--help")
    assert r.returncode == 0 and r.stdout.startswith("usage: m2c experiment fig5")


def test_sender_that_drops_everything_fails(small, tmp_path):
    # 192.0.2.1 (TEST-NET-1) is nobody's interface here: IP_MULTICAST_IF refuses it or every
    # send fails; either way the command must not report success.
    r = m2c("send", str(small), "--interface", "192.0.2.1", "--sdp", str(tmp_path / "s.json"),
            "--duration", "1")
    assert r.returncode != 0
    assert "Traceback" not in r.stderr
    assert "error" in r.stderr


def test_receive_prints_a_one_line_summary(small, tmp_path):
    sdp = tmp_path / "s.json"
    sender = subprocess.Popen([sys.executable, "-m", "m2c", "send", str(small), "--sdp", str(sdp),
                               "--port", "47700", "--duration", "30"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(100):
            if sdp.exists() and sdp.stat().st_size:
                break
            subprocess.run(["sleep", "0.1"], check=True)
        r = m2c("receive", str(sdp), "-o", str(tmp_path / "out"), "-q", "--timeout", "30")
    finally:
        sender.kill()
        sender.wait(10)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out").read_bytes() == small.read_bytes()
    summary = [ln for ln in r.stderr.splitlines() if ln.startswith("m2c receive:")]
    assert len(summary) == 1 and "ok, SHA-256 verified" in summary[0]
    assert json.loads(r.stdout)["ok"] is True
