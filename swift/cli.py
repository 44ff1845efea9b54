"""``ppspp`` command line: seed, download, hash, demo (also ``python -m swift``)."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

from swift.core.peer import PeerConfig
from swift.core.picker import PICKERS
from swift.wire.constants import ChunkAddressing, HashFunc

_HASHES = {"sha1": HashFunc.SHA1, "sha256": HashFunc.SHA256}
_CAMS = {"chunk32": ChunkAddressing.CHUNK32, "chunk64": ChunkAddressing.CHUNK64,
         "bin32": ChunkAddressing.BIN32, "bin64": ChunkAddressing.BIN64,
         "byte64": ChunkAddressing.BYTE64}


def _hostport(s: str) -> tuple[str, int]:
    host, _, port = s.rpartition(":")
    if not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {s!r}")
    return host.strip("[]"), int(port)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--chunk-size", type=int, default=1024)
    p.add_argument("--hash", choices=sorted(_HASHES), default=None,
                   help="Merkle hash (default sha256; sha1 with --profile libswift)")
    p.add_argument("--addressing", choices=sorted(_CAMS), default="chunk32")
    p.add_argument("--profile", choices=["rfc", "libswift"], default="rfc",
                   help="libswift: draft-10 as the libswift C++ peer speaks it")


def _config(a: argparse.Namespace, **kw) -> PeerConfig:
    hf = _HASHES[a.hash] if a.hash else (HashFunc.SHA1 if a.profile == "libswift" else HashFunc.SHA256)
    return PeerConfig(chunk_size=a.chunk_size, hash_func=hf, addressing=_CAMS[a.addressing],
                      profile=a.profile, **kw)


async def _seed(a: argparse.Namespace) -> int:
    from swift.aio.node import seeder
    node = seeder(a.file, _config(a), a.host, a.port)
    async with node:
        print(node.peer.swarm_id.hex(), flush=True)
        print(f"seeding {a.file} on {node.host}:{node.port}", file=sys.stderr, flush=True)
        end = time.monotonic() + a.duration if a.duration else None
        while end is None or time.monotonic() < end:
            await asyncio.sleep(0.5)
    return 0


async def _download(a: argparse.Namespace) -> int:
    from rich.progress import BarColumn, DownloadColumn, Progress, TransferSpeedColumn

    from swift.aio.node import downloader
    try:
        root = bytes.fromhex(a.root)
    except ValueError:
        print("ROOTHASH must be hex", file=sys.stderr)
        return 2
    cfg = _config(a, picker=a.picker)
    node = downloader(root, a.output, cfg, a.host, a.port)
    async with node:
        for p in a.peer:
            node.connect(p)
        cs = cfg.chunk_size
        with Progress("[progress.description]{task.description}", BarColumn(), DownloadColumn(),
                      TransferSpeedColumn(), transient=a.quiet, disable=a.quiet) as prog:
            task = prog.add_task("ppspp", total=None)
            end = time.monotonic() + a.timeout
            while time.monotonic() < end:
                got, total = node.progress
                prog.update(task, completed=got * cs, total=total * cs if total else None)
                if await node.wait_complete(0.2):
                    size = node.peer.content.tree.size or 0
                    prog.update(task, completed=size, total=size)
                    break
        if not node.peer.content.complete:
            print("download incomplete (timeout)", file=sys.stderr)
            return 1
    print(f"{a.output}: {node.peer.content.tree.size} bytes verified", file=sys.stderr)
    return 0


def _hash(a: argparse.Namespace) -> int:
    from swift.aio.node import tree_for_file
    cfg = _config(a)
    print(tree_for_file(a.file, cfg.hash_func, cfg.chunk_size, cache=not a.no_cache).root_hash.hex())
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``ppspp``."""
    ap = argparse.ArgumentParser(prog="ppspp", description="PPSPP (RFC 7574) peer")
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("seed", help="seed a file; prints its root hash (swarm ID)")
    s.add_argument("file")
    s.add_argument("--host", default="0.0.0.0")
    s.add_argument("--port", type=int, default=6778)
    s.add_argument("--duration", type=float, default=0.0, help="seconds (0 = forever)")
    _common(s)
    d = sub.add_parser("download", help="download by root hash from peers")
    d.add_argument("root", metavar="ROOTHASH")
    d.add_argument("--peer", type=_hostport, action="append", required=True)
    d.add_argument("-o", "--output", required=True)
    d.add_argument("--host", default="0.0.0.0")
    d.add_argument("--port", type=int, default=0)
    d.add_argument("--picker", choices=sorted(PICKERS), default="linear")
    d.add_argument("--timeout", type=float, default=3600.0)
    d.add_argument("-q", "--quiet", action="store_true")
    _common(d)
    h = sub.add_parser("hash", help="print the root hash of a file")
    h.add_argument("file")
    h.add_argument("--no-cache", action="store_true", help="do not write FILE.mhash")
    _common(h)
    sub.add_parser("demo", help="seeder and leechers on loopback")
    a = ap.parse_args(argv)
    try:
        if a.cmd == "seed":
            return asyncio.run(_seed(a))
        if a.cmd == "download":
            return asyncio.run(_download(a))
        if a.cmd == "hash":
            return _hash(a)
        from swift.demo import run
        for row in run(quick=True):
            print(row)
        return 0
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
