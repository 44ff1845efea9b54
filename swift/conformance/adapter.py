"""Our PPSPP peer behind the conformance contract (see ``swift.conformance``).

python -m swift.conformance.adapter seed FILE --port P [--addressing A] [--chunk-size C]
python -m swift.conformance.adapter leech ROOTHASH HOST:PORT -o FILE [--addressing A] [--timeout T]
python -m swift.conformance.adapter live-source FILE --port P [--per-sig N] [--window W] [--rate R]
python -m swift.conformance.adapter live-view SWARMID HOST:PORT -o FILE [--per-sig N] [--window W]
                                              [--bytes B] [--timeout T]
python -m swift.conformance.adapter --profile libswift seed|leech ...   (draft-10, SHA-1 trees)
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import time

from swift.conformance import ADDRESSING

ROLES = ("seed", "leech", "live-source", "live-view")


PROFILE = "rfc"
"""``--profile libswift`` before the role: our peer in its libswift (draft-10, SHA-1) profile."""


def _config(a: argparse.Namespace):
    from swift.cli import _CAMS
    from swift.core.config import PeerConfig
    from swift.wire.constants import HashFunc

    if PROFILE == "libswift":
        return PeerConfig.libswift(chunk_size=a.chunk_size, addressing=_CAMS[a.addressing])
    return PeerConfig(
        chunk_size=a.chunk_size, hash_func=HashFunc.SHA256, addressing=_CAMS[a.addressing]
    )


def _stop_event() -> asyncio.Event:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    return stop


async def _seed(a: argparse.Namespace) -> int:
    from swift.aio.node import seeder

    node = seeder(a.file, _config(a), "127.0.0.1", a.port)
    stop = _stop_event()
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


async def _live_source(a: argparse.Namespace) -> int:
    """Inject FILE as a live stream at --rate bytes/s (sec. 6.1.2), then keep serving until
    SIGTERM."""
    from swift.aio.node import live_source

    node = live_source(_config(a), "127.0.0.1", a.port, per_sig=a.per_sig, window=a.window)
    stop = _stop_event()
    async with node:
        print(f"READY {node.peer.swarm_id.hex()}", flush=True)
        with open(a.file, "rb") as f:
            data = f.read()
        t0, sent, step = time.time(), 0, a.chunk_size * a.per_sig
        while sent < len(data) and not stop.is_set():
            block = data[sent:sent + step]
            node.peer.live_append(block, node.now)
            node.kick()
            sent += len(block)
            await asyncio.sleep(max(0.0, t0 + sent / a.rate - time.time()) if a.rate else 0)
        await stop.wait()
    return 0


async def _live_view(a: argparse.Namespace) -> int:
    """Write verified chunks in order from where we join; 0 once --bytes are written, else 1 at
    --timeout."""
    from swift.aio.node import InOrderReader, live_viewer

    host, _, port = a.peer.rpartition(":")
    node = live_viewer(
        bytes.fromhex(a.swarm), _config(a), "127.0.0.1", 0, per_sig=a.per_sig, window=a.window
    )
    got = 0
    with open(a.output, "wb") as out:
        async with node:
            node.connect((host, int(port)))
            rd = InOrderReader(node)
            end = time.monotonic() + a.timeout
            while time.monotonic() < end and got < a.bytes:
                for c in rd.ready():
                    out.write(c)
                    got += len(c)
                await asyncio.sleep(0.05)
    return 0 if got >= a.bytes else 1


def main(argv: list[str] | None = None) -> int:
    global PROFILE
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--profile"] and len(args) > 1:
        PROFILE, args = args[1], args[2:]
    if not args or args[0] not in ROLES or PROFILE not in ("rfc", "libswift"):
        return 127
    if PROFILE == "libswift" and args[0].startswith("live"):
        return 127  # live streaming is not in our libswift profile
    role = args[0]
    ap = argparse.ArgumentParser(prog=f"swift.conformance.adapter {role}")
    if role in ("seed", "live-source"):
        ap.add_argument("file")
        ap.add_argument("--port", type=int, required=True)
    else:
        ap.add_argument("swarm" if role == "live-view" else "root")
        ap.add_argument("peer")
        ap.add_argument("-o", "--output", required=True)
        ap.add_argument("--timeout", type=float, default=30.0)
    if role.startswith("live"):
        ap.add_argument("--per-sig", type=int, default=4)
        ap.add_argument("--window", type=int, default=4096)
    if role == "live-source":
        ap.add_argument("--rate", type=float, default=200_000.0)
    if role == "live-view":
        ap.add_argument("--bytes", type=int, default=1)
    ap.add_argument("--addressing", default="chunk32")
    ap.add_argument("--chunk-size", type=int, default=1024)
    a = ap.parse_args(args[1:])
    if a.addressing not in ADDRESSING:
        return 127
    roles = {"seed": _seed, "leech": _leech, "live-source": _live_source, "live-view": _live_view}
    run = roles[role]
    return asyncio.run(run(a))


if __name__ == "__main__":
    sys.exit(main())
