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
packet list once) at each ``--rate`` packets/s, cycling the chunks.  Measured:
the ITR process's CPU (getrusage) per input packet; the whole machine's CPU
(sar-like, from /proc/stat: busy share of all cores) during the send, beside
the same share over an idle window just before it (the machine is shared, so
the difference is what the run added), as CPU-microseconds per offered packet;
CAP's interface counter (packets out) and the loss at the ITR.
"""

from __future__ import annotations

import argparse
import asyncio
import enum
import os
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Any

from corecast._fast import Lookup
from deliverykit.cliutil import cli_main

ORDER = (1, 7, 2, 6, 3, 5, 4)
S_ADDR, X_IN, X_OUT, CAP = "172.16.0.1", "172.16.0.2", "100.127.255.1", "100.127.255.254"


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
                    lookup: str = "trie", check_hash: bool = True) -> dict[str, Any]:
    import resource

    from corecast.aio.raw import RawItrNode
    from corecast.core.itr import Itr
    from corecast.core.mapcache import MapCache
    from corecast.core.maptrie import parse_prefix

    mc = MapCache(max_entries=100_000)
    mc.load_static(map_cache)
    itr = Itr(X_OUT, [parse_prefix("10.255.0.0/16")] if corecast else [], mc, fast=fast,
              lookup=lookup, check_hash=check_hash)
    node = RawItrNode(itr, "to-s", [X_IN, X_OUT])
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
             map_cache: str, clients: int, seconds: float | None, idle_s: float) -> dict[str, Any]:
    tb = bed.tb
    task = None
    if subject.mode is Mode.KERNEL:
        tb.sysctl(bed.itr, "net.ipv4.ip_forward", "1")
    else:
        ready, stop = tb.event(), tb.event()
        task = tb.spawn(bed.itr, _itr_main, map_cache, subject.mode is Mode.CORECAST, ready,
                        stop, None, subject.lookup.value, subject.check_hash)
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


def run(quick: bool = True, scales: tuple[int, ...] | None = None, reps: int | None = None,
        chunks: int | None = None, out_dir: str | None = None, rate: float = 12_000.0,
        seconds: float | None = None, lookups: tuple[Lookup, ...] = (Lookup.TRIE,),
        hashes: tuple[bool, ...] = (True,), kernel: bool = False,
        rates: tuple[float, ...] | None = None, idle_s: float | None = None,
        progress: bool = False, pad: int = 0) -> dict[str, Any]:
    """Every repetition runs every scale x rate x subject, interleaved; ``seconds`` None
    sends each packet list once (the quick form); ``pad`` adds that many mappings no
    client uses to the map-cache (:func:`padding`)."""
    from corecast.workload import skewed
    from deliverykit.testbed import Testbed

    scales = scales or ((1, 2) if quick else ORDER)
    reps = reps or (1 if quick else 3)
    chunks = chunks or (2 if quick else 3)
    rates = rates or (rate,)
    idle_s = idle_s if idle_s is not None else (0.5 if seconds is None else 3.0)
    subs = subjects(lookups, hashes, kernel)
    rows = []
    todo = reps * len(scales) * len(rates) * len(subs)
    t_start = time.monotonic()
    with Testbed(prefix="ccovh") as tb:
        s, itr, cap = tb.host("s"), tb.host("itr"), tb.host("cap")
        tb.link(s, itr, f"{S_ADDR}/24", f"{X_IN}/24")
        l2 = tb.link(itr, cap, f"{X_OUT}/24", f"{CAP}/24")
        tb.route(s, "default", via=X_IN)
        tb.route(itr, "100.64.0.0/10", via=CAP)
        tb.route(itr, "10.0.0.0/8", via=CAP)  # the kernel baseline's unicast stream
        for h in (s, itr, cap):
            tb.sysctl(h, "net.ipv6.conf.all.disable_ipv6", "1")
        bed = Bed(tb, s, itr, cap, l2.b)
        for _rep in range(reps):
            for scale in scales:
                pop = skewed(scale=scale)
                mcache = padding(pad) + pop.map_cache_text()
                traffic = {m: _packets(scale, chunks, m) for m in (False, True)}
                core = {sub: _core_us_per_pkt(sub, traffic[sub.mode is Mode.CORECAST], mcache)
                        for sub in subs}
                for r in rates:
                    for sub in subs:
                        rows.append(_measure(bed, sub, scale, r,
                                             traffic[sub.mode is Mode.CORECAST], mcache,
                                             len(pop.clients), seconds, idle_s))
                        rows[-1]["mappings"] = pad + len(pop.sizes())
                        rows[-1]["core_us_per_pkt"] = core[sub]
                        if progress:
                            _progress(len(rows), todo, t_start, rows[-1])
    if progress:
        sys.stderr.write("\n")
    result: dict[str, Any] = {"rows": rows, "summary": _summarise(rows)}
    if out_dir:
        import json

        from deliverykit.outputs import write_when_done
        from deliverykit.provenance import run_metadata

        os.makedirs(out_dir, exist_ok=True)
        result["metadata"] = run_metadata(
            "corecast", quick=quick, scales=scales, reps=reps, chunks=chunks, rates=rates,
            seconds=seconds, lookups=[lk.value for lk in lookups], hashes=list(hashes),
            kernel=kernel, pad=pad)
        write_when_done(os.path.join(out_dir, "overhead.json"), json.dumps(result, indent=2))
        _plot(result["summary"], os.path.join(out_dir, "overhead.png"))
    return result


def _progress(done: int, todo: int, t0: float, row: dict[str, Any]) -> None:
    sys.stderr.write(f"\r[{done}/{todo}] {time.monotonic() - t0:6.0f} s  scale {row['scale']} "
                     f"{row['rate']:,.0f} pkt/s {row['subject']:<24}")
    sys.stderr.flush()


def _median(xs: list[float]) -> float:
    return round(statistics.median(xs), 3) if xs else float("nan")


def _summarise(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (scale, rate): each subject's medians over the repetitions (and ranges), then
    the ratios the paper reports: CoreCast over plain (our ITR's CPU per packet) and
    every subject over kernel forwarding (the machine's CPU per packet)."""
    out = []
    for scale, rate in sorted({(r["scale"], r["rate"]) for r in rows}):
        rs = [r for r in rows if r["scale"] == scale and r["rate"] == rate]
        per: dict[str, dict[str, Any]] = {}
        for label in dict.fromkeys(r["subject"] for r in rs):
            mine = [r for r in rs if r["subject"] == label]
            itr = [r["cpu_us_per_pkt"] for r in mine if r["cpu_us_per_pkt"] is not None]
            sysu = [r["sys_us_per_pkt"] for r in mine]
            core = [r["core_us_per_pkt"] for r in mine if r.get("core_us_per_pkt") is not None]
            per[label] = {"reps": len(mine), "itr_us_per_pkt": _median(itr) if itr else None,
                          "itr_us_range": [min(itr), max(itr)] if itr else None,
                          "core_us_per_pkt": _median(core) if core else None,
                          "sys_us_per_pkt": _median(sysu),
                          "sys_us_range": [min(sysu), max(sysu)],
                          "loss_pct_max": max(r["loss_pct"] for r in mine),
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
            if kern and kern["sys_us_per_pkt"] > 0:
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


def _plot(summary: list[dict[str, Any]], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from deliverykit.outputs import replacing

    fig, ax = plt.subplots(figsize=(5.5, 3.4))
    labels = dict.fromkeys(k for s in summary for k, v in s["subjects"].items()
                           if v["itr_us_per_pkt"] is not None)
    for rate in sorted({s["rate"] for s in summary}):
        ss = [s for s in summary if s["rate"] == rate]
        for label in labels:
            pts = [(s["scale"], s["subjects"][label]["itr_us_per_pkt"]) for s in ss
                   if label in s["subjects"]]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-",
                    label=f"{label} @ {rate / 1e3:g}k/s")
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


@cli_main("corecast experiment overhead")
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="scales 1,2, one repetition, each packet list sent once")
    ap.add_argument("--out", default=None, help="directory for overhead.json and overhead.png")
    ap.add_argument("--rate", type=_rates, default=(12_000.0,),
                    help="offered packets/s, comma-separated for several (default 12000)")
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
    seconds = a.seconds if a.seconds is not None else (None if a.quick else 30.0)
    r = run(a.quick, scales=a.scales, reps=a.reps, chunks=a.chunks, out_dir=a.out,
            seconds=seconds, lookups=a.lookup, hashes=a.hash, kernel=not a.no_kernel,
            rates=a.rate, progress=sys.stderr.isatty(), pad=a.pad)
    worst = max(row["loss_pct"] for row in r["rows"])
    print(f"{r['rows'][0]['mappings']} mappings; worst loss {worst}%; load average "
          f"{os.getloadavg()[0]:.1f} ({os.cpu_count()} CPUs)")
    print(f"{'scale':>5} {'pkt/s':>8} {'subject':<24} {'core us':>8} {'/plain':>7} "
          f"{'ITR us':>7} {'/plain':>7} {'sys us':>7} {'/kernel':>8} {'loss %':>7}")
    for s in r["summary"]:
        for label, v in s["subjects"].items():
            core = "-" if v["core_us_per_pkt"] is None else f"{v['core_us_per_pkt']:.3f}"
            itr = "-" if v["itr_us_per_pkt"] is None else f"{v['itr_us_per_pkt']:.3f}"
            print(f"{s['scale']:>5} {s['rate']:>8,.0f} {label:<24} {core:>8} "
                  f"{v.get('core_over_plain_trie', '-'):>7} {itr:>7} "
                  f"{v.get('itr_over_plain_trie', '-'):>7} {v['sys_us_per_pkt']:>7.3f} "
                  f"{v.get('sys_over_kernel', '-'):>8} {v['loss_pct_max']:>7}")
    print("core us: the ITR core's batch path per packet (no sockets); ITR us: the ITR "
          "process (getrusage) per packet it took in; sys us: the whole machine (/proc/stat) "
          "per offered packet above its idle share just before")
    print("paper: CoreCast +52% CPU over unicast forwarding (ratio ~1.52), blamed on a linear "
          "EID-to-RLOC search")
    sys.stderr.write(f"overhead: {len(r['rows'])} runs\n")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
