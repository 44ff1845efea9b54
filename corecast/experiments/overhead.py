"""Section 6 of the paper: ITR overhead of CoreCast vs plain forwarding, and its ablations.

Testbed (paper Fig. 7), three namespaces::

    S (raw-socket generator) --- ITR (our ITR, AF_PACKET inside) --- CAP (counts)

The client list is the skewed 1,429-client population of
:mod:`corecast.workload`, scaled x1..x7 "using the same AS distribution"
(1,429 to 10,003 clients; the map-cache holds one mapping per AS, 200),
tests interleaved 1, 7, 2, 6, 3, 5, 4 and repeated (``--reps``; the paper
used 20).  The ITR uses a static map-cache built from the population (as the
paper did).

Subjects, interleaved within every repetition:

* ``kernel``: the paper's baseline, Linux forwarding the unicast stream (one
  1,200-byte chunk per client) from S through the ITR namespace to CAP;
* ``plain/<lookup>``: our ITR LISP-encapsulating the same unicast stream (one
  EID-to-RLOC lookup per packet);
* ``corecast/<lookup>/hash on|off``: our ITR running Algorithm 1 on the
  CoreCast stream (one payload, then one header per client).

The ablations that test the paper's explanation of its +52 % (a linear
EID-to-RLOC search): ``--lookup trie,linear`` (our trie, or a scan of the
map-cache's prefixes, longest first) and ``--hash on,off`` (Algorithm 1's
per-client hash comparison, or none).  Both are options of the ITR's batch
path (C and its twin, :class:`corecast._fast.ItrPath`).

S sends for ``--seconds`` (30 in the paper; default 30, ``--quick``: the
packet list once) at each ``--rate`` packets/s, cycling the chunks, or with
``--pace-ms 25`` at the paper's real-time pace: one chunk's packets (the payload
and one header a client) every 25 ms, so the offered rate grows with the scale,
40 x (clients + 1) packets/s, 57k at x1 to 400k at x7 (the paper's Fig. 8; the
unicast stream of the other subjects is offered at the same rate).  The ITR sends
LISP data as the core's (bytes, address) pairs, one sendmmsg datagram each
(``--itr-send pairs``, the series since session 19), or from a TxBatch with UDP
GSO (``batch``, what :class:`corecast.aio.raw.RawItrNode` does by default).
Measured:
the ITR process's CPU (getrusage) per input packet; the whole machine's CPU
(sar-like, from /proc/stat: busy share of all cores) during the send, beside
the same share over an idle window just before it (the machine is shared, so
the difference is what the run added), as CPU-microseconds per offered packet;
CAP's interface counter (packets out) and the loss at the ITR.

Over several sittings (docs/corecast.md, section 6): with ``--out``, every run is
appended and fsynced to ``OUT/overhead.part.jsonl`` as it is measured, with its commit,
configuration and idle-window busy share; ``--resume`` measures only the missing runs,
in the same order, and refuses a part file of another configuration; ``--table PART``
summarises a part file, partial or whole.  ``overhead.json`` and the plot appear when
every run is in.
"""

from __future__ import annotations

import argparse
import asyncio
import enum
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Any

from corecast._fast import Lookup
from deliverykit.cliutil import cli_main, existing_file

ORDER = (1, 7, 2, 6, 3, 5, 4)
S_ADDR, X_IN, X_OUT, CAP = "172.16.0.1", "172.16.0.2", "100.127.255.1", "100.127.255.254"


class ItrSend(enum.Enum):
    """How the ITR process hands its LISP data to the kernel."""

    PAIRS = "pairs"  #: the core's (bytes, address) pairs, one sendmmsg datagram each
    BATCH = "batch"  #: a TxBatch (no Python object per datagram) sent with UDP GSO


#: the paper's chunk period: a 1,200-byte payload every 25 ms is its 384 kb/s stream
PAPER_PACE_MS = 25.0


class Mode(enum.Enum):
    """What runs in the ITR namespace."""

    KERNEL = "kernel"  #: Linux forwards the unicast stream (ip_forward=1)
    PLAIN = "plain"  #: our ITR, plain LISP encapsulation of the unicast stream
    CORECAST = "corecast"  #: our ITR, Algorithm 1 on the CoreCast stream


@dataclass(frozen=True, slots=True)
class Subject:
    """One configuration measured per (repetition, scale, rate)."""

    mode: Mode
    lookup: Lookup = Lookup.TRIE
    check_hash: bool = True

    @property
    def label(self) -> str:
        if self.mode is Mode.KERNEL:
            return "kernel"
        if self.mode is Mode.PLAIN:
            return f"plain/{self.lookup.value}"
        return f"corecast/{self.lookup.value}/hash {'on' if self.check_hash else 'off'}"


def subjects(lookups: tuple[Lookup, ...] = (Lookup.TRIE,), hashes: tuple[bool, ...] = (True,),
             kernel: bool = False) -> list[Subject]:
    """The kernel baseline (if asked), plain per lookup, CoreCast per lookup x hash."""
    out = [Subject(Mode.KERNEL)] if kernel else []
    out += [Subject(Mode.PLAIN, lk) for lk in lookups]
    out += [Subject(Mode.CORECAST, lk, h) for lk in lookups for h in hashes]
    return out


# ------------------------------------------------------------------ whole-machine CPU


@dataclass(frozen=True, slots=True)
class CpuSample:
    """The first line of /proc/stat: jiffies over all CPUs since boot."""

    busy: int
    total: int

    @classmethod
    def now(cls) -> CpuSample:
        with open("/proc/stat", encoding="ascii") as f:
            fields = f.readline().split()
        if not fields or fields[0] != "cpu":
            raise OSError("/proc/stat: no cpu line")
        v = [int(x) for x in fields[1:9]]  # user nice system idle iowait irq softirq steal
        return cls(busy=sum(v) - v[3] - v[4], total=sum(v))

    def busy_share(self, later: CpuSample) -> float:
        """Busy fraction of all cores between this sample and ``later`` (sar's 100 - %idle)."""
        return (later.busy - self.busy) / max(1, later.total - self.total)


# ------------------------------------------------------------------ the ITR namespace


