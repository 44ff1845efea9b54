"""The corecast roles as long-running processes (``corecast mapserver|etr|itr|source|client``).

Each role coroutine takes the parsed options and a :class:`deliverykit.cliutil.Stopper`,
prints ``corecast ROLE: ready {json}`` on stderr once it serves, one warning or error line
when a required step keeps failing (with the likely cause), and returns an
:class:`Outcome`: the counters the CLI prints as JSON and the exit status. The option
parser and ``main`` are in :mod:`corecast.cli`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import json
import sys
from dataclasses import dataclass
from typing import Any

from corecast.wire.constants import LISP_CONTROL_PORT
from deliverykit import cliutil


def _hostport(text: str, default_port: int | None = None) -> tuple[str, int]:
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest.lstrip(":")
    elif text.count(":") == 1:
        host, port = text.split(":")
    else:
        host, port = text, ""
    if not port:
        if default_port is None:
            raise argparse.ArgumentTypeError(f"{text!r}: expected HOST:PORT")
        return host, default_port
    return host, cliutil.port(port)


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, bytes):
        return obj.hex()
    if hasattr(obj, "__dataclass_fields__"):
        return _jsonable({f: getattr(obj, f) for f in obj.__dataclass_fields__})
    return obj


async def _run_until(stopper: cliutil.Stopper, duration: float | None,
                     done: asyncio.Event | None = None) -> None:
    """Wait for ``duration`` seconds, ``done``, or a stop signal (SIGINT/SIGTERM)."""
    waits = [asyncio.create_task(stopper.event.wait())]
    if done is not None:
        waits.append(asyncio.create_task(done.wait()))
    await asyncio.wait(waits, timeout=duration, return_when=asyncio.FIRST_COMPLETED)
    for w in waits:
        w.cancel()


def _ranges(texts: list[str]) -> list[tuple[bytes, int]]:
    from corecast.core.maptrie import parse_prefix

    return [parse_prefix(t) for t in texts]


def _say(role: str, text: str) -> None:
    """One status line on stderr (stdout carries only the final JSON)."""
    print(f"corecast {role}: {text}", file=sys.stderr, flush=True)


def _ready(role: str, **info: Any) -> None:
    """The line every role prints once it serves: ``corecast ROLE: ready {json}``."""
    _say(role, "ready " + json.dumps(info, sort_keys=True))


def _error(text: str) -> None:
    print(f"corecast: error: {text}", file=sys.stderr, flush=True)


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a role returns: its final counters (printed as JSON) and the exit status."""

    result: dict
    """the counters, printed as one JSON document on stdout"""
    code: int = 0
    """0 (ran to its end), 1 (a required step kept failing), 130/143 (SIGINT/SIGTERM)"""


# ------------------------------------------------------------------- roles


async def _mapserver(a: argparse.Namespace, stopper: cliutil.Stopper) -> Outcome:
    from corecast.aio.nodes import MapServerNode
    from corecast.core.mapserver import MapServer, Site

    sites = []
    for spec in a.site:
        name, prefixes, key_id, psk = spec.split(":", 3)
        sites.append(Site(name, {int(key_id): psk.encode()},
                          tuple(ipaddress.ip_network(p) for p in prefixes.split(",")),
                          iids=frozenset({0, *a.instance_id})))
    ms = MapServer(sites)
    node = MapServerNode(ms, a.addr, a.port)
    try:
        await node.start()
        _ready("mapserver", addr=a.addr, port=a.port, sites=len(sites))
        await _run_until(stopper, a.duration)
    finally:
        await node.close()
    return Outcome({"role": "mapserver", "counters": ms.counters,
                    "registrations": ms.registrations(node.now()),
                    "sockets": node.socket_stats()}, stopper.exit_code())


def _trusted(a: argparse.Namespace) -> list[tuple[bytes, int]] | None:
    """The RLOC prefixes an ETR accepts LISP data from; None = any (--trust-any-rloc)."""
    if a.trust_any_rloc:
        return None
    return _ranges([str(n) for n in a.trust_rloc])


