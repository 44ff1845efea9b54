"""``vmc proxy`` exposes the proxy's limits: --head-timeout, --body-timeout, --no-upstream-keepalive
(each reaches ProxyConfig and acts on a live proxy process)."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import urllib.request

import pytest

from vmc.cli import build_parser, proxy_config

PY = [sys.executable, "-m", "vmc"]


def _start(args: list[str]) -> tuple[subprocess.Popen, str]:
    p = subprocess.Popen(PY + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline() if p.stdout else ""
    m = re.search(r"http://([0-9.]+:\d+)/", line)
    if not m:
        p.kill()
        p.wait(10)
        raise AssertionError(f"no address in {line!r}")
    return p, m.group(1)


def _stop(p: subprocess.Popen) -> str:
    p.send_signal(signal.SIGTERM)
    try:
        out, _ = p.communicate(timeout=20)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(10)
    return out


def _hostport(addr: str) -> tuple[str, int]:
    h, port = addr.rsplit(":", 1)
    return h, int(port)


def test_flags_reach_the_config() -> None:
    a = build_parser().parse_args(["proxy", "--default", "127.0.0.1:9", "--head-timeout", "2.5",
                                   "--body-timeout", "7", "--no-upstream-keepalive"])
    cfg = proxy_config(a)
    assert (cfg.head_timeout, cfg.body_timeout, cfg.upstream_keepalive) == (2.5, 7.0, False)
    d = proxy_config(build_parser().parse_args(["proxy", "--default", "127.0.0.1:9"]))
    assert (d.head_timeout, d.body_timeout, d.upstream_keepalive) == (10.0, 60.0, True)
    assert (d.disk_budget, d.disk_dir) == (1 << 30, None)
    a = build_parser().parse_args(["proxy", "--default", "127.0.0.1:9", "--disk-budget", "0",
                                   "--disk-dir", "/"])
    assert (proxy_config(a).disk_budget, proxy_config(a).disk_dir) == (0, "/")


def test_bad_disk_dir_is_a_usage_error() -> None:
    r = subprocess.run(PY + ["proxy", "--default", "127.0.0.1:9", "--disk-dir", "/nonexistent/x"],
                       capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 2 and "no such directory" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("flag", ["--head-timeout", "--body-timeout"])
def test_bad_timeouts_are_usage_errors(flag: str) -> None:
    r = subprocess.run(PY + ["proxy", "--default", "127.0.0.1:9", flag, "0"], capture_output=True,
                       text=True, timeout=60, check=False)
    assert r.returncode == 2 and "positive number" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("flag, data", [
    ("--head-timeout", b"GET /x HTTP/1.1\r\nHost: a\r\n"),  # the head never ends
    # a short body
    ("--body-timeout", b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\nabc"),
])
def test_timeout_flags_answer_408(flag: str, data: bytes) -> None:
    p, addr = _start(["proxy", "--listen", "127.0.0.1:0", "--default", "127.0.0.1:9",
                      "--loop", "asyncio", flag, "0.3"])
    try:
        with socket.create_connection(_hostport(addr), timeout=30) as s:
            s.sendall(data)  # then silence, connection kept open: only the flag's deadline ends it
            got = b""
            while chunk := s.recv(4096):
                got += chunk
        assert got.startswith(b"HTTP/1.1 408"), got
    finally:
        _stop(p)


def test_no_upstream_keepalive_opens_a_connection_per_request() -> None:
    o, origin = _start(["origin", "--listen", "127.0.0.1:0", "--loop", "asyncio"])
    counts = {}
    try:
        for flags in ([], ["--no-upstream-keepalive"]):
            p, addr = _start(["proxy", "--listen", "127.0.0.1:0", "--default", origin,
                              "--loop", "asyncio", *flags])
            try:
                for i in range(3):
                    urllib.request.urlopen(f"http://{addr}/k{i}?size=1000", timeout=10).read()
            finally:
                snap = json.loads(_stop(p).strip().splitlines()[-1])
            counts[bool(flags)] = snap
    finally:
        o.send_signal(signal.SIGTERM)
        o.communicate(timeout=20)
    assert counts[False]["upstream_connections_reused"] >= 2
    # no pool: each request its own connection
    assert "upstream_connections_opened" not in counts[True]
    assert counts[True]["origin_requests"] == 3
