"""Open Overlay Router behind the LISP conformance contract (registry entry ``oor``).

    OOR_BIN=/path/to/oor python -m corecast.conformance.oor_wrapper ROLE ARGS...

OOR is configured by a file, listens on the well-known ports only, needs
/dev/net/tun, ignores tunnel traffic for ~3.4 s after it starts, and reads LISP
data through a raw UDP socket (it decapsulates every UDP/4341 packet of its
host).  So this wrapper:

* runs only inside a network namespace other than the host's (the registry
  entry declares ``LISP_NETNS=required``; the cases start it with ``ip netns
  exec``); in the host's namespace it exits 127 saying why;
* exits 127 when ``OOR_BIN`` is unset, or a port other than 4342 (control) /
  4341 (data) is asked for (``LISP_FIXED_PORTS=1``);
* writes OOR's configuration in a scratch directory from the contract's
  arguments (``--site`` -> ``lisp-site``, ``--prefix`` -> ``database-mapping``
  on the interface holding ``--rloc``, ``--map-cache FILE`` ->
  ``static-map-cache``), starts OOR, waits out its start-up, prints ``READY``;
* role ``itr``: inner IP packets arriving as UDP payloads on ``--inside`` are
  handed to the namespace's IP stack through a raw socket, as if a host of the
  local EID prefix had sent them: OOR's policy routing takes them into its tun
  device and encapsulates them.  OOR encapsulates only packets from its local
  EID prefixes (``--prefix``).
* Key IDs: OOR reads RFC 6833's 16-bit Key ID (``key-type = 1``), so the
  contract's Key ID is not passed on (``LISP_AUTH_PROFILE=rfc6833``); OOR has
  HMAC-SHA-1 only (``LISP_AUTH_ALGORITHMS=1``).

Stops (OOR too: same process group) on SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

from deliverykit.deadline import within

UNSUPPORTED = 127
OOR_START = 3.5  # s: OOR ignores tunnel traffic for ~3.4 s after it starts
_IP_FREEBIND = 15  # linux/in.h


def _say(msg: str) -> None:
    print(f"oor_wrapper: {msg}", file=sys.stderr, flush=True)


def _in_own_netns() -> bool:
    """Are we in a named namespace (``ip netns add``, as the cases' testbeds make), not the
    host's?"""
    try:
        me = os.stat("/proc/self/ns/net")
        named = [os.stat(p) for p in Path("/var/run/netns").iterdir()]
    except OSError:
        return False
    return any((n.st_dev, n.st_ino) == (me.st_dev, me.st_ino) for n in named)


def _iface_of(addr: str) -> str | None:
    out = subprocess.run(["ip", "-o", "addr", "show"], capture_output=True, text=True,
                         timeout=10, check=False).stdout
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 4 and f[2] in ("inet", "inet6") and f[3].split("/")[0] == addr:
            return f[1].split("@")[0]
    return None


def _hostport(spec: str, default: int) -> tuple[str, int]:
    host, sep, port = spec.rpartition(":")
    return (host, int(port)) if sep else (spec, default)


def _header(mode: str) -> str:
    return (f"debug = 3\nlog-file = oor.log\nmap-request-retries = 1\noperating-mode = {mode}\n"
            "encapsulation = LISP\nrloc-probing {\n    rloc-probe-interval = 0\n"
            "    rloc-probe-retries = 0\n    rloc-probe-retries-interval = 5\n}\n")


def _database(prefixes: list[str], iface: str, iid: int) -> str:
    return "".join(
        f"database-mapping {{\n    eid-prefix = {p}\n    iid = {iid}\n    ttl = 10\n"
        f"    rloc-iface {{\n        interface = {iface}\n        ip_version = 4\n"
        f"        priority = 1\n        weight = 100\n    }}\n}}\n" for p in prefixes)


def _mapserver_conf(a: argparse.Namespace) -> str | None:
    if a.port != 4342:
        _say(f"OOR's map-server listens on 4342 only, not {a.port}")
        return None
    iface = _iface_of(a.addr)
    if iface is None:
        _say(f"no interface holds {a.addr}")
        return None
    out = _header("MS") + f"control-iface = {iface}\n"
    for spec in a.site:
        _name, prefixes, _key_id, psk = spec.split(":", 3)
        for iid in sorted({0, *a.instance_id}):
            for p in prefixes.split(","):
                out += (f"lisp-site {{\n    eid-prefix = {p}\n    key-type = 1\n    key = {psk}\n"
                        f"    iid = {iid}\n    accept-more-specifics = true\n"
                        "    proxy-reply = false\n}\n")
    return out


def _xtr_conf(a: argparse.Namespace, map_server: str | None, map_resolver: str | None,
              prefixes: list[str], psk: str, map_cache: str | None) -> str | None:
    iface = _iface_of(a.rloc)
    if iface is None:
        _say(f"no interface holds --rloc {a.rloc}")
        return None
    out = _header("xTR")
    if map_resolver:
        host, port = _hostport(map_resolver, 4342)
        if port != 4342:
            _say(f"OOR sends Map-Requests to port 4342 only, not {port}")
            return None
        out += f"map-resolver = {{\n    {host}\n}}\n"
    if map_server:
        host, port = _hostport(map_server, 4342)
        if port != 4342:
            _say(f"OOR registers at port 4342 only, not {port}")
            return None
        out += (f"map-server {{\n    address = {host}\n    key-type = 1\n    key = {psk}\n"
                "    proxy-reply = on\n}\n")
    out += _database(prefixes, iface, a.instance_id or 0)
    for line in Path(map_cache).read_text().splitlines() if map_cache else ():
        f = line.split()
        if not f or f[0].startswith("#"):
            continue
        rlocs = "".join(f"    rloc-address {{\n        address = {r}\n        priority = 1\n"
                        "        weight = 100\n    }\n" for r in f[1].split(","))
        out += (f"static-map-cache {{\n    eid-prefix = {f[0]}\n    iid = {a.instance_id or 0}\n"
                f"{rlocs}}}\n")
    return out


async def _run(conf: str, inside: tuple[str, int] | None) -> int:
    from deliverykit.cliutil import Stopper

    binary = os.environ.get("OOR_BIN", "")
    work = Path(tempfile.mkdtemp(prefix="oor-conformance-"))
    proc = None
    raws: dict[str, socket.socket] = {}
    stopper = Stopper()
    stopper.install(asyncio.get_running_loop())
    try:
        (work / "oor.conf").write_text(conf)
        proc = await asyncio.create_subprocess_exec(
            binary, "-f", str(work / "oor.conf"), cwd=work,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
        if await stopper.wait(OOR_START):
            return stopper.exit_code()
        if proc.returncode is not None:
            _say(f"OOR exited with {proc.returncode} at start (log: {work / 'oor.log'})")
            return 1
        if inside is not None:
            loop = asyncio.get_running_loop()
            raws.clear()

            def raw_for(src: str) -> socket.socket:
                """A raw socket bound to the inner source (IP_FREEBIND: the EID need not be
                configured): the kernel routes by source, and OOR's policy rule sends packets
                from its EID prefixes into its tun device."""
                if src not in raws:
                    if len(raws) >= 64:  # bounded: the contract's packets come from few EIDs
                        raws.pop(next(iter(raws))).close()
                    r = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
                    r.setsockopt(socket.SOL_IP, _IP_FREEBIND, 1)
                    r.bind((src, 0))
                    raws[src] = r
                return raws[src]

            class Inside(asyncio.DatagramProtocol):
                def datagram_received(self, data: bytes, addr: tuple) -> None:
                    if len(data) < 20 or data[0] >> 4 != 4:
                        return  # IPv4 only here; the rest is dropped
                    src, dst = socket.inet_ntoa(data[12:16]), socket.inet_ntoa(data[16:20])
                    try:
                        raw_for(src).sendto(data, (dst, 0))
                    except OSError as exc:
                        _say(f"inner packet {src} -> {dst} not sent: {exc}")

            await loop.create_datagram_endpoint(Inside, local_addr=inside)
        print("READY", flush=True)
        await stopper.wait(None)
        return 0
    finally:
        for r in raws.values():
            r.close()
        if proc is not None and proc.returncode is None:
            proc.terminate()
            try:
                await within(proc.wait(), 10)
            except asyncio.TimeoutError:
                proc.kill()
                await proc.wait()
        stopper.remove()
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] not in ("mapserver", "etr", "itr"):
        return UNSUPPORTED
    binary = os.environ.get("OOR_BIN", "")
    if not (binary and os.access(binary, os.X_OK)):
        _say("set OOR_BIN to an Open Overlay Router binary (oor); see docs/conformance.md")
        return UNSUPPORTED
    if not _in_own_netns():
        _say("OOR decapsulates every UDP/4341 packet of its host: it runs only inside a network "
             "namespace (ip netns exec), never in the host's")
        return UNSUPPORTED
    role = args[0]
    ap = argparse.ArgumentParser(prog=f"oor_wrapper {role}")
    if role == "mapserver":
        ap.add_argument("--addr", required=True)
        ap.add_argument("--port", type=int, required=True)
        ap.add_argument("--site", action="append", required=True)
        ap.add_argument("--instance-id", type=int, action="append", default=[])
        a = ap.parse_args(args[1:])
        conf = _mapserver_conf(a)
        inside = None
    else:
        ap.add_argument("--rloc", required=True)
        ap.add_argument("--prefix", action="append", default=[])
        ap.add_argument("--control-port", type=int, default=4342)
        ap.add_argument("--data-port", type=int, default=4341)
        ap.add_argument("--cc-range", action="append", default=[])
        ap.add_argument("--instance-id", type=int, default=None)
        if role == "etr":
            ap.add_argument("--map-server", required=True)
            ap.add_argument("--key-id", type=int, default=1)
            ap.add_argument("--algorithm-id", type=int, default=1)
            ap.add_argument("--psk", required=True)
        else:
            ap.add_argument("--inside", required=True)
            ap.add_argument("--map-cache")
            ap.add_argument("--map-resolver")
            ap.add_argument("--echo-nonce", action="store_true")
            ap.add_argument("--map-version", type=int, default=None)
        a = ap.parse_args(args[1:])
        if a.cc_range:
            _say("OOR has no CoreCast (--cc-range)")
            return UNSUPPORTED
        if role == "itr" and (a.echo_nonce or a.map_version is not None):
            _say("echo-nonce / map-versioning are not configurable in OOR")
            return UNSUPPORTED
        if a.control_port != 4342 or a.data_port != 4341:
            _say("OOR uses ports 4342 (control) and 4341 (data) only")
            return UNSUPPORTED
        if role == "etr":
            if a.algorithm_id != 1:
                _say(f"OOR has HMAC-SHA-1 only, not algorithm {a.algorithm_id}")
                return UNSUPPORTED
            conf = _xtr_conf(a, a.map_server, None, a.prefix, a.psk, None)
            inside = None
        else:
            if not a.prefix:
                _say("OOR encapsulates only packets from its own EID prefixes: give --prefix")
                return UNSUPPORTED
            conf = _xtr_conf(a, None, a.map_resolver, a.prefix, "", a.map_cache)
            inside = _hostport(a.inside, 0)
    if conf is None:
        return UNSUPPORTED
    return asyncio.run(_run(conf, inside))


if __name__ == "__main__":
    sys.exit(main())