async def _registered(reg: Any, node: Any, stopper: cliutil.Stopper, retries: int,
                      duration: float | None) -> str | None:
    """Wait for the Map-Notify; None once registered, else why we gave up (or "" on a signal)."""
    loop = asyncio.get_running_loop()
    end = None if duration is None else loop.time() + duration
    give_up_at: float | None = None  # when the last allowed Map-Register's wait ends
    while not reg.registered:
        if stopper.stopped:
            return ""
        now = loop.time()
        if give_up_at is None and reg.counters["sent"] > retries:
            # the registrar's timer sends the next one exactly at next_send, so the wait's
            # end is remembered now rather than looked for later
            give_up_at = reg.next_send
        if (give_up_at is not None and now >= give_up_at) or (end is not None and now >= end):
            ms = f"{reg.cfg.map_server[0]}:{reg.cfg.map_server[1]}"
            sent = reg.counters["sent"]
            if node.t_ctl.stats["socket_errors"]:
                cause = (f"the map-server is unreachable (nothing listens on {ms}: "
                         "ICMP port unreachable)")
            else:
                cause = ("a wrong --psk or --key-id for the site, a --prefix the site does not "
                         f"cover, or the map-server is unreachable (is it running on {ms}?)")
            plural = "s" if sent != 1 else ""
            return (f"etr: no Map-Notify from {ms} after {sent} Map-Register{plural}: "
                    f"likely {cause}")
        await asyncio.sleep(0.02)
    return None


async def _watch_registration(reg: Any, retries: int) -> None:
    """After the first Map-Notify: one warning line each time the registration goes
    unacknowledged for ``retries`` + 1 Map-Registers in a row (and one when it is back)."""
    lost, notified, sent_at_notify = False, reg.counters["notified"], reg.counters["sent"]
    while True:
        await asyncio.sleep(0.2)
        if reg.counters["notified"] != notified:
            notified, sent_at_notify = reg.counters["notified"], reg.counters["sent"]
            if lost:
                _say("etr", "registration acknowledged again")
                lost = False
        elif not lost and reg.counters["sent"] - sent_at_notify > retries + 1:
            ms = f"{reg.cfg.map_server[0]}:{reg.cfg.map_server[1]}"
            _say("etr", f"warning: registration lost: {reg.counters['sent'] - sent_at_notify} "
                        f"Map-Registers to {ms} unacknowledged (map-server down or its site "
                        "configuration changed?); retrying")
            lost = True


async def _etr(a: argparse.Namespace, stopper: cliutil.Stopper) -> Outcome:
    from corecast.aio.nodes import EtrNode
    from corecast.core.etr import Etr
    from corecast.core.register import AUTH_PROFILES, Registrar, RegistrarConfig, with_profile

    mc = {}
    for spec in a.multicast or []:
        chan, group = spec.split("=")
        mc[ipaddress.ip_address(chan).packed] = _hostport(group)
    etr = Etr(_ranges(a.cc_range), multicast=mc, instance_id=a.instance_id,
              eids=_ranges([str(p) for p in a.prefix]), trusted_rlocs=_trusted(a))
    reg = None
    if a.map_server:
        reg = Registrar(with_profile(RegistrarConfig(
            tuple(str(p) for p in a.prefix), (a.rloc,), _hostport(a.map_server, LISP_CONTROL_PORT),
            a.psk.encode(), a.key_id, a.algorithm_id, iid=a.instance_id or 0,
            map_version=a.map_version or 0, interval=a.register_interval),
            AUTH_PROFILES[a.profile]))
    node = EtrNode(etr, a.rloc, reg, a.data_port, a.control_port, mcast_if=a.multicast_if)
    code = 0
    try:
        await node.start()
        failed = None
        if reg is not None:
            failed = await _registered(reg, node, stopper, a.register_retries, a.duration)
        if failed:
            _error(failed)
            code = 1
        elif failed is None:
            _ready("etr", rloc=a.rloc, data_port=a.data_port, registered=reg is not None)
            if reg is not None:
                node.tasks.append(asyncio.create_task(_watch_registration(reg, a.register_retries)))
            await _run_until(stopper, a.duration)
    finally:
        await node.close()
    return Outcome({"role": "etr", "counters": etr.counters, "state": etr.state_size(),
                    "registered": bool(reg and reg.registered),
                    "registrar": reg.counters if reg else None,
                    "out_links": node.links.snapshot(),
                    "sockets": node.socket_stats()}, stopper.exit_code(code))


def _make_itr(a: argparse.Namespace, rloc: str):
    from corecast.core.itr import Itr
    from corecast.core.mapcache import MapCache

    iid = getattr(a, "instance_id", None)
    mc = MapCache(iid=iid or 0)
    if a.map_cache:
        with open(a.map_cache) as f:
            mc.load_static(f.read())
    resolver = _hostport(a.map_resolver, LISP_CONTROL_PORT) if a.map_resolver else None
    return Itr(rloc, _ranges(a.cc_range), mc, resolver, a.control_port,
               extra_payload_every=a.extra_payload_every, max_channels=a.max_channels,
               instance_id=iid)


