"""End-to-end VMC demo on loopback: a paced origin, the proxy, staggered clients (< 20 s, no root).

Half the clients are VMC-aware (:func:`vmc.client.fetch`: they accept a 206 from
the live edge and fetch the missed prefix by Range), the other half are
unmodified (``curl`` when installed, else our client with ``vmc=False``): the
proxy patches their prefix itself and they see an ordinary 200. The rows show
what the origin sent against what the clients received (paper Table 2's
"Mbyte transferred, Normal vs VMC").
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import threading
import time
from pathlib import Path

from vmc.aio.origin import Origin, expected
from vmc.aio.proxy import Proxy, ProxyConfig
from vmc.client import fetch


async def _curl(url: str, proxy: str, out: Path) -> tuple[int, int, float, float, int]:
    """(curl's exit code, the HTTP status curl saw, time to first byte, elapsed, bytes)."""
    t0 = time.monotonic()
    p = await asyncio.create_subprocess_exec(
        "curl", "-sS", "-o", str(out), "-w", "%{http_code} %{time_starttransfer} %{size_download}",
        "-x", f"http://{proxy}", url,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    so, _ = await p.communicate()
    parts = so.decode().split()
    status = int(parts[0]) if parts else 0
    ttfb = float(parts[1]) if len(parts) > 1 else 0.0
    n = int(parts[2]) if len(parts) > 2 else 0
    return p.returncode or 0, status, ttfb, time.monotonic() - t0, n


async def _run(quick: bool) -> list[dict]:
    size = (4 if quick else 16) << 20
    rate = 4_000_000.0
    n_clients = 6 if quick else 10
    stagger = 0.15 if quick else 0.35
    origin = await Origin(rate=rate).start()
    proxy = await Proxy(ProxyConfig(upstreams=[origin.authority], window=size)).start()
    px = f"{proxy.address[0]}:{proxy.address[1]}"
    path = f"/demo.bin?size={size}"
    url = f"http://{origin.authority}{path}"
    want = expected("/demo.bin", size)
    have_curl = shutil.which("curl") is not None
    tmp = Path(tempfile.mkdtemp(prefix="vmc-demo-"))
    rows: list[dict] = []

    async def client(i: int) -> dict:
        await asyncio.sleep(i * stagger)
        aware = i % 2 == 1
        if aware or not have_curl:
            r = await fetch(url, proxy=px, vmc=aware)
            ok = r.body == want
            kind = "vmc-aware" if aware else "plain (our client)"
            return {"client": i, "kind": kind, "status": r.status,
                    "ttfb_s": round(r.ttfb, 4), "done_s": round(r.elapsed, 3), "ok": ok,
                    "parts": len(r.parts)}
        out = tmp / f"c{i}"
        rc, status, ttfb, el, n = await _curl(url, px, out)
        ok = rc == 0 and status == 200 and out.read_bytes() == want
        return {"client": i, "kind": "curl", "status": status, "ttfb_s": round(ttfb, 4),
                "done_s": round(el, 3), "ok": ok, "parts": 1}

    try:
        t0 = time.monotonic()
        results = await asyncio.gather(*(client(i) for i in range(n_clients)))
        wall = time.monotonic() - t0
        snap = proxy.snapshot(0)
    finally:
        await proxy.close()
        await origin.close()
        shutil.rmtree(tmp, ignore_errors=True)
    for r in results:
        rows.append({"system": "vmc", "what": f"client {r['client']} ({r['kind']})",
                     "result": f"{r['status']} ok={r['ok']} ttfb={r['ttfb_s']}s "
                               f"done={r['done_s']}s "
                               f"parts={r['parts']}"})
    mb = 1e6
    rows.append({"system": "vmc", "what": "origin bytes (VMC) vs without sharing",
                 "result": f"{snap['origin_bytes'] / mb:.1f} MB vs {n_clients * size / mb:.1f} MB"})
    rows.append({"system": "vmc", "what": "client bytes / sharing ratio",
                 "result": f"{snap['client_bytes'] / mb:.1f} MB / {snap['sharing_ratio']:.2f}x"})
    rows.append({"system": "vmc", "what": "bandwidth saving (paper Table 2 column)",
                 "result": f"{100 * (snap['bandwidth_saving'] or 0):.1f} %"})
    rows.append({"system": "vmc", "what": "all bodies verified",
                 "result": f"{all(r['ok'] for r in results)} ({n_clients} clients, {wall:.1f} s)"})
    return rows


def run(quick: bool = True) -> list[dict]:
    """Run the demo; returns rows {"system", "what", "result"}."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_run(quick))
    box: list = []
    t = threading.Thread(target=lambda: box.append(asyncio.run(_run(quick))))
    t.start()
    t.join()
    return box[0]


if __name__ == "__main__":
    for row in run(quick=True):
        print(f"{row['what']:45s} {row['result']}")
