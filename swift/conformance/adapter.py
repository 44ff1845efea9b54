"""Our PPSPP peer behind the conformance contract (see ``swift.conformance``).

    python -m swift.conformance.adapter seed FILE --port P [--addressing A] [--chunk-size C]
    python -m swift.conformance.adapter leech ROOTHASH HOST:PORT -o FILE [--addressing A] [--timeout T]
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys

from swift.conformance import ADDRESSING


def _config(a: argparse.Namespace):
    from swift.cli import _CAMS
    from swift.core.peer import PeerConfig
    from swift.wire.constants import HashFunc

    return PeerConfig(chunk_size=a.chunk_size, hash_func=HashFunc.SHA256, addressing=_CAMS[a.addressing])


async def _seed(a: argparse.Namespace) -> int:
    from swift.aio.node import seeder

    node = seeder(a.file, _config(a), "127.0.0.1", a.port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with node:
        print(f"READY {node.peer.swarm_id.hex()}", flush=True)
        await stop.wait()
    return 0


async def _leech(a: argparse.Namespace) -> int:
    from swift.aio.node import downloader

    host, _, port = a.peer.rpartition(":")
    node = downloader(bytes.fromhex(a.root), a.output, _config(a), "127.0.0.1", 0)
    async with node:
        node.connect((host, int(port)))
        ok = await node.wait_complete(a.timeout)
    return 0 if ok and node.peer.content.complete else 1


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] not in ("seed", "leech"):
        return 127
    ap = argparse.ArgumentParser(prog=f"swift.conformance.adapter {args[0]}")
    if args[0] == "seed":
        ap.add_argument("file")
        ap.add_argument("--port", type=int, required=True)
    else:
        ap.add_argument("root")
        ap.add_argument("peer")
        ap.add_argument("-o", "--output", required=True)
        ap.add_argument("--timeout", type=float, default=30.0)
    ap.add_argument("--addressing", default="chunk32")
    ap.add_argument("--chunk-size", type=int, default=1024)
    a = ap.parse_args(args[1:])
    if a.addressing not in ADDRESSING:
        return 127
    return asyncio.run(_seed(a) if args[0] == "seed" else _leech(a))


if __name__ == "__main__":
    sys.exit(main())
