"""Our LISP map-server and ETR behind the conformance contract (see ``corecast.conformance``).

    python -m corecast.conformance.adapter mapserver --addr 127.0.0.1 --port P \
        --site NAME:PREFIX:KEYID:PSK
    python -m corecast.conformance.adapter etr --rloc 127.0.0.1 --prefix P --map-server H:P \
        --key-id N --psk S --control-port C --data-port D [--cc-range 232.0.0.0/8]
    python -m corecast.conformance.adapter itr --rloc 127.0.0.1 --inside 127.0.0.1:P \
        --map-cache FILE [--map-resolver H:P] [--control-port C] [--cc-range 232.0.0.0/8] \
        [--data-port D [--echo-nonce] [--map-version V]] [--instance-id N] \
        [--prefix LOCAL_EID_PREFIX]

``etr`` and ``mapserver`` also take ``--instance-id N`` (for the map-server:
repeatable, instances the site may register besides 0).
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import signal
import sys


async def _until_signal() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()


async def _serve(node) -> int:
    """Start a role's node, announce READY (the contract's readiness line), run until a signal."""
    await node.start()
    print("READY", flush=True)
    try:
        await _until_signal()
    finally:
        await node.close()
    return 0


async def _mapserver(a: argparse.Namespace) -> int:
    from corecast.aio.nodes import MapServerNode
    from corecast.core.mapserver import MapServer, Site

    sites = []
    iids = frozenset({0, *a.instance_id})
    for spec in a.site:
        name, prefixes, key_id, psk = spec.split(":", 3)
        sites.append(Site(name, {int(key_id): psk.encode()},
                          tuple(ipaddress.ip_network(p) for p in prefixes.split(",")),
                          iids=iids))
    node = MapServerNode(MapServer(sites), a.addr, a.port)
    return await _serve(node)


async def _etr(a: argparse.Namespace) -> int:
    from corecast.aio.nodes import EtrNode
    from corecast.core.etr import Etr
    from corecast.core.maptrie import parse_prefix
    from corecast.core.register import Registrar, RegistrarConfig

    host, _, port = a.map_server.rpartition(":")
    reg = Registrar(
        RegistrarConfig(
            tuple(a.prefix),
            (a.rloc,),
            (host, int(port)),
            a.psk.encode(),
            a.key_id,
            a.algorithm_id,
            iid=a.instance_id or 0,
        )
    )
    # decapsulates for its own --prefix EIDs only; the conformance harness plays ITRs from any
    # loopback address, so every RLOC is trusted here (the CLI ETR trusts only --trust-rloc)
    etr = Etr([parse_prefix(r) for r in a.cc_range], instance_id=a.instance_id,
              eids=[parse_prefix(p) for p in a.prefix], trusted_rlocs=None)
    node = EtrNode(etr, a.rloc, reg, a.data_port, a.control_port)
    return await _serve(node)


async def _itr(a: argparse.Namespace) -> int:
    from corecast.aio.nodes import ItrNode
    from corecast.core.itr import Itr
    from corecast.core.mapcache import MapCache
    from corecast.core.maptrie import parse_prefix

    mc = MapCache(iid=a.instance_id or 0)
    if a.map_cache:
        with open(a.map_cache) as f:
            mc.load_static(f.read())
    resolver = None
    if a.map_resolver:
        host, _, port = a.map_resolver.rpartition(":")
        resolver = (host, int(port))
    itr = Itr(a.rloc, [parse_prefix(r) for r in a.cc_range], mc, resolver, a.control_port,
              instance_id=a.instance_id)
    host, _, port = a.inside.rpartition(":")
    if a.data_port is None:
        if a.echo_nonce or a.map_version is not None:
            return 127  # echo-nonce / map-versioning need the ETR half
        return await _serve(ItrNode(itr, (host, int(port))))
    from corecast.aio.nodes import XtrNode
    from corecast.core.etr import Etr
    from corecast.core.xtr import Xtr

    # the harness's xTR cases deliver to EIDs of their own choosing, from RLOCs of their own
    # choosing: the adapter's xTR serves every EID and trusts every RLOC (test harness only)
    anywhere = [(bytes(4), 0), (bytes(16), 0)]
    xtr = Xtr(itr, Etr([parse_prefix(r) for r in a.cc_range], eids=anywhere, trusted_rlocs=None),
              echo_nonce=a.echo_nonce,
              echo_interval=a.echo_interval, echo_timeout=a.echo_timeout,
              map_versioning=a.map_version is not None, map_version=a.map_version or 0)
    return await _serve(XtrNode(xtr, (host, int(port)), a.data_port))


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] not in ("mapserver", "etr", "itr"):
        return 127
    if args[0] == "itr":
        ap = argparse.ArgumentParser(prog="corecast.conformance.adapter itr")
        ap.add_argument("--rloc", required=True)
        ap.add_argument("--inside", required=True)
        ap.add_argument("--map-cache")
        ap.add_argument("--map-resolver")
        ap.add_argument("--control-port", type=int, default=0)
        ap.add_argument("--cc-range", action="append", default=[])
        ap.add_argument("--data-port", type=int, default=None,
                        help="also an ETR: decapsulate LISP arriving on RLOC:D (an xTR)")
        ap.add_argument("--echo-nonce", action="store_true", help="RFC 9300 sec. 10.1")
        ap.add_argument("--echo-interval", type=float, default=10.0)
        ap.add_argument("--echo-timeout", type=float, default=3.0)
        ap.add_argument("--instance-id", type=int, default=None)
        ap.add_argument("--map-version", type=int, default=None, help="RFC 9302 (with --data-port)")
        ap.add_argument(
            "--prefix",
            action="append",
            default=[],
            help="the xTR's own EID prefix (repeatable); ours encapsulates from any source",
        )
        return asyncio.run(_itr(ap.parse_args(args[1:])))
    ap = argparse.ArgumentParser(prog=f"corecast.conformance.adapter {args[0]}")
    if args[0] == "mapserver":
        ap.add_argument("--addr", required=True)
        ap.add_argument("--port", type=int, required=True)
        ap.add_argument("--site", action="append", required=True)
        ap.add_argument("--instance-id", type=int, action="append", default=[])
        a = ap.parse_args(args[1:])
        return asyncio.run(_mapserver(a))
    ap.add_argument("--rloc", required=True)
    ap.add_argument("--prefix", action="append", required=True)
    ap.add_argument("--map-server", required=True)
    ap.add_argument("--key-id", type=int, default=1)
    ap.add_argument("--algorithm-id", type=int, choices=[1, 2, 3], default=2)
    ap.add_argument("--psk", required=True)
    ap.add_argument("--control-port", type=int, required=True)
    ap.add_argument("--data-port", type=int, required=True)
    ap.add_argument(
        "--cc-range", action="append", default=[], help="CoreCast channel EID range (repeatable)"
    )
    ap.add_argument("--instance-id", type=int, default=None)
    a = ap.parse_args(args[1:])
    return asyncio.run(_etr(a))


if __name__ == "__main__":
    sys.exit(main())