async def _watch_resolver(role: str, itr: Any, after: int = 3) -> None:
    """One warning line when Map-Requests keep going unanswered (the resolver is down or wrong)."""
    while True:
        await asyncio.sleep(0.5)
        sent = itr.counters["map_requests_sent"]
        if sent >= after and itr.counters["map_replies"] == 0:
            host, port = itr.map_resolver
            _say(role, f"warning: {sent} Map-Requests to {host}:{port} and no Map-Reply: is "
                       "the map-resolver running there (corecast mapserver --addr)? Packets to "
                       "unmapped EIDs wait, then are dropped (drops.pending)")
            return


def _event(e: Any) -> dict:
    return {"event": type(e).__name__, **{f: _jsonable(getattr(e, f)) for f in e.__slots__}}


async def _itr(a: argparse.Namespace, stopper: cliutil.Stopper) -> Outcome:
    from corecast.aio.nodes import ItrNode

    itr = _make_itr(a, a.rloc)
    xtr = None
    if a.data_port is not None:  # ITR + ETR in one process (RFC 9300 sec. 10.1 needs both)
        from corecast.aio.nodes import XtrNode
        from corecast.core.etr import Etr
        from corecast.core.xtr import Xtr

        xtr = Xtr(itr, Etr(_ranges(a.cc_range), eids=_ranges([str(p) for p in a.prefix]),
                           trusted_rlocs=_trusted(a)),
                  echo_nonce=a.echo_nonce, local_rlocs=tuple(a.local_rloc),
                  map_versioning=a.map_version is not None, map_version=a.map_version or 0)
        node: ItrNode = XtrNode(xtr, _hostport(a.inside), a.data_port)
    else:
        node = ItrNode(itr, _hostport(a.inside))
    try:
        await node.start()
        _ready("itr", rloc=a.rloc, inside=a.inside, xtr=xtr is not None)
        if itr.map_resolver is not None:
            node.tasks.append(asyncio.create_task(_watch_resolver("itr", itr)))
        await _run_until(stopper, a.duration)
    finally:
        await node.close()
    out = {"role": "itr", "counters": itr.counters, "drops": itr.drops(),
           "state": itr.state_size(), "links": node.links.snapshot(),
           "sockets": node.socket_stats()}
    if xtr is not None:
        out["xtr"] = xtr.counters
        out["etr"] = xtr.etr.counters
        out["events"] = [_event(e) for e in list(xtr.events)[-20:]]
    return Outcome(out, stopper.exit_code())


async def _source(a: argparse.Namespace, stopper: cliutil.Stopper) -> Outcome:
    from corecast.aio.nodes import SourceNode
    from corecast.core.source import Source

    itr = _make_itr(a, a.eid) if a.as_itr else None
    src = Source(a.eid, None if a.as_itr else _hostport(a.itr), a.transport, itr=itr,
                 heartbeat_timeout=a.heartbeat_timeout, mtu=a.mtu)
    limit = a.chunks

    for eid in a.channel:
        media = None
        if a.input:
            media = _file_media(a.input)
        elif limit is not None:
            from corecast.core.source import pattern_media

            base = pattern_media(eid)

            def media(seq: int, n: int, base=base):
                return base(seq, n) if seq < limit else None
        src.add_channel(eid, a.bitrate, a.chunk_size, media)
    node = SourceNode(src, a.eid, a.http_port)
    try:
        await node.start(stream=False)
        _ready("source", eid=a.eid, http_port=node.http_port, channels=a.channel)
        if itr is not None and itr.map_resolver is not None:
            node.tasks.append(asyncio.create_task(_watch_resolver("source", itr)))
        if await _wait_subscribers(src, a.wait_subscribers, a.duration, stopper):
            node.start_streaming()
            await _run_until(stopper, a.duration, node.running)
            if not stopper.stopped:
                await stopper.wait(a.linger)
    finally:
        await node.close()
    return Outcome({"role": "source", "counters": src.counters,
                    "channels": {str(ipaddress.ip_address(c.eid)): {"seq": c.seq,
                                                                     "subscribers": len(c.dst)}
                                 for c in src.channels.values()},
                    "http_refused": node.refused, "sockets": node.socket_stats(),
                    "itr": itr.counters if itr else None}, stopper.exit_code())