async def _itr_main(map_cache: str, corecast: bool, ready: Any, stop: Any, fast: bool | None,
                    lookup: str = "trie", check_hash: bool = True,
                    send: str = ItrSend.PAIRS.value) -> dict[str, Any]:
    import resource

    from corecast.aio.raw import RawItrNode
    from corecast.core.itr import Itr
    from corecast.core.mapcache import MapCache
    from corecast.core.maptrie import parse_prefix

    mc = MapCache(max_entries=100_000)
    mc.load_static(map_cache)
    itr = Itr(X_OUT, [parse_prefix("10.255.0.0/16")] if corecast else [], mc, fast=fast,
              lookup=lookup, check_hash=check_hash)
    # pairs: without UDP GSO and the TxBatch, as the 20-repetition series began
    # (session 19), so its sittings accumulate into one result; batch: both
    batch = ItrSend(send) is ItrSend.BATCH
    node = RawItrNode(itr, "to-s", [X_IN, X_OUT], gso=batch, direct=batch)
    await node.start()
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    ready.set()
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, stop.wait, 600)
    await asyncio.sleep(0.3)
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    raw = dict(node.raw.counters) if node.raw else {}
    await node.close()
    return {"cpu_s": (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime),
            "in": itr.counters["in_packets"], "drops": itr.drops(),
            "out_links": sum(node.links.packets.values()), "raw": raw}


def _packets(scale: int, chunks: int, corecast: bool) -> list[bytes]:
    import ipaddress

    from corecast.core.source import Source
    from corecast.wire.codec import build_ip, build_udp
    from corecast.workload import skewed

    pop = skewed(scale=scale)
    src = Source(S_ADDR, (X_IN, 0), transport="raw")
    ch = src.add_channel("10.255.0.1")
    for eid, _ in pop.clients:
        src.join("10.255.0.1", eid, 5000, True, 0)
    s = ipaddress.ip_address(S_ADDR).packed
    out = []
    for _ in range(chunks):
        pk = [p for p, _ in src.emit_chunk(ch, 0)]
        if corecast:
            out += pk
        else:
            chunk = pk[0][-1200:]
            out += [build_ip(s, ipaddress.ip_address(e).packed, 17, build_udp(5000, 5000, chunk))
                    for e, _ in pop.clients]
    return out


def _send(pkts: list[bytes], rate: float, seconds: float | None = None) -> dict[str, float]:
    """In S: send ``pkts`` at ``rate`` packets/s (up to 64 ahead of schedule, by the C
    sender ``cc_blast`` in slices), once (``seconds`` None) or cycling for ``seconds``;
    the ITR is meant to keep up, as in the paper's lossless real-time stream."""
    import socket

    from corecast import _fast

    items = [(p, (socket.inet_ntoa(p[16:20]), 0)) for p in pkts]
    total = len(items) if seconds is None else max(1, int(rate * seconds))
    sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    sent = pos = 0
    t0 = time.perf_counter()
    try:
        while sent < total:
            due = min(total, int((time.perf_counter() - t0) * rate) + 64) - sent
            if due <= 0:
                time.sleep(0.0005)
                continue
            k = min(due, 1024, len(items) - pos)
            sent += _fast.cc_blast(sock, items[pos:pos + k], k, 5.0)
            pos = (pos + k) % len(items)
    finally:
        sock.close()
    return {"sent": sent, "seconds": time.perf_counter() - t0}


def padding(n: int) -> str:
    """``n`` static mappings no client falls in (/28s of 198.18.0.0/15, RFC 2544's
    benchmarking range): longer than the population's /18s, so a linear search scans
    them all before it reaches a client's mapping; the trie walk is unchanged."""
    if not 0 <= n <= 8192:
        raise ValueError("padding: 0..8192 mappings")
    return "".join(f"198.{18 + (k >> 12)}.{(k >> 4) & 0xFF}.{(k & 15) << 4}/28 100.127.0.1\n"
                   for k in range(n))


def _core_us_per_pkt(subject: Subject, pkts: list[bytes], map_cache: str,
                     passes: int = 3) -> float | None:
    """CPU microseconds per input packet of the ITR core's batch path alone (no sockets:
    ``Itr.handle_batch`` on 256-packet batches, the C path where it is built, best of
    ``passes``): the ablations' cost without the kernel's receive and send around it."""
    if subject.mode is Mode.KERNEL:
        return None
    from corecast.core.itr import Itr
    from corecast.core.mapcache import MapCache
    from corecast.core.maptrie import parse_prefix

    mc = MapCache(max_entries=100_000)
    mc.load_static(map_cache)
    itr = Itr(X_OUT, [parse_prefix("10.255.0.0/16")] if subject.mode is Mode.CORECAST else [],
              mc, lookup=subject.lookup, check_hash=subject.check_hash)
    itr.handle_batch(pkts[:256], 0.0)  # the channel's first payload takes the slow path
    best = float("inf")
    for _ in range(passes):
        t0 = time.process_time()
        for i in range(0, len(pkts), 256):
            itr.handle_batch(pkts[i:i + 256], 0.0)
        best = min(best, time.process_time() - t0)
    return round(1e6 * best / len(pkts), 4)


# ------------------------------------------------------------------ one run


@dataclass(slots=True)
class Bed:
    """The three namespaces and what a run needs of them."""

    tb: Any
    s: Any
    itr: Any
    cap: Any
    cap_dev: Any


