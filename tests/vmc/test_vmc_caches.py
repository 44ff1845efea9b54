"""The bench's anchors are real and honest: Varnish and Squid share one in-flight origin fetch.

Checked by the origin's own byte count (one copy for three staggered curl clients),
plus each cache's answer to a Range request on the object while it is still in
flight (the issue reports a full 200 from Squid) and a clean stop (no process left).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

from vmc.aio.origin import Origin, expected
from vmc.caches import Squid, Varnish


@pytest.fixture
def origin():
    loop = asyncio.new_event_loop()
    t = threading.Thread(target=loop.run_forever, daemon=True)
    t.start()
    o = asyncio.run_coroutine_threadsafe(Origin(rate=2_000_000).start(), loop).result(10)
    yield o
    asyncio.run_coroutine_threadsafe(o.close(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    t.join(5)
    loop.close()


def _curl(url: str, out: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(["curl", "-sS", "-o", str(out), "-w", "%{http_code} %{size_download}",
                             *extra, url],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _done(p: subprocess.Popen) -> tuple[int, str]:
    out, _ = p.communicate(timeout=60)
    return p.returncode, out.decode()


@pytest.mark.slow
@pytest.mark.tool("curl")
@pytest.mark.parametrize("kind", [pytest.param("varnish", marks=pytest.mark.tool("varnishd")),
                                  pytest.param("squid", marks=pytest.mark.tool("squid"))])
def test_cache_shares_one_in_flight_fetch(origin, tmp_path: Path, kind: str) -> None:
    size = 2_000_000
    cache = (Varnish.accelerator(origin.authority) if kind == "varnish"
             else Squid.accelerator(origin.authority))
    with cache:
        before = origin.stats.body_bytes
        url = f"http://{cache.authority}/anchor.bin?size={size}"
        procs = [_curl(url, tmp_path / "c0")]
        time.sleep(0.3)
        procs.append(_curl(url, tmp_path / "c1"))
        time.sleep(0.2)
        rng = _curl(url, tmp_path / "r", "-r", "1000-1999")
        time.sleep(0.1)
        procs.append(_curl(url, tmp_path / "c2"))
        results = [_done(p) for p in procs]
        rng_rc, rng_out = _done(rng)
        # It really caches the object: once the fetch is over, a new request costs the
        # origin nothing.
        fetched = origin.stats.body_bytes
        assert _done(_curl(url, tmp_path / "c3")) == (0, f"200 {size}")
        assert origin.stats.body_bytes == fetched
        pid = cache.pid
    assert results == [(0, f"200 {size}")] * 3
    body = expected("/anchor.bin", size)
    assert all((tmp_path / f"c{i}").read_bytes() == body for i in range(3))
    # One copy left the origin for all of them (a little slack for read-ahead of a probe).
    assert size <= origin.stats.body_bytes - before < 1.1 * size
    assert rng_rc == 0
    if kind == "varnish":
        assert rng_out == "206 1000" and (tmp_path / "r").read_bytes() == body[1000:2000]
    else:
        # Squid 5.7 answers a Range on an object still being fetched with a 200 of the whole
        # length whose body starts at the range's first byte (a corrupt 200: the bench and
        # docs/vmc.md report it). Either of the correct answers would do too: a 206 with exactly
        # the range, or a 200 with exactly the whole body (RFC 9110 sec. 14.2: Range may be
        # ignored).
        got = (tmp_path / "r").read_bytes()
        if rng_out == "206 1000":
            assert got == body[1000:2000]
        else:
            assert rng_out == f"200 {size}" and len(got) == size
            assert got == body or (got[:1000] == body[1000:2000] and got != body), \
                "neither correct nor the known defect"
    assert pid is not None and not os.path.exists(f"/proc/{pid}")  # stopped and reaped
    assert not cache.dir.exists()
