"""Our HTTP proxy behind the conformance contract (see ``vmc.conformance``).

    python -m vmc.conformance.adapter proxy --listen 127.0.0.1:8080 --upstream 127.0.0.1:9000

Runs VMC's sharing proxy in reverse-proxy mode (origin-form requests go to the
upstream), prints ``READY HOST:PORT`` once listening, stops on SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from deliverykit.cliutil import Stopper


async def _serve(listen: str, upstream: str) -> None:
    from vmc.aio.proxy import Proxy, ProxyConfig

    host, _, port = listen.rpartition(":")
    proxy = await Proxy(ProxyConfig(host=host, port=int(port), upstreams=[upstream],
                                    default_upstream=upstream)).start()
    h, p = proxy.address[:2]
    print(f"READY {h}:{p}", flush=True)
    stopper = Stopper().install()
    try:
        await stopper.wait()
    finally:
        stopper.remove()
        await proxy.close()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] != "proxy":
        return 127
    ap = argparse.ArgumentParser(prog="vmc.conformance.adapter proxy")
    ap.add_argument("--listen", required=True)
    ap.add_argument("--upstream", required=True)
    a = ap.parse_args(args[1:])
    asyncio.run(_serve(a.listen, a.upstream))
    return 0


if __name__ == "__main__":
    sys.exit(main())
