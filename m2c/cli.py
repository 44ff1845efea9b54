"""Command line: ``m2c send FILE``, ``m2c receive SDP -o FILE`` and ``m2c experiment NAME``.

Rates are given in kbit/s and converted to packets per second with the
symbol size.  The session description (JSON) is written by ``send`` (``--sdp``)
and read by ``receive`` from a path or an http(s) URL (at most 1 MiB); ``send
--serve-sdp PORT`` also serves it over HTTP on the interface address.

``receive`` joins on ``--interface`` (default: INADDR_ANY, or 127.0.0.1 for a
loopback sender), accepts datagrams only from the session's source address,
and ends early, with one error line and exit status 1, when the session ends
before the file is complete: RFC 3738 3.2.3.8's exceptional timeouts or the
sender's close-session flag.  The output file is only ever the verified file.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import json
import math
import os
import signal
import sys
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import asdict
from typing import Any

from deliverykit import cliutil
from deliverykit.deadline import within
from deliverykit.experiments import dispatch
from deliverykit.outputs import write_when_done
from m2c.aio.delivery import sha256_file
from m2c.aio.driver import (
    MAX_SEND_PPS,
    MulticastReceiver,
    MulticastSender,
    ReceiveProgress,
    ReceiveResult,
    SendResult,
    make_session,
    sender_socket_check,
)
from m2c.aio.netif import interface_address
from m2c.core.description import SessionDescription
from m2c.core.groups import SCHEDULES, make_schedule
from m2c.core.receiver_cc import CONTROLLERS
from m2c.fec.errors import FECError
from m2c.wire.codec import FEC_CODEPOINTS, packet_overhead

SDP_LIMIT = 1 << 20
"""bytes of a session description read over HTTP at most"""

EXPERIMENTS = {
    "hetero": "m2c.experiments.hetero",
    "fig5": "m2c.experiments.fig5",
    "dupsim": "m2c.experiments.dupsim",
    "many": "m2c.experiments.many",
    "fairness": "m2c.experiments.fairness",
}


def _multicast_group(text: str) -> str:
    addr = cliutil.ip_address(text)
    if addr.version != 4 or not addr.is_multicast:
        raise argparse.ArgumentTypeError(f"{text} is not an IPv4 multicast address (224.0.0.0/4)")
    return str(addr)


def _ipv4_unicast(text: str) -> str:
    addr = cliutil.ip_address(text)
    if addr.version != 4 or addr.is_multicast:
        raise argparse.ArgumentTypeError(f"{text} is not a local IPv4 interface address")
    return str(addr)


def _local_interface(text: str) -> str:
    """An interface's IPv4 address, given as the address or as the interface's name."""
    if text[:1].isdigit() or ":" in text:
        return _ipv4_unicast(text)
    try:
        return interface_address(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _send_interface(text: str) -> str:
    addr = _local_interface(text)
    if ipaddress.IPv4Address(addr).is_unspecified:
        raise argparse.ArgumentTypeError(
            f"{text} is no interface's address: the sender's datagrams would come from "
            f"another address than the session description names, and receivers drop them")
    return addr


def _symbol_size(text: str) -> int:
    size = cliutil.positive_int(text)
    if size > 65_000:
        raise argparse.ArgumentTypeError(f"{size} bytes does not fit in one UDP datagram")
    return size


def _input_file(text: str):
    if os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{text} is a directory: m2c send takes one file")
    return cliutil.existing_file(text)


_port = cliutil.int_in(1, 65535, "port")
MCAST_LAST = int(ipaddress.IPv4Address("239.255.255.255"))


def _pps(kbps: float, symbol: int, fec: str = "ldpc") -> float:
    return kbps * 1000 / 8 / (symbol + packet_overhead(fec))


def load_sdp(src: str) -> SessionDescription:
    """Session description from a file path or an http(s) URL."""
    if src.startswith(("http://", "https://")):
        with urllib.request.urlopen(src, timeout=10) as r:  # noqa: S310 - user-given URL
            body = r.read(SDP_LIMIT + 1)
        if len(body) > SDP_LIMIT:
            raise ValueError(f"more than {SDP_LIMIT >> 20} MiB: not a session description")
        return SessionDescription.from_json(body.decode())
    with open(src, encoding="utf-8") as f:
        return SessionDescription.from_json(f.read())


async def _serve_sdp(text: str, host: str, port: int) -> asyncio.AbstractServer:
    body = text.encode()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            try:
                await within(reader.readuntil(b"\r\n\r\n"), 5)
            except asyncio.LimitOverrunError:  # a request head of more than 64 KiB
                writer.write(b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
                             b"Content-Length: 0\r\nConnection: close\r\n\r\n")
            else:
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                             b"Content-Length: %d\r\nConnection: close\r\n\r\n"
                             % len(body) + body)
            await writer.drain()
        except (asyncio.TimeoutError, asyncio.IncompleteReadError, ConnectionError):
            pass  # a client that says nothing, or leaves: nothing to answer
        finally:
            writer.close()

    return await asyncio.start_server(handle, host, port)


def _send_error(text: str, status: int = 2) -> int:
    print(f"m2c send: error: {text}", file=sys.stderr)
    return status


def _session_for_send(a: argparse.Namespace) -> SessionDescription | int:
    """A new session description from the options, or (``--resume``) the one in
    ``--sdp`` if it exists and describes this very file."""
    if a.resume and a.sdp and os.path.exists(a.sdp):
        try:
            sd = load_sdp(str(a.sdp))
        except (OSError, ValueError, TypeError) as exc:
            return _send_error(f"--resume: cannot read the session description {a.sdp}: {exc}")
        size = os.path.getsize(a.file)
        if size != sd.size or sha256_file(str(a.file)) != sd.sha256.lower():
            return _send_error(f"--resume: {a.file} ({size} bytes) is not the file {a.sdp} "
                               f"describes ({sd.name}, {sd.size} bytes, SHA-256 "
                               f"{sd.sha256[:16]}...)")
        print(f"m2c send: resuming session {sd.session} of {a.sdp} (its groups, rates and FEC "
              f"parameters; the command line's are ignored)", file=sys.stderr)
        return sd
    if a.min_rate >= a.max_rate:
        return _send_error(f"--min-rate {a.min_rate:g} must be below --max-rate {a.max_rate:g}")
    min_pps = _pps(a.min_rate, a.symbol_size, a.fec)
    max_pps = _pps(a.max_rate, a.symbol_size, a.fec)
    if max_pps > MAX_SEND_PPS:
        return _send_error(
            f"--max-rate {a.max_rate:g} kbit/s is {max_pps:.0f} packets/s of {a.symbol_size} "
            f"bytes; this sender schedules at most {MAX_SEND_PPS} packets/s (about "
            f"{MAX_SEND_PPS * (a.symbol_size + packet_overhead(a.fec)) * 8 / 1000:.0f} kbit/s): "
            f"use a lower --max-rate or a larger --symbol-size")
    channels = make_schedule(a.schedule, min_rate=min_pps, max_rate=max_pps, tsd=a.tsd,
                             k=a.k).channels
    last = a.port + channels  # one port per channel, counting up from --port
    if last > 65535:
        return _send_error(f"--port {a.port} leaves no room for {channels + 1} groups' ports "
                           f"(the last would be {last}; use --port {65535 - channels} or lower)")
    g0 = int(ipaddress.IPv4Address(a.group))
    if g0 + channels > MCAST_LAST:
        return _send_error(
            f"--group {a.group} leaves no room for {channels + 1} groups (base + {channels} "
            f"channels): the last would be {ipaddress.IPv4Address((g0 + channels) & 0xFFFFFFFF)}"
            f", beyond the multicast range 224.0.0.0/4; use --group "
            f"{ipaddress.IPv4Address(MCAST_LAST - channels)} or lower")
    return make_session(str(a.file), group=a.group, port=a.port, interface=a.interface,
                        min_rate=min_pps, max_rate=max_pps, tsd=a.tsd, k=a.k,
                        schedule=a.schedule, fec=a.fec, symbol_size=a.symbol_size,
                        max_block_length=a.block_length)


def cmd_send(a: argparse.Namespace) -> int:
    sd = _session_for_send(a)
    if isinstance(sd, int):
        return sd
    try:  # before the description is written: no file left for a session never sent
        sender_socket_check(sd.interface)
    except OSError as exc:
        return _send_error(f"cannot send from --interface {sd.interface}: "
                           f"{exc.strerror or exc}", 1)
    text = sd.to_json()

    stopper = cliutil.Stopper()

    async def main() -> SendResult:
        # SIGINT and SIGTERM alike: close the session (unless --no-close), print the
        # counters, exit 130 / 143 (the CLI contract, deliverykit.cliutil.Stopper)
        stopper.install()
        server = None
        if a.serve_sdp:  # before the description is written, like the interface check
            try:
                server = await _serve_sdp(text, sd.interface, a.serve_sdp)
            except OSError as exc:
                why = os.strerror(exc.errno) if exc.errno else str(exc)
                raise OSError(exc.errno, f"--serve-sdp: cannot listen on {sd.interface} "
                                         f"port {a.serve_sdp}: {why}") from None
        if a.sdp and not (a.resume and os.path.exists(a.sdp)):
            write_when_done(a.sdp, text)  # a receiver polling for it never reads half
            r = sd.rates
            print(f"session description: {a.sdp} (rates {r.min_rate:.1f}..{r.max_rate:.1f} "
                  f"packets/s of {sd.fec.symbol_size}-byte symbols)", file=sys.stderr)
        elif not a.sdp:
            print(text, flush=True)
        if server is not None:
            print(f"serving it at http://{sd.interface}:{a.serve_sdp}/", file=sys.stderr)
        sender = MulticastSender(sd, str(a.file), close=not a.no_close)
        status = None
        if a.progress or sys.stderr.isatty():
            status = asyncio.create_task(_send_status(sd.name, sender, sys.stderr.isatty()))
        try:
            return await sender.send(duration=a.duration, stop=stopper.event)
        finally:
            if status is not None:
                status.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await status
            if server is not None:
                server.close()
            stopper.remove()

    try:
        stats = asyncio.run(main())
    finally:  # a second signal during the clean-up too
        if a.no_close:
            print(f"m2c send: stopped; session {sd.session} not closed (--no-close): "
                  f"receivers wait up to their no-packet timeout for a sender restarted "
                  f"with --resume", file=sys.stderr)
    print(json.dumps(asdict(stats)), file=sys.stderr)
    sent, dropped = stats.packets, stats.tx_dropped
    if sent and dropped >= sent:
        print(f"m2c send: error: every one of {sent} packets was dropped by the socket "
              f"(is {sd.interface} an interface that can send to {sd.groups[0][0]}?)",
              file=sys.stderr)
        return 1
    return stopper.exit_code(0)


PROGRESS_LINE_EVERY = 2.0
"""s between two progress lines on a stderr that is not a terminal (--progress)"""


async def _send_status(name: str, sender: MulticastSender, tty: bool) -> None:
    """The sender's progress on stderr: packets sent, IP-level rate over the last
    interval, time; one line rewritten every second on a terminal, else (--progress)
    one line every PROGRESS_LINE_EVERY s.  Ends its terminal line when cancelled."""
    loop = asyncio.get_running_loop()
    t0 = t = loop.time()
    ip_bytes = 0
    printed = False
    every = 1.0 if tty else PROGRESS_LINE_EVERY
    try:
        while True:
            await asyncio.sleep(every)
            now = loop.time()
            b = sender.bytes + 28 * sender.sent  # IPv4 + UDP headers
            kbps = (b - ip_bytes) * 8 / 1000 / (now - t) if now > t else 0.0
            line = f"m2c send: {name}: {sender.sent} packets, {kbps:.0f} kbit/s, {now - t0:.0f} s"
            print(f"\r\x1b[K{line}" if tty else line, end="" if tty else "\n",
                  file=sys.stderr, flush=True)
            t, ip_bytes, printed = now, b, True
    finally:
        if tty and printed:
            print(file=sys.stderr, flush=True)


def _progress_line(name: str, p: ReceiveProgress) -> str:
    f = p.file
    return (f"m2c receive: {name}: {f.symbols}/{f.needed} symbols ({f.percent:.1f} %), "
            f"{p.rate_kbps:.0f} kbit/s, {p.layers} layer{'s' if p.layers != 1 else ''}, "
            f"{f.blocks_done}/{f.blocks} blocks decoded, {p.elapsed:.0f} s")


@contextlib.contextmanager
def _progress_display(sd: SessionDescription,
                      a: argparse.Namespace) -> Iterator[Callable[[ReceiveProgress], None]]:
    """The receiver's ``on_progress`` (issue 13 item 18): source symbols held and needed
    (a large file's few blocks all decode near the end), rate and layers, on stderr:
    a bar when stderr is a terminal, else one line every PROGRESS_LINE_EVERY s with
    ``--progress``; nothing with -q."""
    if a.quiet or not (a.progress or sys.stderr.isatty()):
        yield lambda p: None
        return
    if not sys.stderr.isatty():
        last: list[Any] = [None, -math.inf, False]  # progress, time printed, printed

        def line(p: ReceiveProgress) -> None:
            last[0], last[2] = p, False
            if p.elapsed - last[1] >= PROGRESS_LINE_EVERY:
                print(_progress_line(sd.name, p), file=sys.stderr, flush=True)
                last[1], last[2] = p.elapsed, True

        try:
            yield line
        finally:
            if last[0] is not None and not last[2]:  # where it ended
                print(_progress_line(sd.name, last[0]), file=sys.stderr, flush=True)
        return
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("[bold]{task.description}"), BarColumn(),
                  TextColumn("{task.completed}/{task.total} symbols"), TaskProgressColumn(),
                  TextColumn("{task.fields[rate]:.0f} kbit/s, {task.fields[layers]} layer(s)"),
                  TimeElapsedColumn(), console=Console(stderr=True),
                  transient=False) as prog:
        task = prog.add_task(sd.name, total=sd.partition().total_symbols or 1, rate=0.0,
                             layers=0)
        yield lambda p: prog.update(task, completed=p.file.symbols, rate=p.rate_kbps,
                                    layers=p.layers)


def cmd_receive(a: argparse.Namespace) -> int:
    try:
        sd = load_sdp(a.sdp)
    except (OSError, ValueError, TypeError) as exc:
        print(f"m2c receive: cannot read the session description {a.sdp!r}: {exc}",
              file=sys.stderr)
        return 2
    output = str(a.output)
    to_stdout = output in ("-", "/dev/stdout", "/dev/fd/1", "/proc/self/fd/1")
    shown = "stdout" if output == "-" else output
    stopper = cliutil.Stopper()

    with _progress_display(sd, a) as show:
        rx = MulticastReceiver(sd, output, controller=a.controller, interface=a.interface,
                               on_progress=show)

        async def go() -> ReceiveResult:
            # SIGINT and SIGTERM alike end the transfer: the temporary file is removed,
            # the counters printed, exit 130 / 143 (deliverykit.cliutil.Stopper)
            with stopper.installed():
                return await rx.receive(timeout=a.timeout, stop=stopper.event)

        res = asyncio.run(go())
    out = {k: v for k, v in asdict(res).items() if k != "metrics" and (a.trace or k != "trace")}
    out["metrics"] = {k: (round(v, 3) if isinstance(v, float) else v)
                      for k, v in asdict(res.metrics).items()}
    text = json.dumps(out, indent=None if a.quiet else 1)
    if a.json:
        write_when_done(a.json, text + "\n")
    else:  # the file itself may be on stdout: then the JSON goes to stderr
        print(text, file=sys.stderr if to_stdout else sys.stdout)
    mm = out["metrics"]
    if stopper.stopped:
        sig = signal.Signals(stopper.signum).name if stopper.signum else "a signal"
        written = "written" if res.ok else "not written"
        print(f"m2c receive: {stopper.describe()} ({sig}); {shown} {written}", file=sys.stderr)
        return stopper.exit_code()
    if not res.ok:
        print(f"m2c receive: error: {sd.name}: {res.end or 'transfer failed'}; "
              f"{shown} not written", file=sys.stderr)
        return 1
    if not a.quiet:
        print(f"m2c receive: {sd.name}: ok, SHA-256 verified, written to {shown}; " + ", ".join(
            f"{k} {mm[k]}" for k in ("time", "gput", "loss", "dup", "sym") if k in mm),
            file=sys.stderr)
    return 0


@cliutil.cli_main("m2c", expected=(FECError,))
def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["experiment"]:
        return dispatch("m2c", EXPERIMENTS, argv[1:])
    ap = argparse.ArgumentParser(
        prog="m2c", description="M2C: send a file to many receivers over IP multicast "
        "(ALC/LCT, layered congestion control, FEC) and receive it, verified by SHA-256.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("send", help="send a file by carousel over multicast")
    s.add_argument("file", type=_input_file, help="the file to send")
    s.add_argument("--sdp", type=cliutil.output_path,
                   help="write the session description here (default: stdout)")
    s.add_argument("--resume", action="store_true",
                   help="if --sdp names an existing description of this file (same size and "
                        "SHA-256), send that session again (same session ID, FEC seed, groups, "
                        "rates): a restarted sender serves the receivers still running")
    s.add_argument("--serve-sdp", type=cliutil.port, metavar="PORT", help="also serve it over HTTP")
    s.add_argument("--group", type=_multicast_group, default="239.192.77.1",
                   help="first IPv4 multicast group (base); one group per channel counting up "
                        "(default %(default)s)")
    s.add_argument("--port", type=_port, default=47000,
                   help="first UDP port (base); one port per channel counting up "
                        "(default %(default)s)")
    s.add_argument("--interface", type=_send_interface, default="127.0.0.1",
                   metavar="ADDR|NAME",
                   help="the interface to send from, by IPv4 address or name (lo, eth0); "
                        "the session description names its address (default %(default)s)")
    s.add_argument("--min-rate", type=cliutil.positive_float, default=256.0,
                   help="kbit/s of the base group, IP level (default %(default)s)")
    s.add_argument("--max-rate", type=cliutil.positive_float, default=20000.0,
                   help="kbit/s of all groups together, IP level (default %(default)s)")
    s.add_argument("--tsd", type=cliutil.positive_float, default=1.0,
                   help="time slot duration, s (default %(default)s)")
    s.add_argument("--k", type=cliutil.positive_int, default=2,
                   help="groups renewed per time slot (default %(default)s)")
    s.add_argument("--schedule", choices=sorted(SCHEDULES), default="wave",
                   help="rate schedule: WEBRC-like waves or FLID-DL-like steps "
                        "(default %(default)s)")
    s.add_argument("--fec", choices=list(FEC_CODEPOINTS), default="ldpc",
                   help="LDPC-Staircase (RFC 5170) or Reed-Solomon (zfec) (default %(default)s)")
    s.add_argument("--symbol-size", type=_symbol_size, default=1400,
                   help="bytes per FEC symbol (default %(default)s)")
    s.add_argument("--block-length", type=cliutil.positive_int, metavar="SYMBOLS",
                   help="source symbols per FEC block at most (default: 3000 for LDPC, "
                        "128 for RS)")
    s.add_argument("--duration", type=cliutil.positive_float,
                   help="stop after this many seconds (default: until Ctrl-C or SIGTERM); "
                        "stopping closes the session (receivers leave) unless --no-close")
    s.add_argument("--progress", action="store_true",
                   help="report packets sent and the rate on stderr even when it is not a "
                        f"terminal: one line every {PROGRESS_LINE_EVERY:g} s (a terminal gets "
                        "one updating line anyway)")
    s.add_argument("--no-close", action="store_true",
                   help="stop (Ctrl-C, SIGTERM, --duration) without closing the session: for "
                        "a sender to be restarted with --resume, whose receivers wait for it "
                        "(--resume alone still closes on stop)")
    s.set_defaults(fn=cmd_send)
    r = sub.add_parser("receive", help="receive a file described by SDP (path or URL)")
    r.add_argument("sdp", help="the session description m2c send wrote: a path or an "
                               "http(s) URL (m2c send --serve-sdp)")
    r.add_argument("-o", "--output", required=True, type=cliutil.output_path,
                   help="where the verified file goes: a path (replaced only once the SHA-256 "
                        "matches), a device or FIFO (written into), or - for stdout")
    r.add_argument("--json", type=cliutil.output_path, metavar="FILE",
                   help="write the result and metrics JSON here (default: stdout, or stderr "
                        "with -o -)")
    r.add_argument("--interface", type=_local_interface, default=None, metavar="ADDR|NAME",
                   help="the interface to join the groups on, by IPv4 address or name (lo, "
                        "eth0) (default: 0.0.0.0, INADDR_ANY; 127.0.0.1 for a sender on "
                        "loopback)")
    r.add_argument("--controller", choices=sorted(CONTROLLERS), default="m2c",
                   help="receiver rate controller (default %(default)s)")
    r.add_argument("--timeout", type=cliutil.positive_float, default=600.0,
                   help="give up after this many s (default %(default)s); the receiver "
                        "leaves earlier when no packet arrives for max(10, TSD) s")
    r.add_argument("--progress", action="store_true",
                   help="report progress (source symbols held of those needed, rate, layers "
                        "joined) on stderr even when it is not a terminal: one line every "
                        f"{PROGRESS_LINE_EVERY:g} s (a terminal gets a bar anyway)")
    r.add_argument("-q", "--quiet", action="store_true",
                   help="quiet: no progress bar, no summary line, one-line JSON "
                        "(errors are still reported)")
    r.add_argument("--trace", action="store_true",
                   help="include the per-epoch congestion control trace in the JSON")
    r.set_defaults(fn=cmd_receive)
    sub.add_parser("experiment", help=f"run a paper experiment: {' | '.join(EXPERIMENTS)} "
                                      "(each has --quick; m2c experiment for the list)")
    a = ap.parse_args(argv)
    return int(a.fn(a))


if __name__ == "__main__":
    sys.exit(main())