def _measure(bed: Bed, subject: Subject, scale: int, rate: float, pkts: list[bytes],
             map_cache: str, clients: int, seconds: float | None, idle_s: float,
             send: ItrSend = ItrSend.PAIRS) -> dict[str, Any]:
    tb = bed.tb
    task = None
    if subject.mode is Mode.KERNEL:
        tb.sysctl(bed.itr, "net.ipv4.ip_forward", "1")
    else:
        ready, stop = tb.event(), tb.event()
        task = tb.spawn(bed.itr, _itr_main, map_cache, subject.mode is Mode.CORECAST, ready,
                        stop, None, subject.lookup.value, subject.check_hash, send.value)
        if not ready.wait(30):
            raise RuntimeError("the ITR did not start within 30 s")
    try:
        i0 = CpuSample.now()
        time.sleep(idle_s)  # the shared machine's own load, just before the run
        i1 = c0 = CpuSample.now()
        n0 = tb.counters(bed.cap, bed.cap_dev)
        snd = tb.run(bed.s, _send, pkts, rate, seconds, timeout=(seconds or 60) * 3 + 120)
        c1 = CpuSample.now()
        time.sleep(0.5)  # the last packets through
        n1 = tb.counters(bed.cap, bed.cap_dev)
    finally:
        if task is None:
            tb.sysctl(bed.itr, "net.ipv4.ip_forward", "0")
        else:
            stop.set()
    res = task.result(timeout=60) if task is not None else None
    ncpu = os.cpu_count() or 1
    busy, idle = c0.busy_share(c1), i0.busy_share(i1)
    sent = int(snd["sent"])
    cap_rx = n1["rx_packets"] - n0["rx_packets"]
    row: dict[str, Any] = {
        "scale": scale, "clients": clients, "rate": rate, "subject": subject.label,
        "mode": subject.mode.value, "lookup": subject.lookup.value,
        "hash": subject.check_hash, "sent": sent, "send_pps": round(sent / snd["seconds"]),
        "cap_rx": cap_rx, "sys_busy_pct": round(100 * busy, 2),
        "idle_busy_pct": round(100 * idle, 2),
        "sys_us_per_pkt": round(1e6 * max(0.0, busy - idle) * ncpu * snd["seconds"]
                                / max(1, sent), 3),
        "load_avg": os.getloadavg()[0],
    }
    if res is None:  # the kernel: nothing counts inside, CAP says what came out
        row.update(itr_in=None, itr_out=None, itr_cpu_s=None, cpu_us_per_pkt=None,
                   loss_pct=round(100.0 * max(0, sent - cap_rx) / max(1, sent), 2))
    else:
        row.update(itr_in=res["in"], itr_out=res["out_links"],
                   itr_cpu_s=round(res["cpu_s"], 4),
                   cpu_us_per_pkt=round(1e6 * res["cpu_s"] / max(1, res["in"]), 3),
                   loss_pct=round(100.0 * (1 - res["in"] / max(1, sent)), 2),
                   itr_drops=sum(res["drops"].values()))
    return row


# ------------------------------------------------------------------ the part file (sittings)

#: one JSON object a line, one line per measured run, appended and fsynced as it is measured
PART = "overhead.part.jsonl"
#: the summary's ``sys`` figure keeps only runs whose idle window (just before the send)
#: had the whole machine busier than this share of all cores, in percent, excluded
QUIET_BELOW = 10.0

#: (repetition, scale, rate, subject label): one measurement
Key = tuple[int, int, float, str]


def configuration(scales: tuple[int, ...], rates: tuple[float, ...], seconds: float | None,
                  chunks: int, pad: int, lookups: tuple[Lookup, ...], hashes: tuple[bool, ...],
                  kernel: bool, idle_s: float, send: ItrSend = ItrSend.PAIRS,
                  pace_ms: float | None = None) -> dict[str, Any]:
    """What every row of one part file shares: the options that change what a run measures
    (``--reps`` is not one: more repetitions are more rows of the same configuration), and
    whether the ITR ran the C path or the pure twins.  ``itr_send`` and ``pace_ms`` appear
    only when not the default (pairs, fixed rates), so the part files of the series before
    them still resume; with ``pace_ms``, ``rates`` is empty (the rate follows the scale)."""
    from deliverykit.fastpath import have_c

    config = {"scales": list(scales),
              "rates": [] if pace_ms is not None else [float(r) for r in rates],
              "seconds": seconds, "chunks": chunks, "pad": pad,
              "lookups": [lk.value for lk in lookups],
              "hashes": ["on" if h else "off" for h in hashes], "kernel": kernel,
              "idle_s": idle_s, "c_path": have_c()}
    if send is not ItrSend.PAIRS:
        config["itr_send"] = send.value
    if pace_ms is not None:
        config["pace_ms"] = float(pace_ms)
    return config


def paced_rate(scale: int, pace_ms: float) -> float:
    """Packets/s of the CoreCast stream at ``scale`` when each chunk (its payload, then one
    header a client) takes ``pace_ms``: 40 x (clients + 1) at the paper's 25 ms."""
    from corecast.workload import skewed

    return float(round((len(skewed(scale=scale).clients) + 1) * 1000.0 / pace_ms))


def rates_at(scale: int, rates: tuple[float, ...], pace_ms: float | None) -> tuple[float, ...]:
    """The rates measured at ``scale``: the fixed ``rates``, or the paced one."""
    return (paced_rate(scale, pace_ms),) if pace_ms is not None else tuple(map(float, rates))


def options(config: dict[str, Any]) -> str:
    """The command-line options that give ``config`` (to resume a part file with)."""
    out = ["--quick"] if config.get("seconds") is None else [f"--seconds {config['seconds']:g}"]
    out += [f"--scales {','.join(str(s) for s in config['scales'])}",
            f"--pace-ms {config['pace_ms']:g}" if config.get("pace_ms") is not None
            else f"--rate {','.join(f'{r:g}' for r in config['rates'])}",
            f"--chunks {config['chunks']}", f"--lookup {','.join(config['lookups'])}",
            f"--hash {','.join(config['hashes'])}", f"--pad {config['pad']}"]
    if config.get("itr_send", ItrSend.PAIRS.value) != ItrSend.PAIRS.value:
        out.append(f"--itr-send {config['itr_send']}")
    if not config["kernel"]:
        out.append("--no-kernel")
    env = "" if config.get("c_path", True) else "DELIVERYKIT_PURE=1 "
    return env + " ".join(out)


def plan(reps: int, scales: tuple[int, ...], rates: tuple[float, ...],
         subs: list[Subject], pace_ms: float | None = None) -> list[Key]:
    """Every measurement of a run, in the order it runs them: repetition, then scale (the
    interleaved 1, 7, 2, 6, 3, 5, 4 by default), then rate (:func:`rates_at`), then
    subject."""
    per_scale = {scale: rates_at(scale, rates, pace_ms) for scale in scales}
    return [(rep, scale, r, sub.label) for rep in range(reps) for scale in scales
            for r in per_scale[scale] for sub in subs]


def row_key(row: dict[str, Any]) -> Key:
    return (int(row["rep"]), int(row["scale"]), float(row["rate"]), str(row["subject"]))


