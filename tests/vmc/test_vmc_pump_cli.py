"""``vmc proxy --engine core``: the proxy as the thin pump over the sans-IO sharing core
(issue 19 item 2), run as a user runs it: a real origin on loopback, the CLI as a subprocess,
plain HTTP clients. It shares (the second request of an object is served without a second
origin copy), is not an open proxy (403 for an upstream not allowed), and keeps the CLI's
signal contract (130 / 143, one summary line on stderr, the final counters as JSON on stdout)."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request

import pytest

from vmc.aio.origin import Origin, expected

PY = [sys.executable, "-m", "vmc"]


class _Origin:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.origin = asyncio.run_coroutine_threadsafe(Origin().start(), self.loop).result(10)

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.origin.close(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()


def _as_foreground() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _get(proxy: str, url: str) -> tuple[int, bytes]:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": f"http://{proxy}"}))
    try:
        with opener.open(url, timeout=20) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


@pytest.mark.parametrize("sig, code, word", [(signal.SIGINT, 130, "interrupted"),
                                             (signal.SIGTERM, 143, "terminated")])
def test_proxy_engine_core_shares_refuses_and_stops_with_counters(
    sig: int, code: int, word: str
) -> None:
    o = _Origin()
    p = subprocess.Popen(
        PY + ["proxy", "--engine", "core", "--listen", "127.0.0.1:0", "--upstream",
              o.origin.authority, "--loop", "asyncio"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_as_foreground)
    try:
        line = p.stdout.readline() if p.stdout else ""
        m = re.search(r"http://([0-9.]+:\d+)/", line)
        assert m, line
        addr = m.group(1)
        url = f"http://{o.origin.authority}/core.bin?size=300000"
        for _ in range(2):
            status, body = _get(addr, url)
            assert status == 200 and body == expected("/core.bin", 300_000)
        assert o.origin.stats.body_bytes == 300_000  # one origin copy: the second came from disk
        status, body = _get(addr, "http://127.0.0.1:9/x")
        assert status == 403 and b"upstream-not-allowed" in body
        with urllib.request.urlopen(f"http://{addr}/_vmc/status?recent=10", timeout=10) as r:
            live = json.loads(r.read())  # answered by the core itself, to a loopback peer
        assert live["engine"] == "core" and len(live["recent"]) == 2
        p.send_signal(sig)
        out, err = p.communicate(timeout=20)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(10)
        o.close()
    assert p.returncode == code, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"vmc proxy {word}:"), err
    final = json.loads(out.strip().splitlines()[-1])
    assert final["requests"] == 2 and final["sessions"] == 1 and final["joins"] == 1
    assert final["refused"] == {"upstream-not-allowed": 1}
    assert final["engine"] == "core"
