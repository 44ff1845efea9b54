"""``ppspp``: wrong arguments, unusable paths and busy ports are one clear line and a non-zero
exit, never a traceback; a download that hears nothing says so; live-view --bytes is exact."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest


def ppspp(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "swift", *args], capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture
def content(tmp_path):
    f = tmp_path / "c.bin"
    f.write_bytes(bytes(range(256)) * 200)
    return f


@pytest.mark.parametrize("args, message", [
    (("seed", "/nonexistent"), "no such file"),
    (("seed", "{f}", "--port", "70000"), "port 70000 is outside"),
    (("seed", "{f}", "--chunk-size", "0"), "positive integer"),
    (("seed", "{f}", "--duration", "-1"), "zero or a positive number"),
    (("hash", "/nonexistent"), "no such file"),
    (("download", "zz", "--peer", "127.0.0.1:1", "-o", "{tmp}/x"), "not hexadecimal"),
    (("download", "00", "--peer", "127.0.0.1:99999", "-o", "{tmp}/x"), "port 99999 is outside"),
    (("download", "00", "--peer", "127.0.0.1:1", "-o", "{tmp}"), "is a directory"),
    (("download", "00", "--peer", "127.0.0.1:1", "-o", "/nonexistent/x"), "no such directory"),
    (("tracker", "nothex"), "not hexadecimal"),
    (("live-view", "nothex", "--peer", "127.0.0.1:1"), "not hexadecimal"),
    (("live-source", "--input", "/nonexistent", "--pex-ca", "/nonexistent"), "no such file"),
    (("experiment", "bogus"), "unknown experiment 'bogus'"),
])
def test_bad_arguments_are_usage_errors(content, tmp_path, args, message):
    r = ppspp(*[a.format(f=content, tmp=tmp_path) for a in args])
    assert r.returncode == 2, r.stderr
    assert message in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("args, message", [
    (("download", "0011223344", "--peer", "127.0.0.1:1", "-o", "{tmp}/x", "--timeout", "2"),
     "root hash size does not match"),
    (("live-view", "00", "--peer", "127.0.0.1:1", "--duration", "1"), "not supported"),
])
def test_refused_values_are_one_line(tmp_path, args, message):
    r = ppspp(*[a.format(tmp=tmp_path) for a in args])
    assert r.returncode == 1, r.stderr
    assert r.stderr.startswith("ppspp: error: ") and message in r.stderr
    assert "Traceback" not in r.stderr


def test_busy_port_is_one_line(content):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("0.0.0.0", 0))
        port = s.getsockname()[1]
        r = ppspp("seed", str(content), "--port", str(port), "--duration", "1")
    assert r.returncode == 1
    assert r.stderr.strip() == f"ppspp: error: Address already in use: UDP 0.0.0.0:{port}"


@pytest.mark.slow
def test_a_silent_peer_gets_a_hint_then_a_timeout(tmp_path):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as silent:  # bound, never answers
        silent.bind(("127.0.0.1", 0))
        r = ppspp("download", "11" * 32, "--peer", f"127.0.0.1:{silent.getsockname()[1]}",
                  "-o", str(tmp_path / "x"), "--timeout", "3", "-q", timeout=60)
    assert r.returncode == 1
    assert "nothing from 127.0.0.1:" in r.stderr and "swarm ID" in r.stderr
    assert "download incomplete" in r.stderr


def test_live_view_bytes_is_exact(tmp_path, content):
    src = subprocess.Popen([sys.executable, "-m", "swift", "live-source", "--input", str(content),
                            "--port", "0", "--host", "127.0.0.1", "--rate", "200000",
                            "--linger", "20"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        swarm = src.stdout.readline().strip()
        port = None
        for _ in range(50):
            line = src.stderr.readline()
            if "live source on" in line:
                port = line.rsplit(":", 1)[1].strip()
                break
        assert port, "live source did not report its port"
        out = tmp_path / "view.bin"
        r = ppspp("live-view", swarm, "--peer", f"127.0.0.1:{port}", "-o", str(out),
                  "--bytes", "10000", "--duration", "20", timeout=60)
    finally:
        src.kill()
        src.wait(10)
    assert r.returncode == 0, r.stderr
    data = out.read_bytes()
    assert len(data) == 10000
    whole = content.read_bytes()
    assert data in whole  # a live viewer starts somewhere in the stream, in order