@dataclass(slots=True)
class PartFile:
    """The whole rows of a part file, and whether a cut-short line follows them."""

    path: str
    rows: list[dict[str, Any]]
    #: bytes of whole lines: a run killed mid-write leaves a cut-short line after them
    whole: int
    torn: bool


_ROW_FIELDS = ("rep", "scale", "rate", "subject", "config", "commit", "idle_busy_pct")


def read_part(path: str) -> PartFile:
    """Every whole row of ``path``; ValueError, naming the line, for one that is not a row."""
    with open(path, "rb") as f:
        data = f.read()
    whole = data.rfind(b"\n") + 1
    rows = []
    for n, line in enumerate(data[:whole].split(b"\n")[:-1], start=1):
        try:
            row = json.loads(line)
        except ValueError:
            row = None
        if not isinstance(row, dict) or any(k not in row for k in _ROW_FIELDS):
            raise ValueError(f"{path} line {n}: not a row of the overhead experiment (edited by "
                             f"hand?); remove that line, or move the file away")
        rows.append(row)
    return PartFile(path, rows, whole, whole < len(data))


def _differences(theirs: Any, ours: dict[str, Any]) -> str:
    if not isinstance(theirs, dict):
        return "it has no configuration"
    return "; ".join(f"{k} {theirs.get(k)!r} there, {ours.get(k)!r} here"
                     for k in dict.fromkeys([*ours, *theirs]) if theirs.get(k) != ours.get(k))


def check_part(part: PartFile, config: dict[str, Any], reps: int) -> dict[Key, dict[str, Any]]:
    """The rows of ``part`` this run keeps, by key; ValueError, saying what differs, for a
    row of another configuration, a repetition beyond ``reps`` or a key measured twice."""
    done: dict[Key, dict[str, Any]] = {}
    for n, row in enumerate(part.rows, start=1):
        if row["config"] != config:
            hint = (f"resume with its options ({options(row['config'])}) or use another --out"
                    if isinstance(row["config"], dict) else "use another --out")
            raise ValueError(f"{part.path} line {n}: another configuration "
                             f"({_differences(row['config'], config)}): resuming would mix two "
                             f"configurations in one result; {hint}")
        key = row_key(row)
        if key[0] >= reps:
            raise ValueError(f"{part.path} line {n}: repetition {key[0] + 1}, this run has "
                             f"--reps {reps}: resume with --reps {key[0] + 1} or more")
        if key in done:
            raise ValueError(f"{part.path} line {n}: repetition {key[0] + 1}, scale {key[1]}, "
                             f"{key[2]:g} pkt/s, {key[3]} measured twice (edited by hand?); "
                             f"remove one of them")
        done[key] = row
    return done


