"""Loopback demo: one seeder and three leechers form a swarm (no root, < 20 s)."""

from __future__ import annotations

import asyncio
import hashlib
import os
import tempfile
import time


async def _run(quick: bool) -> list[dict]:
    from swift.aio.node import SwiftNode, downloader, seeder
    from swift.core.config import PeerConfig
    from swift.core.events import ChunkVerified

    size = (2 if quick else 16) * 1024 * 1024 + 333
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="swift-demo-") as d:
        src = os.path.join(d, "video.bin")
        with open(src, "wb") as f:
            f.write(os.urandom(size))
        want = hashlib.sha256(open(src, "rb").read()).hexdigest()
        t0 = time.monotonic()
        # the seeder's upload is capped so that leechers must trade chunks
        cap = PeerConfig(upload_rate=(1.0 if quick else 4.0) * 1024 * 1024)
        async with seeder(src, cap) as s:
            what = "seeder root hash (SHA-256 Merkle, 1 KiB chunks)"
            rows.append({"system": "swift", "what": what,
                         "result": s.peer.swarm_id.hex()[:16] + "...",
                         "seconds": round(time.monotonic() - t0, 2)})
            leechers: list[SwiftNode] = []
            pickers = ["linear", "std-vod", "vod"]
            origin: list[dict] = [{}, {}, {}]

            def counter(i: int):
                def on_event(e) -> None:
                    if isinstance(e, ChunkVerified):
                        k = "seeder" if e.addr == s.addr else "peers"
                        origin[i][k] = origin[i].get(k, 0) + 1
                return on_event

            for i, pk in enumerate(pickers):
                node = downloader(s.peer.swarm_id, os.path.join(d, f"leech{i}.bin"),
                                  PeerConfig(picker=pk), on_event=counter(i))
                await node.start()
                node.connect(s.addr)
                for other in leechers:
                    node.connect(other.addr)
                leechers.append(node)
            t1 = time.monotonic()
            done = await asyncio.gather(*(n.wait_complete(15) for n in leechers))
            el = time.monotonic() - t1
            for i, (node, ok) in enumerate(zip(leechers, done)):
                with open(os.path.join(d, f"leech{i}.bin"), "rb") as fh:
                    got = hashlib.sha256(fh.read()).hexdigest()
                rows.append({"system": "swift", "what": f"leecher {i} ({pickers[i]}) {size} B",
                             "result": "sha256 ok" if ok and got == want else "FAILED",
                             "seconds": round(el, 2),
                             "chunks from seeder": origin[i].get("seeder", 0),
                             "chunks from leechers": origin[i].get("peers", 0),
                             "chunks uploaded": node.peer.stats["sent_data"]})
            for n in leechers:
                await n.aclose()
    return rows


def run(quick: bool = True) -> list[dict]:
    """Rows for the summary table (see house style)."""
    return asyncio.run(_run(quick))


if __name__ == "__main__":
    for r in run(True):
        print(r)