async def _wait_subscribers(src, n: int, timeout: float | None, stopper: cliutil.Stopper) -> bool:
    """Wait for ``n`` subscribers (at most ``timeout`` s); False when a signal came first."""
    if n <= 0:
        return True
    loop = asyncio.get_running_loop()
    end = loop.time() + (timeout or 3600)
    while sum(len(c.dst) for c in src.channels.values()) < n and loop.time() < end:
        if await stopper.wait(0.02):
            return False
    return True


def _file_media(path: str):
    f = open(path, "rb")  # noqa: SIM115 - closed at end of stream

    def media(seq: int, n: int) -> bytes | None:
        data = f.read(n)
        if not data:
            f.close()
            return None
        return data

    return media


async def _join(node: Any, source: tuple[str, int], a: argparse.Namespace,
                stopper: cliutil.Stopper) -> str | None:
    """Join, retrying with backoff while the source is not up yet (at most --join-timeout s);
    None once joined, else why not (or "" on a signal)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + a.join_timeout
    delay, tries, last = 0.05, 0, ""
    while True:
        tries += 1
        try:
            await node.join(source, a.channel, not a.no_corecast, a.heartbeat)
            return None
        except (OSError, asyncio.TimeoutError) as exc:
            last = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        except RuntimeError as exc:  # the source answered and refused: retrying will not help
            return f"client: {exc}"
        if tries == 1:
            _say("client", f"cannot join via {source[0]}:{source[1]} yet ({last}); "
                           f"retrying for up to {a.join_timeout:g} s")
        wait = min(delay, end - loop.time())
        if wait <= 0:
            host, port = source
            return (f"client: cannot join via {host}:{port} after {tries} tries in "
                    f"{a.join_timeout:g} s ({last}): is the source running with "
                    f"--http-port {port}?")
        if await stopper.wait(wait):
            return ""
        delay = min(delay * 2, 2.0)


async def _watch_stream(node: Any, after: float, etrs: list[str]) -> None:
    """One warning line when nothing has arrived ``after`` seconds after joining."""
    await asyncio.sleep(after)
    c = node.client
    if c.received == 0 and c.malformed == 0:
        via = f"from the ETR {', '.join(etrs)}" if etrs else "from the source"
        _say("client", f"warning: nothing received {after:g} s after joining: is the source "
                       f"streaming (its --wait-subscribers), and is the stream coming {via} (the "
                       f"ETR registered, its --trust-rloc naming the ITR)?"
                       + (f" {c.rejected} datagrams came from other senders" if c.rejected else ""))


async def _progress(node: Any, every: float = 1.0) -> None:
    """A single updating status line on a terminal's stderr."""
    while True:
        await asyncio.sleep(every)
        st = node.client.stats()
        sys.stderr.write(f"\rcorecast client: received {st['received']} lost {st['lost']} "
                         f"rejected {st['rejected']}   ")
        sys.stderr.flush()


async def _client(a: argparse.Namespace, stopper: cliutil.Stopper) -> Outcome:
    from corecast.aio.nodes import ClientNode

    accept = None if a.accept_any else [str(e) for e in a.etr]
    node = ClientNode(a.eid, a.port, accept=accept)

    def hint(host: str) -> None:
        _say("client", f"dropping datagrams from {host}: not the source nor an --etr "
                       f"(if it is this domain's ETR, add --etr {host})")

    node.on_reject = hint
    done = asyncio.Event()
    if a.chunks:
        node.on_receive = lambda: done.set() if node.client.received >= a.chunks else None
    code = 0
    try:
        await node.start()
        failed = await _join(node, _hostport(a.join), a, stopper) if a.join else None
        if failed:
            _error(failed)
            code = 1
        elif failed is None:
            _ready("client", eid=a.eid, port=node.port, joined=a.join)
            if a.join and a.stall_warning:
                node.tasks.append(asyncio.create_task(
                    _watch_stream(node, a.stall_warning, [str(e) for e in a.etr])))
            if a.progress or (a.progress is None and sys.stderr.isatty()):
                node.tasks.append(asyncio.create_task(_progress(node)))
            await _run_until(stopper, a.duration, done)
            if a.join and a.leave:
                with contextlib.suppress(OSError, RuntimeError, asyncio.TimeoutError):
                    await node.leave()
    finally:
        await node.close()
        if a.progress or (a.progress is None and sys.stderr.isatty()):
            sys.stderr.write("\n")
    st: dict[str, object] = {**node.client.stats(), "role": "client", "eid": a.eid,
                             "sockets": node.socket_stats()}
    return Outcome(st, stopper.exit_code(code))


ROLES = {"mapserver": _mapserver, "etr": _etr, "itr": _itr, "source": _source, "client": _client}