class _Appender:
    """Appends one row a line to the part file: one write, then fsync (and the directory's
    on the first), so a stop at any moment loses at most the measurement in flight."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.fd: int | None = None

    def append(self, row: dict[str, Any]) -> None:
        from deliverykit.outputs import fsync_parent

        data = (json.dumps(row, separators=(",", ":")) + "\n").encode()
        first = self.fd is None
        if self.fd is None:
            self.fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view):]
        os.fsync(self.fd)
        if first:
            fsync_parent(self.path)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _provenance() -> dict[str, Any]:
    """Where every row of this sitting comes from: the commit of the corecast tree (with
    ``+dirty``, as :func:`deliverykit.provenance.run_metadata` names it), the host and
    the C extension's build (a digest of the loaded file; None on the twins)."""
    import hashlib
    import platform

    import corecast
    from deliverykit import fastpath
    from deliverykit.provenance import git_commit

    so = getattr(fastpath.speedups, "__file__", None)
    digest = None
    if so:
        with open(so, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()[:12]
    return {"commit": git_commit(os.path.dirname(corecast.__file__ or ".")),
            "host": platform.node(), "speedups": digest}


def sources(rows: list[dict[str, Any]], quiet_below: float = QUIET_BELOW) -> dict[str, Any]:
    """Which commits and hosts contributed rows (how many each), and how many runs the
    ``sys`` figure left out for a busy idle window."""
    def count(field: str) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in rows:
            out[str(r.get(field))] = out.get(str(r.get(field)), 0) + 1
        return out
    return {"rows": len(rows), "commits": count("commit"), "hosts": count("host"),
            "quiet_below_pct": quiet_below,
            "sys_excluded": sum(1 for r in rows if not _quiet(r, quiet_below))}


def _quiet(row: dict[str, Any], quiet_below: float) -> bool:
    return float(row["idle_busy_pct"]) < quiet_below


# ------------------------------------------------------------------ the run


def run(quick: bool = True, scales: tuple[int, ...] | None = None, reps: int | None = None,
        chunks: int | None = None, out_dir: str | None = None, rate: float = 12_000.0,
        seconds: float | None = None, lookups: tuple[Lookup, ...] = (Lookup.TRIE,),
        hashes: tuple[bool, ...] = (True,), kernel: bool = False,
        rates: tuple[float, ...] | None = None, idle_s: float | None = None,
        progress: bool = False, pad: int = 0, resume: bool = False,
        quiet_below: float = QUIET_BELOW, send: ItrSend = ItrSend.PAIRS,
        pace_ms: float | None = None) -> dict[str, Any]:
    """Every repetition runs every scale x rate x subject, interleaved; ``seconds`` None
    sends each packet list once (the quick form); ``pad`` adds that many mappings no
    client uses to the map-cache (:func:`padding`); ``pace_ms`` replaces the rates by
    the chunk period's (:func:`paced_rate`); ``send`` is the ITR's send path.

    With ``out_dir`` every run is appended to ``out_dir/overhead.part.jsonl`` as soon as
    it is measured; an existing part file is an error unless ``resume``, which keeps its
    rows (same configuration only) and runs the missing ones in the same order.
    ``overhead.json`` and ``overhead.png`` appear when every run is in; the part file
    stays beside them."""
    scales = scales or ((1, 2) if quick else ORDER)
    reps = reps or (1 if quick else 3)
    chunks = chunks or (2 if quick else 3)
    rates = rates or (rate,)
    idle_s = idle_s if idle_s is not None else (0.5 if seconds is None else 3.0)
    subs = subjects(lookups, hashes, kernel)
    config = configuration(scales, rates, seconds, chunks, pad, lookups, hashes, kernel, idle_s,
                           send, pace_ms)
    keys = plan(reps, scales, rates, subs, pace_ms)
    done: dict[Key, dict[str, Any]] = {}
    part = os.path.join(out_dir, PART) if out_dir else None
    if resume and part is None:
        raise ValueError("--resume needs --out (the directory holding overhead.part.jsonl)")
    prov = _provenance()
    if part is not None and os.path.exists(part):
        if not resume:
            raise ValueError(f"{part} exists (a stopped run's rows): resume it (--resume) or "
                             f"move it away; it is never overwritten")
        pf = read_part(part)
        done = check_part(pf, config, reps)
        if pf.torn:  # the measurement in flight when a crash cut its line short
            os.truncate(part, pf.whole)
            sys.stderr.write(f"overhead: {part} ended in a cut-short line (the run in flight "
                             f"when it stopped): dropped\n")
        others = sorted({str(r["commit"]) for r in done.values()} - {str(prov["commit"])})
        if others:
            sys.stderr.write(f"overhead: resuming rows of commit(s) {', '.join(others)} at "
                             f"commit {prov['commit']}: every row keeps its commit and the "
                             f"summary lists them; whether the ITR's code changed between "
                             f"them is not checked\n")
        sys.stderr.write(f"overhead: {len(done)} of {len(keys)} runs already in {part}, "
                         f"{len(keys) - len(done)} to go\n")
    todo = [k for k in keys if k not in done]
    t_start = time.monotonic()
    new = 0
    if todo:
        if out_dir:
            os.makedirs(out_dir, exist_ok=True)
        out = _Appender(part) if part is not None else None
        try:
            new = _run_missing(todo, done, len(keys), subs, scales, rates, chunks, seconds,
                               idle_s, pad, config, prov, out, progress, t_start, send,
                               pace_ms)
        except KeyboardInterrupt:  # Ctrl-C or SIGTERM (cliutil): what was measured is kept
            if progress:
                sys.stderr.write("\n")
            if part is not None:
                kept = len(read_part(part).rows) if os.path.exists(part) else 0
                sys.stderr.write(f"overhead: stopped; {kept} of {len(keys)} runs in {part} "
                                 f"({kept - (len(keys) - len(todo))} this sitting); resume "
                                 f"with the same options and --resume\n")
            raise
        finally:
            if out is not None:
                out.close()
        if progress:
            sys.stderr.write("\n")
    rows = [done[k] for k in keys]
    result: dict[str, Any] = {"rows": rows, "summary": _summarise(rows, quiet_below),
                              "sources": sources(rows, quiet_below), "new_rows": new}
    if out_dir:
        from deliverykit.outputs import write_when_done
        from deliverykit.provenance import run_metadata

        os.makedirs(out_dir, exist_ok=True)
        result["metadata"] = run_metadata(
            "corecast", quick=quick, scales=scales, reps=reps, chunks=chunks, rates=rates,
            seconds=seconds, lookups=[lk.value for lk in lookups], hashes=list(hashes),
            kernel=kernel, pad=pad, itr_send=send.value, pace_ms=pace_ms,
            configuration=config, resumed_rows=len(keys) - new)
        write_when_done(os.path.join(out_dir, "overhead.json"), json.dumps(result, indent=2))
        _plot(result["summary"], os.path.join(out_dir, "overhead.png"), pace_ms)
    return result


def _run_missing(todo: list[Key], done: dict[Key, dict[str, Any]], total: int,
                 subs: list[Subject], scales: tuple[int, ...], rates: tuple[float, ...],
                 chunks: int, seconds: float | None, idle_s: float, pad: int,
                 config: dict[str, Any], prov: dict[str, Any], out: _Appender | None,
                 progress: bool, t_start: float, send: ItrSend = ItrSend.PAIRS,
                 pace_ms: float | None = None) -> int:
    """Measure the ``todo`` keys in order, each row into ``done`` and ``out`` at once."""
    import datetime as dt

    from corecast.workload import skewed
    from deliverykit.testbed import Testbed

    wanted = set(todo)
    new = 0
    with Testbed(prefix="ccovh") as tb:
        s, itr, cap = tb.host("s"), tb.host("itr"), tb.host("cap")
        tb.link(s, itr, f"{S_ADDR}/24", f"{X_IN}/24")
        l2 = tb.link(itr, cap, f"{X_OUT}/24", f"{CAP}/24")
        tb.route(s, "default", via=X_IN)
        tb.route(itr, "100.64.0.0/10", via=CAP)
        tb.route(itr, "10.0.0.0/8", via=CAP)  # the kernel baseline's unicast stream
        for h in (s, itr, cap):
            tb.sysctl(h, "net.ipv6.conf.all.disable_ipv6", "1")
        if send is ItrSend.BATCH:
            # a UDP GSO message is cut into its datagrams on the ITR's way out, as by a NIC
            # without UDP segmentation offload: whole, CAP's counter would count it once
            if tb.features(itr, l2.a, tx_udp_segmentation=False).get("tx-udp-segmentation",
                                                                     True):
                raise RuntimeError("could not turn tx-udp-segmentation off on the ITR's egress")
        bed = Bed(tb, s, itr, cap, l2.b)
        for rep in sorted({k[0] for k in todo}):
            for scale in scales:
                here = rates_at(scale, rates, pace_ms)
                mine = [sub for r in here for sub in subs if (rep, scale, r, sub.label) in wanted]
                if not mine:
                    continue
                pop = skewed(scale=scale)
                mcache = padding(pad) + pop.map_cache_text()
                traffic = {m: _packets(scale, chunks, m) for m in (False, True)}
                core = {sub: _core_us_per_pkt(sub, traffic[sub.mode is Mode.CORECAST], mcache)
                        for sub in dict.fromkeys(mine)}
                for r in here:
                    for sub in subs:
                        key = (rep, scale, r, sub.label)
                        if key not in wanted:
                            continue
                        m = _measure(bed, sub, scale, r, traffic[sub.mode is Mode.CORECAST],
                                     mcache, len(pop.clients), seconds, idle_s, send)
                        row = {"rep": rep, **m, "mappings": pad + len(pop.sizes()),
                               "core_us_per_pkt": core[sub], **prov,
                               "utc": dt.datetime.now(dt.timezone.utc).isoformat(
                                   timespec="seconds"),
                               "config": config}
                        if out is not None:
                            out.append(row)
                        done[key] = row
                        new += 1
                        if progress:
                            _progress(len(done), total, t_start, row)
    return new


def _progress(done: int, todo: int, t0: float, row: dict[str, Any]) -> None:
    sys.stderr.write(f"\r[{done}/{todo}] {time.monotonic() - t0:6.0f} s  rep {row['rep'] + 1} "
                     f"scale {row['scale']} {row['rate']:,.0f} pkt/s {row['subject']:<24}")
    sys.stderr.flush()


def _itr_cpu_pct(row: dict[str, Any]) -> float:
    """The ITR process's CPU over the send, in percent of one core (the paper's Fig. 9 is
    the ITR machine's CPU usage): its CPU seconds, which also hold the idle window before
    the send and the half second after, over the sender's time."""
    send_s = row["sent"] / max(1.0, float(row["send_pps"]))
    return 100.0 * float(row["itr_cpu_s"]) / max(1e-9, send_s)


def _median(xs: list[float]) -> float:
    return round(statistics.median(xs), 3) if xs else float("nan")


def _summarise(rows: list[dict[str, Any]],
               quiet_below: float = QUIET_BELOW) -> list[dict[str, Any]]:
    """Per (scale, rate): each subject's medians over the repetitions present (``reps``:
    how many) and ranges, then the ratios the paper reports: CoreCast over plain (our
    ITR's CPU per packet) and every subject over kernel forwarding (the machine's CPU per
    packet).  The machine's figure (``sys``) is taken only over runs whose idle window
    was under ``quiet_below`` % busy (``sys_n`` of them, ``sys_excluded`` left out); with
    none, it is None rather than a 0 that other load made."""
    out = []
    for scale, rate in sorted({(r["scale"], r["rate"]) for r in rows}):
        rs = [r for r in rows if r["scale"] == scale and r["rate"] == rate]
        per: dict[str, dict[str, Any]] = {}
        for label in dict.fromkeys(r["subject"] for r in rs):
            mine = [r for r in rs if r["subject"] == label]
            itr = [r["cpu_us_per_pkt"] for r in mine if r["cpu_us_per_pkt"] is not None]
            sysu = [r["sys_us_per_pkt"] for r in mine if _quiet(r, quiet_below)]
            core = [r["core_us_per_pkt"] for r in mine if r.get("core_us_per_pkt") is not None]
            per[label] = {"reps": len(mine), "itr_us_per_pkt": _median(itr) if itr else None,
                          "itr_us_range": [min(itr), max(itr)] if itr else None,
                          "core_us_per_pkt": _median(core) if core else None,
                          "sys_us_per_pkt": _median(sysu) if sysu else None,
                          "sys_us_range": [min(sysu), max(sysu)] if sysu else None,
                          "sys_n": len(sysu), "sys_excluded": len(mine) - len(sysu),
                          "idle_busy_pct_max": max(r["idle_busy_pct"] for r in mine),
                          "loss_pct_max": max(r["loss_pct"] for r in mine),
                          "send_pps": _median([r["send_pps"] for r in mine]),
                          "itr_cpu_pct": _median(util) if (util := [
                              _itr_cpu_pct(r) for r in mine
                              if r.get("itr_cpu_s") is not None]) else None,
                          "load_avg": _median([r["load_avg"] for r in mine])}
        base = per.get("plain/trie") or next((v for k, v in per.items()
                                             if k.startswith("plain")), None)
        cc = per.get("corecast/trie/hash on") or next((v for k, v in per.items()
                                                      if k.startswith("corecast")), None)
        kern = per.get("kernel")
        for v in per.values():
            if base and base["itr_us_per_pkt"] and v["itr_us_per_pkt"] is not None:
                v["itr_over_plain_trie"] = round(v["itr_us_per_pkt"] / base["itr_us_per_pkt"], 3)
            if base and base["core_us_per_pkt"] and v["core_us_per_pkt"] is not None:
                v["core_over_plain_trie"] = round(v["core_us_per_pkt"]
                                                  / base["core_us_per_pkt"], 3)
            if kern and kern["sys_us_per_pkt"] and v["sys_us_per_pkt"] is not None:
                v["sys_over_kernel"] = round(v["sys_us_per_pkt"] / kern["sys_us_per_pkt"], 3)
        row: dict[str, Any] = {"scale": scale, "rate": rate,
                               "clients": rs[0]["clients"], "subjects": per}
        if base and cc and base["itr_us_per_pkt"]:
            row.update(plain_us_per_pkt=base["itr_us_per_pkt"],
                       corecast_us_per_pkt=cc["itr_us_per_pkt"],
                       corecast_over_plain=round(cc["itr_us_per_pkt"] / base["itr_us_per_pkt"],
                                                 3))
        out.append(row)
    return out


@dataclass(frozen=True, slots=True)
class Paired:
    """One ratio over the runs of one repetition and scale (which run back to back): the
    mean over those pairs and the half-width of its 95 % confidence interval (NaN for one)."""

    what: str
    mean: float
    half: float
    n: int


def paired(rows: list[dict[str, Any]], quiet_below: float = QUIET_BELOW) -> list[Paired]:
    """The section's ratios paired by repetition and scale (rate too, with several rates):
    CoreCast (trie, hash on) over plain LISP (trie) in the ITR process, the whole machine
    (both idle windows quiet) and the core's batch path; each over the kernel's forwarding,
    whole machine (all three quiet).  The medians of the table compare cells; these compare
    the runs that shared the machine's state."""
    from deliverykit.sweep import ci95

    cells: dict[tuple[int, int, float], dict[str, dict[str, Any]]] = {}
    for r in rows:
        cells.setdefault((int(r["rep"]), int(r["scale"]), float(r["rate"])), {})[
            str(r["subject"])] = r
    ratios: dict[str, list[float]] = {}

    def add(what: str, num: Any, den: Any) -> None:
        if num is not None and den:
            ratios.setdefault(what, []).append(float(num) / float(den))

    for d in cells.values():
        p, c, k = d.get("plain/trie"), d.get("corecast/trie/hash on"), d.get("kernel")
        if p and c:
            add("CoreCast / plain, ITR process", c["cpu_us_per_pkt"], p["cpu_us_per_pkt"])
            if _quiet(p, quiet_below) and _quiet(c, quiet_below):
                add("CoreCast / plain, whole machine", c["sys_us_per_pkt"], p["sys_us_per_pkt"])
            add("CoreCast / plain, core batch path", c.get("core_us_per_pkt"),
                p.get("core_us_per_pkt"))
        if k and _quiet(k, quiet_below):
            for label, sub in (("plain", p), ("CoreCast", c)):
                if sub and _quiet(sub, quiet_below):
                    add(f"{label} / kernel, whole machine", sub["sys_us_per_pkt"],
                        k["sys_us_per_pkt"])
    order = ("CoreCast / plain, ITR process", "CoreCast / plain, whole machine",
             "CoreCast / plain, core batch path", "plain / kernel, whole machine",
             "CoreCast / kernel, whole machine")
    return [Paired(what, *ci95(ratios[what]), len(ratios[what])) for what in order
            if what in ratios]


def print_table(rows: list[dict[str, Any]], quiet_below: float = QUIET_BELOW,
                planned: int | None = None) -> None:
    """The summary on stdout: medians per cell with their ``n``, and where the rows came
    from (commits, hosts, runs the ``sys`` figure left out)."""
    if not rows:
        print("no runs yet")
        return
    src = sources(rows, quiet_below)
    of = f" of {planned}" if planned is not None else ""
    worst = max(row["loss_pct"] for row in rows)
    print(f"{len(rows)}{of} runs; {rows[0]['mappings']} mappings; worst loss {worst}%; "
          f"load average now {os.getloadavg()[0]:.1f} ({os.cpu_count()} CPUs)")
    print("commits: " + ", ".join(f"{c} ({n})" for c, n in src["commits"].items())
          + "; hosts: " + ", ".join(f"{h} ({n})" for h, n in src["hosts"].items()))
    print(f"{'scale':>5} {'pkt/s':>8} {'subject':<24} {'n':>3} {'core us':>8} {'/plain':>7} "
          f"{'ITR us':>7} {'/plain':>7} {'sys us':>7} {'sys n':>5} {'/kernel':>8} "
          f"{'loss %':>7} {'S pkt/s':>8} {'ITR %':>6}")
    for s in _summarise(rows, quiet_below):
        for label, v in s["subjects"].items():
            core = "-" if v["core_us_per_pkt"] is None else f"{v['core_us_per_pkt']:.3f}"
            itr = "-" if v["itr_us_per_pkt"] is None else f"{v['itr_us_per_pkt']:.3f}"
            sysu = "busy" if v["sys_us_per_pkt"] is None else f"{v['sys_us_per_pkt']:.3f}"
            print(f"{s['scale']:>5} {s['rate']:>8,.0f} {label:<24} {v['reps']:>3} {core:>8} "
                  f"{v.get('core_over_plain_trie', '-'):>7} {itr:>7} "
                  f"{v.get('itr_over_plain_trie', '-'):>7} {sysu:>7} {v['sys_n']:>5} "
                  f"{v.get('sys_over_kernel', '-'):>8} {v['loss_pct_max']:>7} "
                  f"{v['send_pps']:>8,.0f} "
                  f"{'-' if v['itr_cpu_pct'] is None else format(v['itr_cpu_pct'], '.0f'):>6}")
    print("n: repetitions present (medians over them); core us: the ITR core's batch path per "
          "packet (no sockets); ITR us: the ITR process (getrusage) per packet it took in; "
          "sys us: the whole machine (/proc/stat) per offered packet above its idle share just "
          f"before, over the runs whose idle window was under {quiet_below:g}% busy (sys n; "
          f"'busy': none was): {src['sys_excluded']} of {len(rows)} runs left out; loss %: "
          f"the worst run's; S pkt/s: the rate the sender achieved; ITR %: the ITR process's "
          f"CPU over the send, in % of one core (medians)")
    pairs = paired(rows, quiet_below)
    if pairs:
        print("paired by repetition and scale, mean +- 95 % CI half-width (n pairs): " + "; ".join(
            f"{x.what} {x.mean:.3f} +- {x.half:.3f} ({x.n})" for x in pairs))
    print("paper: CoreCast +52% CPU over unicast forwarding (ratio ~1.52), blamed on a linear "
          "EID-to-RLOC search")


def _plot(summary: list[dict[str, Any]], path: str, pace_ms: float | None = None) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from deliverykit.outputs import replacing

    fig, ax = plt.subplots(figsize=(5.5, 3.4))
    labels = dict.fromkeys(k for s in summary for k, v in s["subjects"].items()
                           if v["itr_us_per_pkt"] is not None)
    # paced, the rate follows the scale: one line per subject
    series = ([(f"{pace_ms:g} ms chunks", summary)] if pace_ms is not None else
              [(f"{rate / 1e3:g}k/s", [s for s in summary if s["rate"] == rate])
               for rate in sorted({s["rate"] for s in summary})])
    for name, ss in series:
        for label in labels:
            pts = [(s["scale"], s["subjects"][label]["itr_us_per_pkt"]) for s in ss
                   if label in s["subjects"]]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=f"{label} @ {name}")
    ax.set_xlabel("scaling factor (x 1,429 clients)")
    ax.set_ylabel("ITR CPU per packet [us]")
    ax.legend(fontsize=6)
    fig.tight_layout()
    with replacing(path) as tmp:
        fig.savefig(tmp, dpi=120, format="png")
    plt.close(fig)


