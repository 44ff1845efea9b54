"""CoreCast command line: one subcommand per role, plus plan and deploy.

    corecast mapserver --addr A --site NAME:PREFIX[,PREFIX]:KEYID:PSK ...
    corecast etr       --rloc A --prefix P --cc-range R (--trust-rloc PREFIX ... | --trust-any-rloc)
                       [--map-server A[:PORT] --key-id N --psk S]
    corecast itr       --rloc A --inside A:PORT --cc-range R (--map-resolver A[:PORT] | --map-cache F)
                       [--instance-id N] [--data-port D --prefix P (--trust-rloc PREFIX ... |
                       --trust-any-rloc) [--echo-nonce] [--local-rloc R ...] [--map-version V]]
    corecast source    --eid A --channel EID [--bitrate B --chunk-size D] (--itr A:PORT | --as-itr)
    corecast client    --eid A --port N --join A:PORT --channel EID --etr RLOC [--chunks N]
    corecast plan      [--C 10e9 --BW 384e3 --D 1200 --j 3 --k 7 ...] [--measure] [--json]
    corecast deploy    [--chunks 40] [--transport udp|raw] [--json]
    corecast experiment fig2-testbed|overhead|trace [--quick] [...]   (see each --help)

Every role prints "corecast ROLE: ready {...}" on stderr once it serves, and runs
until --duration seconds pass, its work is done (--chunks), or SIGINT/SIGTERM;
then it prints its counters as one JSON document on stdout and exits 0 (130
after SIGINT, 143 after SIGTERM, 1 when a required step kept failing).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from corecast.wire.constants import LISP_CONTROL_PORT
from deliverykit import cliutil
from deliverykit.experiments import dispatch


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


def _file(text: str) -> str:
    return str(cliutil.existing_file(text))


def _site(text: str) -> str:
    """``NAME:PREFIX[,PREFIX]:KEYID:PSK``, checked while parsing.  The fields are split on the
    first three colons, so prefixes here are IPv4 and the PSK may itself contain colons."""
    parts = text.split(":", 3)
    if len(parts) != 4 or not parts[0] or not parts[3]:
        raise argparse.ArgumentTypeError(f"{text!r}: expected NAME:PREFIX[,PREFIX]:KEYID:PSK")
    for prefix in parts[1].split(","):
        cliutil.ip_network(prefix)
    if not parts[2].isdigit() or int(parts[2]) > 0xFFFF:
        raise argparse.ArgumentTypeError(f"{text!r}: KEYID must be 0-65535")
    return text


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


def _print_json(obj: Any) -> None:
    print(json.dumps(_jsonable(obj), indent=2, sort_keys=True))
    sys.stdout.flush()


# A Map-Version on the command line: 1..4095 (RFC 9302 sec. 5; 0 is the Null Map-Version,
# which means no versioning, and 4096 would wrap to it).
map_version = cliutil.int_in(1, 4095, "Map-Version")


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
    while not reg.registered:
        if stopper.stopped:
            return ""
        now = loop.time()
        if (reg.counters["sent"] > retries and now >= reg.next_send) or (end is not None and now >= end):
            ms = f"{reg.cfg.map_server[0]}:{reg.cfg.map_server[1]}"
            sent = reg.counters["sent"]
            if node.t_ctl.stats["socket_errors"]:
                cause = f"the map-server is unreachable (nothing listens on {ms}: ICMP port unreachable)"
            else:
                cause = ("a wrong --psk or --key-id for the site, a --prefix the site does not cover, "
                         f"or the map-server is unreachable (is it running on {ms}?)")
            return (f"etr: no Map-Notify from {ms} after {sent} Map-Register{'s' if sent != 1 else ''}: "
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
    from corecast.core.register import Registrar, RegistrarConfig

    mc = {}
    for spec in a.multicast or []:
        chan, group = spec.split("=")
        mc[ipaddress.ip_address(chan).packed] = _hostport(group)
    etr = Etr(_ranges(a.cc_range), multicast=mc, instance_id=a.instance_id,
              eids=_ranges([str(p) for p in a.prefix]), trusted_rlocs=_trusted(a))
    reg = None
    if a.map_server:
        reg = Registrar(RegistrarConfig(tuple(str(p) for p in a.prefix), (a.rloc,),
                                        _hostport(a.map_server, LISP_CONTROL_PORT),
                                        a.psk.encode(), a.key_id, a.algorithm_id,
                                        iid=a.instance_id or 0,
                                        map_version=a.map_version or 0,
                                        interval=a.register_interval))
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
            _say(role, f"warning: {sent} Map-Requests to {host}:{port} and no Map-Reply: is the "
                       "map-resolver running there (corecast mapserver --addr)? Packets to unmapped "
                       "EIDs wait, then are dropped (drops.pending)")
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

            def media(seq: int, n: int, base=base):  # type: ignore[misc]
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
                    f"{a.join_timeout:g} s ({last}): is the source running with --http-port {port}?")
        if await stopper.wait(wait):
            return ""
        delay = min(delay * 2, 2.0)


async def _watch_stream(node: Any, after: float, etrs: list[str]) -> None:
    """One warning line when nothing has arrived ``after`` seconds after joining."""
    await asyncio.sleep(after)
    c = node.client
    if c.received == 0 and c.malformed == 0:
        via = f"from the ETR {', '.join(etrs)}" if etrs else "from the source"
        _say("client", f"warning: nothing received {after:g} s after joining: is the source streaming "
                       f"(its --wait-subscribers), and is the stream coming {via} (the ETR registered, "
                       f"its --trust-rloc naming the ITR)?"
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
    st = node.client.stats()
    st["role"] = "client"
    st["eid"] = a.eid
    st["sockets"] = node.socket_stats()
    return Outcome(st, stopper.exit_code(code))


# ------------------------------------------------------------------- plan/deploy


def _plan(a: argparse.Namespace) -> int:
    from corecast import plan as model

    r = model.plan(a.C, a.BW, a.D, a.j, a.k, a.i, a.transport, a.ipv6_eid, a.ipv6_rloc,
                   a.channels, a.ases)
    if a.measure:
        r["measured_itr_state"] = model.measure_itr_state(a.measure_channels, a.measure_ases,
                                                          a.D)
    if a.json:
        _print_json(r)
        return 0
    paper, ours = r["rows"]
    fig = r["paper_figures"]
    print(f"CoreCast plan: C={a.C:g} b/s, BW={a.BW:g} b/s, D={a.D} B, j={a.j} ASes, k={a.k} "
          f"clients, T={paper['T_s'] * 1000:g} ms\n")
    print(f"{'quantity':44} {'paper sizes':>14} {'our sizes':>14} {'paper text':>12}")
    lines = [
        ("H_L (LISP encapsulation) [B]", paper["sizes"]["h_l"], ours["sizes"]["h_l"], "20"),
        ("H_CC (header packet) [B]", paper["sizes"]["h_cc"], ours["sizes"]["h_cc"], "60"),
        ("P_CC (payload packet) [B]", paper["P_CC"], ours["P_CC"], "1200"),
        ("P = H_L + P_CC [B]", paper["P"], ours["P"], "1220"),
        ("H = H_L + H_CC [B]", paper["H"], ours["H"], "80"),
        ("payload packet overhead [% of D]", f"{paper['payload_overhead_pct']:.2f}",
         f"{ours['payload_overhead_pct']:.2f}", "-"),
        ("eq.1 max clients CC = (C/BW)(P/H)", f"{paper['eq1_max_clients_cc']:,}",
         f"{ours['eq1_max_clients_cc']:,}", f"{fig['max_clients_cc'][0]:,}"),
        ("eq.1 left form C*T/(8H)", f"{paper['eq1_time_form']:,}",
         f"{ours['eq1_time_form']:,}", "-"),
        ("eq.1 exact (C*T/8 - P)/H", f"{paper['eq1_exact']:,}", f"{ours['eq1_exact']:,}", "-"),
        ("eq.2 max clients unicast C/BW", f"{paper['eq2_max_clients_uc']:,}",
         f"{ours['eq2_max_clients_uc']:,}", f"{fig['max_clients_uc'][0]:,}"),
        ("eq.3 TT_CC per payload [B]", paper["eq3_transit_bytes"], ours["eq3_transit_bytes"], "-"),
        ("eq.4 BW_transit [kb/s]", f"{paper['eq4_bw_transit_bps'] / 1e3:.1f}",
         f"{ours['eq4_bw_transit_bps'] / 1e3:.1f}", "-"),
        ("eq.5 LT_CC per payload [B]", paper["eq5_local_bytes"], ours["eq5_local_bytes"], "-"),
        ("eq.6 BW_local [kb/s]", f"{paper['eq6_bw_local_bps'] / 1e3:.1f}",
         f"{ours['eq6_bw_local_bps'] / 1e3:.1f}", "-"),
        (f"eq.7 TT_P2P, i={a.i if a.i is not None else a.k} arcs [B]",
         paper["eq7_transit_p2p_bytes"], ours["eq7_transit_p2p_bytes"], "-"),
        ("eq.8 CoreCast transit <= P2P", paper["eq8_corecast_wins"], ours["eq8_corecast_wins"],
         "-"),
        (f"eq.9 alpha threshold, P_CC from D={a.D}", f"{paper['eq9_alpha']:.4f}",
         f"{ours['eq9_alpha']:.4f}", f"{fig['alpha_1200'][0]}" if a.D == 1200 else "-"),
        ("eq.9 alpha threshold, D=400", f"{paper['eq9_alpha_400']:.4f}",
         f"{ours['eq9_alpha_400']:.4f}", f"{fig['alpha_400'][0]}"),
    ]
    for name, p, o, t in lines:
        print(f"{name:44} {p!s:>14} {o!s:>14} {t!s:>12}")
    m = r["memory"]
    print(f"\nMemory model, {a.channels:,} channels x {a.ases:,} ASes (paper section 3.5):")
    print(f"  ETR payloadBuffer     paper {m['paper_etr']:>12,} B   ours {m['ours_etr']:>12,} B"
          f"   (paper text: 'just over 1 MB')")
    print(f"  ITR servedRLOC IPv6   paper {m['paper_itr']['served_rloc']:>12,} B   ours "
          f"{m['ours_itr_v6']['served_rloc']:>12,} B   (paper text: '16 MB')")
    print(f"  ITR servedRLOC IPv4                          ours "
          f"{m['ours_itr_v4']['served_rloc']:>12,} B")
    print(f"  ITR total IPv6        paper {m['paper_itr']['total']:>12,} B   ours "
          f"{m['ours_itr_v6']['total']:>12,} B")
    if "measured_itr_state" in r:
        s = r["measured_itr_state"]
        model_b = model.itr_memory(a.measure_channels, a.measure_ases, ours["P_CC"], 4)
        print(f"\nRunning ITR core, {a.measure_channels} channels x {a.measure_ases} ETRs: "
              f"state {s['total_bytes']:,} B (model {model_b['total']:,} B); "
              f"Python heap {s['python_heap_bytes']:,} B")
    t1 = model.table1_corecast_row(ours=model.our_sizes(a.transport, a.ipv6_rloc, a.ipv6_eid))
    print(f"\nTable 1 CoreCast row from the paper's counts (k=1,853, j=202, 2:45 h, "
          f"N={t1['payloads']:,.0f} payloads):")
    for key in ("paper", ours["sizes"]["name"]):
        print(f"  {key + ' sizes':18} TT {t1[key]['TT_GB']:8.1f} GB   LT {t1[key]['LT_GB']:8.1f} GB")
    print(f"  {'paper text':18} TT {t1['paper_text']['TT_GB']:8.1f} GB   "
          f"LT {t1['paper_text']['LT_GB']:8.1f} GB")
    print("\nWhere the paper's text and formulas disagree:")
    for line in model.explain():
        print("  - " + line)
    return 0


def _deploy(a: argparse.Namespace) -> int:
    from corecast.deploy import check, run_fig2

    r = run_fig2(10 if a.quick else a.chunks, transport=a.transport,
                 extra_payload_every=a.extra_payload_every)
    bad = check(r)
    if a.json:
        r["failed_checks"] = bad
        _print_json(r)
    else:
        lay = r["layout"]
        print(f"Fig. 2 on loopback: source {lay['source']}, ITR {lay['itr']}, map-server "
              f"{lay['ms']}, ETRs {', '.join(lay['etrs'])}, {r['clients']} clients, "
              f"{r['chunks']} chunks in {r['elapsed_s']:.2f} s")
        for eid, s in r["client_stats"].items():
            print(f"  client {eid:16} received {s['received']:4} lost {s['lost']} dup "
                  f"{s['duplicates']} reordered {s['reordered']} jitter {s['jitter_ms']} ms")
        print(f"  transit ITR->ETRs  {r['transit_bytes']:>10} B   eq. 3: {r['eq3_bytes']:>10} B")
        for h, v in r["transit_per_link"].items():
            print(f"    link to {h:14} {v:>10} B   eq. 3: {r['eq3_per_link'][h]:>10} B")
        print(f"  local ETRs->clients {r['local_bytes']:>9} B   eq. 5: {r['eq5_bytes']:>10} B")
        print("  checks: " + ("all pass" if not bad else "; ".join(bad)))
    return 0 if not bad else 1


# ------------------------------------------------------------------- parser


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--duration", type=cliutil.positive_float, default=None,
                   help="seconds to run (default: forever)")


def _itr_args(p: argparse.ArgumentParser, embedded: bool = False) -> None:
    """The ITR's options: for `corecast itr`, or for a source that is its own ITR
    (``embedded``: they then apply with --as-itr, which makes --cc-range needed)."""
    when = " (with --as-itr)" if embedded else ""
    p.add_argument("--cc-range", action="append", required=not embedded, default=[],
                   help=f"reserved CoreCast EID range, repeatable{when}")
    p.add_argument("--map-resolver", help=f"HOST[:PORT] for Map-Requests{when}")
    p.add_argument("--map-cache", type=_file,
                   help=f"static map-cache file: 'prefix rloc[,rloc] [ttl]' lines{when}")
    p.add_argument("--control-port", type=cliutil.port, default=LISP_CONTROL_PORT,
                   help=f"UDP port for LISP control messages (Map-Request/Reply){when}")
    p.add_argument("--extra-payload-every", type=cliutil.nonnegative_int, default=0,
                   help=f"an extra payload copy after every N headers to the same ETR "
                        f"(Algorithm 1; 0 = off){when}")
    p.add_argument("--max-channels", type=cliutil.positive_int, default=1024,
                   help=f"payloadBuffer entries at most (one per channel){when}")


def _trust_args(p: argparse.ArgumentParser, when: str = "") -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("--trust-rloc", action="append", default=[], type=cliutil.ip_network,
                   metavar="ADDR|PREFIX",
                   help=f"accept LISP data only from these RLOCs: an address or prefix of the "
                        f"ITRs (repeatable){when}")
    g.add_argument("--trust-any-rloc", action="store_true",
                   help=f"accept LISP data from any RLOC (unsafe on a reachable address){when}")


instance_id = cliutil.int_in(0, 0xFFFFFF, "Instance ID")
key_id = cliutil.int_in(0, 0xFFFF, "key ID")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="corecast", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="CoreCast over LISP: each role as its own process, the paper's model (plan) "
                    "and Fig. 2 on loopback (deploy).",
        epilog="Every role prints 'corecast ROLE: ready {...}' on stderr once it serves and its "
               "counters as JSON on stdout when it stops;\nexit status 0, 1 (a required step "
               "kept failing), 130 (SIGINT) or 143 (SIGTERM). See README.md, 'The roles by hand'.")
    sub = ap.add_subparsers(dest="cmd", required=True)

    p = sub.add_parser("mapserver", help="LISP map-server / map-resolver",
                       description="LISP map-server and map-resolver: authenticates Map-Registers "
                                   "of the configured sites and answers Map-Requests.")
    p.add_argument("--addr", required=True, help="address to serve on (map-server and map-resolver)")
    p.add_argument("--port", type=cliutil.port, default=LISP_CONTROL_PORT,
                   help="UDP port (LISP control, 4342)")
    p.add_argument("--site", action="append", required=True, type=_site,
                   help="NAME:PREFIX[,PREFIX]:KEYID:PSK (repeatable)")
    p.add_argument("--instance-id", type=instance_id, action="append", default=[],
                   help="an Instance ID the sites may register besides 0 (repeatable)")
    _common(p)

    p = sub.add_parser("etr", help="CoreCast ETR (Algorithm 2)",
                       description="CoreCast egress tunnel router: decapsulates LISP data from "
                                   "trusted RLOCs for this site's EIDs only, and turns CoreCast "
                                   "header packets into unicast copies to the site's clients.")
    p.add_argument("--rloc", required=True, help="this ETR's locator (RLOC) address")
    p.add_argument("--prefix", action="append", required=True, type=cliutil.ip_network, metavar="PREFIX",
                   help="this site's EID prefix (repeatable): registered, and the only "
                        "destinations the ETR delivers to")
    _trust_args(p)
    p.add_argument("--map-server", help="HOST[:PORT] of the map-server to register with")
    p.add_argument("--key-id", type=key_id, default=0, help="Map-Register key ID (0-65535)")
    p.add_argument("--algorithm-id", type=int, choices=[1, 2], default=2,
                   help="Map-Register algorithm ID: 1 HMAC-SHA-1-96, 2 HMAC-SHA-256-128")
    p.add_argument("--psk", default="", help="Map-Register pre-shared key")
    p.add_argument("--register-interval", type=cliutil.positive_float, default=60.0, metavar="SECONDS",
                   help="seconds between Map-Registers once registered (RFC 9301 sec. 8.2: 60)")
    p.add_argument("--register-retries", type=cliutil.nonnegative_int, default=3,
                   help="Map-Register retransmissions (1 s, 2 s, 4 s ... apart) before giving up "
                        "with an error (default 3)")
    p.add_argument("--cc-range", action="append", required=True,
                   help="reserved CoreCast EID range (repeatable)")
    p.add_argument("--multicast", action="append", help="CHANNEL=GROUP:PORT")
    p.add_argument("--multicast-if", help="local address of the intra-domain interface")
    p.add_argument("--data-port", type=cliutil.port, default=4341, help="UDP port for LISP data (4341)")
    p.add_argument("--control-port", type=cliutil.port, default=LISP_CONTROL_PORT,
                   help="UDP port for LISP control (Map-Notify)")
    p.add_argument("--instance-id", type=instance_id, default=None,
                   help="decapsulate and register only this instance (RFC 9300 sec. 8)")
    p.add_argument("--map-version", type=map_version, default=None,
                   help="Map-Version 1..4095 carried in the Map-Register records (RFC 9302 sec. 5)")
    _common(p)

    p = sub.add_parser("itr", help="CoreCast ITR (Algorithm 1)",
                       description="CoreCast ingress tunnel router: encapsulates the inner packets "
                                   "it receives on --inside towards the RLOCs its map-cache names; "
                                   "with --data-port also an ETR (an xTR).")
    p.add_argument("--rloc", required=True, help="this ITR's locator (RLOC) address")
    p.add_argument("--inside", required=True, help="HOST:PORT receiving inner IP packets")
    _itr_args(p)
    p.add_argument("--instance-id", type=instance_id, default=None,
                   help="I-bit + IID in every header; map-cache and Map-Requests of this instance")
    p.add_argument("--data-port", type=cliutil.port, default=None,
                   help="also an ETR on RLOC:PORT (an xTR: reverse traffic, echo-nonce)")
    p.add_argument("--prefix", action="append", default=[], type=cliutil.ip_network, metavar="PREFIX",
                   help="this site's EID prefix (repeatable; xTR): the only destinations its ETR "
                        "half delivers to")
    _trust_args(p, " (xTR)")
    p.add_argument("--echo-nonce", action="store_true", help="RFC 9300 sec. 10.1 (needs --data-port)")
    p.add_argument("--local-rloc", action="append", default=[],
                   help="this site's locators in mapping order: Locator-Status-Bits (xTR)")
    p.add_argument("--map-version", type=map_version, default=None,
                   help="this site's Map-Version 1..4095: map-versioning on (RFC 9302; xTR)")
    _common(p)

    p = sub.add_parser("source", help="CoreCast source",
                       description="CoreCast source: streams each channel as RTP chunks through an "
                                   "ITR (or is its own ITR) and serves join/leave/heartbeat over HTTP.")
    p.add_argument("--eid", required=True, help="the source's EID (its address)")
    p.add_argument("--channel", action="append", required=True, help="channel EID (repeatable)")
    p.add_argument("--bitrate", type=cliutil.positive_float, default=384_000.0, help="b/s per channel")
    p.add_argument("--chunk-size", type=cliutil.positive_int, default=1200, help="chunk D in bytes")
    p.add_argument("--itr", help="HOST:PORT of the ITR's inside interface")
    p.add_argument("--as-itr", action="store_true", help="perform the ITR function (sec. 3.4)")
    _itr_args(p, embedded=True)
    p.add_argument("--transport", choices=["udp", "raw"], default="udp")
    p.add_argument("--http-port", type=cliutil.port, default=0,
                   help="port of the HTTP subscription service (0 = any free one)")
    p.add_argument("--heartbeat-timeout", type=cliutil.positive_float, default=300.0,
                   help="seconds without a heartbeat before a client is removed")
    p.add_argument("--mtu", type=cliutil.positive_int, default=1500,
                   help="path MTU: the chunk size is cut to fit it")
    p.add_argument("--chunks", type=cliutil.positive_int, help="stop after this many chunks")
    p.add_argument("--input", type=_file, help="media file to stream instead of a test pattern")
    p.add_argument("--wait-subscribers", type=cliutil.nonnegative_int, default=0,
                   help="start streaming once this many clients joined")
    p.add_argument("--linger", type=cliutil.nonnegative_float, default=0.2,
                   help="seconds to keep running after the last chunk")
    _common(p)

    p = sub.add_parser("client", help="CoreCast client",
                       description="CoreCast client: joins a channel at the source and counts the "
                                   "chunks it receives (loss, order, jitter), accepting them only "
                                   "from the source and this domain's ETRs.")
    p.add_argument("--eid", required=True, help="the client's EID (its address)")
    p.add_argument("--port", type=cliutil.port, default=0,
                   help="UDP port to receive the stream on (0 = any free one)")
    p.add_argument("--join", help="HOST:PORT of the source's subscription service")
    p.add_argument("--channel", help="channel EID to join")
    p.add_argument("--no-corecast", action="store_true", help="my domain has no CoreCast ETR")
    p.add_argument("--etr", action="append", default=[], type=cliutil.ip_address, metavar="RLOC",
                   help="RLOC of this domain's ETR (repeatable): the stream is accepted only from "
                        "the ETRs and the source; other senders are counted in 'rejected'")
    p.add_argument("--accept-any", action="store_true",
                   help="accept the stream from any sender (unsafe: anyone can inject chunks)")
    p.add_argument("--join-timeout", type=cliutil.positive_float, default=30.0,
                   help="seconds to keep retrying the join while the source is not up (default 30)")
    p.add_argument("--heartbeat", type=cliutil.positive_float, default=None,
                   help="seconds between heartbeats (default: none)")
    p.add_argument("--leave", action="store_true", help="send leave before exiting")
    p.add_argument("--chunks", type=cliutil.positive_int, help="exit after receiving this many chunks")
    p.add_argument("--stall-warning", type=cliutil.nonnegative_float, default=10.0, metavar="SECONDS",
                   help="warn once when nothing arrived this long after joining (0 = never; default 10)")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="a status line on stderr (default: when stderr is a terminal)")
    _common(p)

    p = sub.add_parser("plan", help="equations 1-9 and the memory model",
                       description="The paper's analytical model: equations 1-9 and the memory "
                                   "model, with the paper's sizes and ours.")
    p.add_argument("--C", type=cliutil.positive_float, default=10e9, help="line rate, b/s")
    p.add_argument("--BW", type=cliutil.positive_float, default=384e3, help="stream rate, b/s")
    p.add_argument("--D", type=cliutil.positive_int, default=1200, help="chunk size, bytes")
    p.add_argument("--j", type=cliutil.positive_int, default=3, help="ASes with clients (RLOCs)")
    p.add_argument("--k", type=cliutil.positive_int, default=7, help="clients")
    p.add_argument("--i", type=int, default=None, help="P2P inter-domain arcs (eq. 7)")
    p.add_argument("--transport", choices=["udp", "raw"], default="udp")
    p.add_argument("--ipv6-eid", action="store_true")
    p.add_argument("--ipv6-rloc", action="store_true")
    p.add_argument("--channels", type=cliutil.positive_int, default=1000,
                   help="channels N in the memory model")
    p.add_argument("--ases", type=cliutil.positive_int, default=1000, help="ASes M in the memory model")
    p.add_argument("--measure", action="store_true", help="also measure our ITR core's state")
    p.add_argument("--measure-channels", type=cliutil.positive_int, default=20,
                   help="channels in the measured ITR (with --measure)")
    p.add_argument("--measure-ases", type=cliutil.positive_int, default=100,
                   help="ASes in the measured ITR (with --measure)")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")

    sub.add_parser("experiment", help="fig2-testbed | overhead | trace (each has --quick)")

    p = sub.add_parser("deploy", help="the paper's Fig. 2 on loopback, in one command",
                       description="Runs the paper's Fig. 2 (source, ITR, map-server, 3 ETRs, "
                                   "7 clients) on loopback and checks equations 3 and 5.")
    p.add_argument("--chunks", type=cliutil.positive_int, default=40, help="chunks to stream")
    p.add_argument("--quick", action="store_true", help="10 chunks")
    p.add_argument("--transport", choices=["udp", "raw"], default="udp")
    p.add_argument("--extra-payload-every", type=cliutil.nonnegative_int, default=0,
                   help="an extra payload copy after every N headers to the same ETR (0 = off)")
    p.add_argument("--json", action="store_true", help="print the whole result as JSON")
    return ap


EXPERIMENTS = {
    "fig2-testbed": "corecast.experiments.fig2_testbed",
    "overhead": "corecast.experiments.overhead",
    "trace": "corecast.experiments.trace",
}

ROLES = {"mapserver": _mapserver, "etr": _etr, "itr": _itr, "source": _source,
         "client": _client}


@cliutil.cli_main("corecast", expected=(argparse.ArgumentTypeError,))
def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["experiment"]:
        return dispatch("corecast", EXPERIMENTS, argv[1:])
    a = build_parser().parse_args(argv)
    if a.cmd == "plan":
        return _plan(a)
    if a.cmd == "deploy":
        return _deploy(a)
    if a.cmd == "source" and not a.as_itr and not a.itr:
        build_parser().error("source needs --itr HOST:PORT or --as-itr")
    if a.cmd == "source" and a.as_itr and not a.cc_range:
        build_parser().error("--as-itr needs --cc-range")
    _check_role_args(a)
    outcome = asyncio.run(_role(a))
    _print_json(outcome.result)
    return outcome.code


def _check_role_args(a: argparse.Namespace) -> None:
    """Cross-option rules argparse cannot express: usage errors (exit 2)."""
    ap = build_parser()
    if a.cmd == "etr" and not (a.trust_rloc or a.trust_any_rloc):
        ap.error("etr: name the ITRs it accepts LISP data from: --trust-rloc ADDR|PREFIX "
                 "(repeatable), or --trust-any-rloc")
    if a.cmd == "itr":
        if a.data_port is None and (a.echo_nonce or a.local_rloc or a.map_version is not None
                                    or a.prefix or a.trust_rloc or a.trust_any_rloc):
            ap.error("--echo-nonce, --local-rloc, --map-version, --prefix and --trust-rloc "
                     "need --data-port (an xTR)")
        if a.data_port is not None and not a.prefix:
            ap.error("an xTR (--data-port) needs --prefix: this site's EID prefixes")
        if a.data_port is not None and not (a.trust_rloc or a.trust_any_rloc):
            ap.error("an xTR (--data-port) needs --trust-rloc ADDR|PREFIX (repeatable) "
                     "or --trust-any-rloc")
    if a.cmd == "client" and not (a.join or a.etr or a.accept_any):
        ap.error("client: --join HOST:PORT (the source), --etr RLOC or --accept-any: "
                 "whom to accept the stream from")
    if a.cmd == "client" and a.join and not a.channel:
        ap.error("client: --join needs --channel")


async def _role(a: argparse.Namespace) -> Outcome:
    """Run one role under the signal contract (deliverykit.cliutil.Stopper)."""
    stopper = cliutil.Stopper().install()
    try:
        return await ROLES[a.cmd](a, stopper)
    finally:
        stopper.remove()


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
