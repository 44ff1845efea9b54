"""The CLI signal contract for ``vmc origin`` and ``vmc proxy`` (issue 13 item 16): Ctrl-C and
SIGTERM stop cleanly, print the same final counters either way, and exit 130 / 143."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import urllib.request

import pytest

PY = [sys.executable, "-m", "vmc"]


def _as_foreground() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start(args: list[str]) -> tuple[subprocess.Popen, str]:
    p = subprocess.Popen(PY + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=_as_foreground)
    line = p.stdout.readline() if p.stdout else ""
    m = re.search(r"http://([0-9.]+:\d+)/", line)
    if not m:
        p.kill()
        p.wait(10)
        raise AssertionError(f"no address in {line!r}")
    return p, m.group(1)


def _stop(p: subprocess.Popen, sig: int) -> tuple[int, str]:
    p.send_signal(sig)
    try:
        _, err = p.communicate(timeout=20)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(10)
    return p.returncode, err


@pytest.mark.parametrize("sig, code, word", [(signal.SIGINT, 130, "interrupted"),
                                             (signal.SIGTERM, 143, "terminated")])
def test_origin_stops_with_counters(sig: int, code: int, word: str) -> None:
    p, addr = _start(["origin", "--listen", "127.0.0.1:0", "--loop", "asyncio"])
    urllib.request.urlopen(f"http://{addr}/c?size=1000", timeout=10).read()
    rc, err = _stop(p, sig)
    assert rc == code, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"vmc origin {word}:"), err
    assert "1 requests" in lines[0] and "1000 body bytes" in lines[0], err


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_proxy_exit_code_follows_the_signal(sig: int, code: int) -> None:
    p, addr = _start(["proxy", "--listen", "127.0.0.1:0", "--default", "127.0.0.1:9",
                      "--loop", "asyncio"])
    # once it answers, its loop (and its Stopper) runs
    urllib.request.urlopen(f"http://{addr}/_vmc/status", timeout=10).read()
    rc, err = _stop(p, sig)
    assert rc == code, err
    assert "Traceback" not in err and "requests" in err