# ------------------------------------------------------------------ command line


def _choices(kind: type[enum.Enum] | dict[str, bool], text: str) -> tuple[Any, ...]:
    names = [t.strip() for t in text.split(",") if t.strip()]
    table = kind if isinstance(kind, dict) else {m.value: m for m in kind}
    bad = [n for n in names if n not in table]
    if bad or not names:
        raise argparse.ArgumentTypeError(
            f"{text!r}: a comma-separated list of {', '.join(table)}")
    return tuple(table[n] for n in dict.fromkeys(names))


def _rates(text: str) -> tuple[float, ...]:
    try:
        vals = tuple(float(t) for t in text.split(","))
    except ValueError:
        vals = ()
    if not vals or any(not 0 < v <= 10e6 for v in vals):
        raise argparse.ArgumentTypeError(f"{text!r}: packets/s, comma-separated, each in "
                                         "(0, 10,000,000]")
    return vals


def _positive(cast: type) -> Any:
    def parse(text: str) -> Any:
        try:
            v = cast(text)
        except ValueError:
            v = 0
        if v <= 0:
            raise argparse.ArgumentTypeError(f"{text!r}: a positive number")
        return v
    return parse


def _pad(text: str) -> int:
    try:
        padding(int(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: a number of mappings, 0..8192") from None
    return int(text)


def _scales(text: str) -> tuple[int, ...]:
    try:
        vals = tuple(int(t) for t in text.split(","))
    except ValueError:
        vals = ()
    if not vals or any(not 1 <= v <= 7 for v in vals):
        raise argparse.ArgumentTypeError(f"{text!r}: scaling factors 1..7, comma-separated")
    return vals


def _percent(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        v = -1.0
    if not 0 < v <= 100:
        raise argparse.ArgumentTypeError(f"{text!r}: a share of all cores in percent, (0, 100]")
    return v


def _table(path: str, quiet_below: float) -> int:
    """``--table PART``: the summary of a part file, whole or partial."""
    pf = read_part(path)
    for n, row in enumerate(pf.rows[1:], start=2):
        if row["config"] != pf.rows[0]["config"]:
            raise ValueError(f"{path} line {n}: another configuration than line 1's "
                             f"({_differences(row['config'], pf.rows[0]['config'])})")
    if pf.torn:
        sys.stderr.write(f"overhead: {path} ends in a cut-short line (the run in flight when "
                         f"it stopped): not counted\n")
    if pf.rows and isinstance(pf.rows[0]["config"], dict):
        config = pf.rows[0]["config"]
        reps = 1 + max(int(r["rep"]) for r in pf.rows)
        per_rep = len(plan(1, tuple(config["scales"]), tuple(config["rates"]),
                           subjects(tuple(Lookup(v) for v in config["lookups"]),
                                    tuple(h == "on" for h in config["hashes"]),
                                    config["kernel"]), config.get("pace_ms")))
        print(f"configuration: {options(config)} ({per_rep} runs per repetition; "
              f"repetitions seen: {reps})")
    print_table(pf.rows, quiet_below)
    return 0


@cli_main("corecast experiment overhead")
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="scales 1,2, one repetition, each packet list sent once")
    ap.add_argument("--out", default=None,
                    help="directory for overhead.part.jsonl (every run as it is measured), "
                         "then overhead.json and overhead.png")
    ap.add_argument("--resume", action="store_true",
                    help="keep the runs of OUT/overhead.part.jsonl (same configuration) and "
                         "measure only the missing ones")
    ap.add_argument("--table", metavar="PART", type=existing_file, default=None,
                    help="print the summary of a part file, partial or whole, and exit")
    ap.add_argument("--quiet-below", type=_percent, metavar="PCT", default=QUIET_BELOW,
                    help="the sys figure only over runs whose idle window was under PCT %% "
                         f"busy (default {QUIET_BELOW:g})")
    ap.add_argument("--rate", type=_rates, default=None,
                    help="offered packets/s, comma-separated for several (default 12000)")
    ap.add_argument("--pace-ms", type=_positive(float), metavar="MS", default=None,
                    help=f"instead of --rate, the paper's real-time pace: one chunk (payload, "
                         f"then a header a client) every MS ms, so the rate grows with the "
                         f"scale (the paper: {PAPER_PACE_MS:g}, 57k to 400k packets/s)")
    ap.add_argument("--itr-send", type=ItrSend, choices=list(ItrSend), default=ItrSend.PAIRS,
                    metavar="{pairs,batch}",
                    help="the ITR's send path: the core's (bytes, address) pairs, one "
                         "datagram each (default, the series since session 19), or a TxBatch "
                         "with UDP GSO (batch)")
    ap.add_argument("--seconds", type=_positive(float), default=None,
                    help="seconds per run (the paper: 30; default 30, --quick: the list once)")
    ap.add_argument("--reps", type=_positive(int), default=None,
                    help="repetitions (the paper: 20; default 3, --quick 1)")
    ap.add_argument("--scales", type=_scales, default=None,
                    help="scaling factors, e.g. 1,7 (default 1,7,2,6,3,5,4; --quick 1,2)")
    ap.add_argument("--chunks", type=_positive(int), default=None,
                    help="distinct chunks in the cycled packet list (default 3, --quick 2)")
    ap.add_argument("--lookup", type=lambda t: _choices(Lookup, t), default=(Lookup.TRIE,),
                    help="EID-to-RLOC lookup: trie, linear or trie,linear (default trie)")
    ap.add_argument("--hash", type=lambda t: _choices({"on": True, "off": False}, t),
                    default=(True,), help="the per-client hash check: on, off or on,off")
    ap.add_argument("--pad", type=_pad, metavar="N", default=0,
                    help="add N mappings no client uses (a longer map-cache for the linear "
                         "search to scan; 0..8192, default 0)")
    ap.add_argument("--no-kernel", action="store_true",
                    help="leave out the kernel-forwarding baseline")
    a = ap.parse_args(argv)
    if a.table is not None:
        return _table(str(a.table), a.quiet_below)
    if a.resume and a.out is None:
        ap.error("--resume needs --out (the directory holding overhead.part.jsonl)")
    if a.pace_ms is not None and a.rate is not None:
        ap.error("--pace-ms sets the rate of every scale: give it or --rate, not both")
    seconds = a.seconds if a.seconds is not None else (None if a.quick else 30.0)
    r = run(a.quick, scales=a.scales, reps=a.reps, chunks=a.chunks, out_dir=a.out,
            seconds=seconds, lookups=a.lookup, hashes=a.hash, kernel=not a.no_kernel,
            rates=a.rate or (12_000.0,), progress=sys.stderr.isatty(), pad=a.pad,
            resume=a.resume, quiet_below=a.quiet_below, send=a.itr_send, pace_ms=a.pace_ms)
    print_table(r["rows"], a.quiet_below)
    kept = len(r["rows"]) - r["new_rows"]
    sys.stderr.write(f"overhead: {len(r['rows'])} runs ({r['new_rows']} this sitting"
                     f"{f', {kept} from the part file' if kept else ''})"
                     f"{f' -> {a.out}' if a.out else ''}\n")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
