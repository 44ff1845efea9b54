"""ITR packets per second: plain LISP forwarding vs CoreCast demultiplexing,
pure Python vs the C fast path, with the Linux kernel forwarding the same
traffic between the same namespaces as the yardstick (paper section 6).

Traffic (corecast.workload): the 1,429-client skewed population; "corecast" is
the CoreCast stream the source emits (per chunk one payload packet, then one
header packet per client), "plain" is what plain LISP forwarding carries
without CoreCast: the unicast stream (one 1,200-byte chunk to every client
EID), each packet LISP-encapsulated to the RLOC of its destination.  Both do
one map-cache lookup per client per chunk.

Two measurements:

* **sans-IO** (no root): the ITR core's data path as the drivers call it, one
  ``Itr.handle_batch`` per 256 packets (``ItrTable.batch``: C, or its pure
  twin), input packets per CPU-second of this process.
* **end to end** (root): namespaces ``s -- x -- cap``.  A saturating load
  generator in ``s`` offers the traffic to ``x`` (issue 17): the kernel's
  pktgen where the kernel has it (``/proc/net/pktgen``; this machine's kernel
  has no pktgen and no modules, so the bench says so in its notes), otherwise
  several C senders at once, one process per CPU (``cc_blast``: prebuilt
  packets, sendmmsg batches of 1,024, an IPPROTO_RAW socket each, as fast as
  they go for a fixed time; on veth the kernel forwards in the sender's
  softirq, so several senders also give the kernel several CPUs to forward on).
  In ``x`` either the kernel forwards (ip_forward=1, routes to ``cap``) or our
  ITR process runs (forwarding off; AF_PACKET recvmmsg -> one ItrTable.batch
  call -> sendmmsg of LISP/UDP to the RLOCs, routed to ``cap``).  Packets/s
  = packets arriving on ``cap``'s interface (rx counter) over the sender's
  own sending time, the same counter for every subject; the sender's rate is
  reported beside it, so a reader sees whether the sender or the forwarder
  was the bottleneck (the kernel row is "at its limit" when it forwarded
  less than was offered).  For CoreCast the packets arriving on ``cap`` are
  the headers plus one payload copy per RLOC per chunk.  CPU per packet
  beside each rate: the whole machine's (/proc/stat, all cores, busy share
  over the sending time x CPUs / packets out; the machine is shared, so this
  includes everyone's load) and, for our ITR, its own process's (getrusage).
"""

from __future__ import annotations

import os
import time
from functools import partial

from bench.harness import Figure, Reference, interleaved, measured, referenced
from corecast import _fast
from corecast.core.itr import Itr
from corecast.core.mapcache import MapCache
from corecast.core.maptrie import parse_prefix
from corecast.core.source import Source
from corecast.workload import skewed
from deliverykit.fastpath import speedups

CHANNEL = "10.255.0.1"
S_ADDR, X_IN, X_OUT, CAP = "172.16.0.1", "172.16.0.2", "100.127.255.1", "100.127.255.254"
HAVE_C = speedups is not None and hasattr(speedups, "cc_itr_table")


def _traffic(scale: int, chunks: int, src_addr: str = S_ADDR):
    """(CoreCast packets, equivalent unicast packets, population)."""
    import ipaddress

    from corecast.wire.codec import build_ip, build_udp

    pop = skewed(scale=scale)
    src = Source(src_addr, ("192.0.2.254", 9), transport="raw")
    ch = src.add_channel(CHANNEL)
    for eid, _ in pop.clients:
        src.join(CHANNEL, eid, 5000, True, 0)
    cc, uc = [], []
    s = ipaddress.ip_address(src_addr).packed
    for _ in range(chunks):
        out = src.emit_chunk(ch, 0)
        cc += [p for p, _ in out]
        chunk = out[0][0][-1200:]
        uc += [build_ip(s, ipaddress.ip_address(e).packed, 17, build_udp(5000, 5000, chunk))
               for e, _ in pop.clients]
    return cc, uc, pop


def _itr(map_cache: str, corecast: bool, fast: bool | None, rloc: str = X_OUT) -> Itr:
    mc = MapCache(max_entries=100_000)
    mc.load_static(map_cache + f"0.0.0.0/0 {CAP}\n")
    ranges = [parse_prefix("10.255.0.0/16")] if corecast else []
    return Itr(rloc, ranges, mc, fast=fast)


def _sans_io(pkts: list[bytes], itr: Itr) -> tuple[float, int]:
    """Input packets per CPU-second through handle_batch (256 per call)."""
    handle = itr.handle_batch
    n = 0
    t0 = time.process_time()
    for i in range(0, len(pkts), 256):
        n += len(handle(pkts[i:i + 256], 0.0))
    return len(pkts) / max(time.process_time() - t0, 1e-9), n


# ------------------------------------------------------------------ namespaces


def pktgen_status() -> str | None:
    """None when the kernel's pktgen can be driven here; else why not (the bench then
    falls back to several C senders)."""
    import os
    import shutil
    import subprocess

    if os.path.isdir("/proc/net/pktgen"):
        return None
    if shutil.which("modprobe") is None:
        return "no modprobe (and /proc/net/pktgen absent): pktgen not available"
    r = subprocess.run(["modprobe", "pktgen"], capture_output=True, text=True, timeout=30)
    if r.returncode != 0 or not os.path.isdir("/proc/net/pktgen"):
        return f"modprobe pktgen failed: {(r.stderr or 'no /proc/net/pktgen').strip()}"
    return None


def _senders() -> int:
    import os

    return max(2, os.cpu_count() or 1)


def _per_sender(items: list, senders: int, corecast: bool) -> list[list]:
    """One item list per sender.  Unicast: the same packets, each sender starting at
    its own place.  CoreCast: sender k sends the stream of its own channel (the
    channel EID 10.255.0.1 rewritten to 10.255.0.k+1; the raw socket fills in the IP
    checksum), so no sender's payload replaces the one another's headers name."""
    import socket

    n = len(items)
    if not corecast:
        return [items[k * n // senders:] + items[:k * n // senders] for k in range(senders)]
    out = [items]
    for k in range(1, senders):
        chan = socket.inet_aton(f"10.255.0.{k + 1}")
        out.append([(p[:16] + chan + p[20:], a) if p[16:20] == socket.inet_aton(CHANNEL)
                    else (p, a) for p, a in items])
    return out


def _offer(tb, host, lists: list[list], seconds: float) -> dict:
    """One C sender per list, all at once in ``host``: packets sent in all and the
    longest sending time."""
    tasks = [tb.spawn(host, _blast, items, seconds) for items in lists]
    res = [t.result(timeout=seconds + 60) for t in tasks]
    return {"sent": sum(r["sent"] for r in res), "seconds": max(r["seconds"] for r in res)}


def _blast(items: list, seconds: float) -> dict:
    """In ``s``: offer ``items`` (cycling) for ``seconds`` with cc_blast."""
    import socket

    sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8 << 20)
    try:
        t0 = time.perf_counter()
        sent = _fast.cc_blast(sock, items, 1 << 40, seconds)
        dt = time.perf_counter() - t0
    finally:
        sock.close()
    return {"sent": sent, "seconds": dt, "c": _fast.cc_blast is not _fast.py_cc_blast}


async def _itr_proc(map_cache: str, corecast: bool, fast: bool, ready, stop,
                    gso: bool = False, direct: bool = False) -> dict:
    """In ``x``: our ITR (AF_PACKET inside, batch path; LISP data out with sendmmsg, or
    with UDP GSO; as (bytes, address) pairs through the core's queue, or ``direct``
    from a TxBatch), until ``stop``."""
    import asyncio
    import resource
    import struct

    from corecast.aio.raw import RawItrNode

    itr = _itr(map_cache, corecast, fast)
    node = RawItrNode(itr, "to-s", [X_IN, X_OUT], count_links=False, gso=gso, direct=direct)
    await node.start()
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    ready.set()
    await asyncio.get_running_loop().run_in_executor(None, stop.wait, 120)
    await asyncio.sleep(0.2)
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    drops = 0
    if node.raw is not None:  # PACKET_STATISTICS: struct tpacket_stats {packets, drops}
        drops = struct.unpack("II", node.raw.sock.getsockopt(263, 6, 8))[1]
    out = {
        "in": itr.counters["in_packets"],
        "cpu_s": (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime),
        "user_s": r1.ru_utime - r0.ru_utime,
        "socket_drops": drops,
        "itr_drops": sum(itr.drops().values()),
        "tx": node.t_data.stats["tx_packets"],
        "tx_dropped": node.t_data.stats["tx_dropped"],
        "gso": node.gso, "gso_fallbacks": node.t_data.stats["gso_fallbacks"],
    }
    await node.close()
    return out


def _end_to_end(cc_pkts: list[bytes], uc_pkts: list[bytes], map_cache: str, seconds: float,
                reps: int, labels: list[tuple[str, bool, bool, bool]]
                ) -> tuple[list[dict], dict[str, list[float]], dict[str, list[float]]] | None:
    """One row per subject (all ``reps`` interleaved, numeric fields as figures: median or
    range), the kpps samples per subject and our ITRs' packets per CPU-second samples;
    None without root."""
    import socket

    try:
        from deliverykit.testbed import Testbed, have_root
    except ImportError:
        return None
    if not have_root():
        return None
    items = {"plain": [(p, (socket.inet_ntoa(p[16:20]), 0)) for p in uc_pkts],
             "corecast": [(p, (socket.inet_ntoa(p[16:20]), 0)) for p in cc_pkts]}
    subjects = [("Linux kernel forwarding", "plain", None, (False, False))] + [
        (f"our ITR {mode} ({label})", mode, fast, (gso, direct))
        for label, fast, gso, direct in labels for mode in ("plain", "corecast")]
    from corecast.experiments.overhead import CpuSample

    senders = _senders()
    offered = {m: _per_sender(items[m], senders, m == "corecast") for m in items}
    ncpu = os.cpu_count() or 1
    runs: dict[str, list[dict]] = {}
    with Testbed(prefix="ccbench") as tb:
        s, x, cap = tb.host("s"), tb.host("x"), tb.host("cap")
        tb.link(s, x, f"{S_ADDR}/24", f"{X_IN}/24")
        l2 = tb.link(x, cap, f"{X_OUT}/24", f"{CAP}/24")
        tb.route(s, "default", via=X_IN)
        tb.route(x, "10.0.0.0/8", via=CAP)
        tb.route(x, "100.64.0.0/10", via=CAP)
        for h in (s, x, cap):
            tb.sysctl(h, "net.ipv6.conf.all.disable_ipv6", "1")
        # a UDP GSO message from our ITR is cut into its datagrams in x, as a NIC
        # without UDP segmentation offload would have it done: otherwise the veth
        # hands it whole to cap, whose rx counter would count one packet for many
        feats = tb.features(x, l2.a, tx_udp_segmentation=False)
        if feats.get("tx-udp-segmentation", True):
            raise RuntimeError("could not turn tx-udp-segmentation off on x's egress")
        # cap only counts: its interface's rx counter sees every packet, then an ingress
        # hook drops IPv4 before the IP layer (no ICMP errors, no work charged to
        # whoever sent the frame: the kernel's forwarding path and our ITR alike)
        nft = ("table netdev capsink {\n chain in {\n  type filter hook ingress device "
               f"\"{l2.b.ifname}\" priority 0;\n  meta protocol ip drop\n }}\n}}\n")
        sink = tb.exec(cap, ["nft", "-f", "-"], input=nft)
        sink_note = "" if sink.returncode == 0 else f"nft sink failed: {sink.stderr.strip()}"
        # neighbour entries before anything is timed
        tb.run(s, _blast, items["plain"][:4], 0.01)
        tb.sysctl(x, "net.ipv4.ip_forward", "1")
        tb.run(s, _blast, items["plain"][:4], 0.01)
        tb.sysctl(x, "net.ipv4.ip_forward", "0")
        for _ in range(reps):
            for name, mode, fast, (gso, direct) in subjects:
                task = None
                if fast is None:
                    tb.sysctl(x, "net.ipv4.ip_forward", "1")
                else:
                    ready, stop = tb.event(), tb.event()
                    task = tb.spawn(x, _itr_proc, map_cache, mode == "corecast", fast, ready,
                                    stop, gso, direct)
                    if not ready.wait(30):
                        raise RuntimeError("ITR did not start")
                c0 = tb.counters(cap, l2.b)
                m0 = CpuSample.now()
                snd = _offer(tb, s, offered[mode], seconds)
                m1 = CpuSample.now()
                c1 = tb.counters(cap, l2.b)
                if task is None:
                    tb.sysctl(x, "net.ipv4.ip_forward", "0")
                    itr = {}
                else:
                    stop.set()
                    itr = task.result(timeout=60)
                got = c1["rx_packets"] - c0["rx_packets"]
                row = {"subject": name + " (namespaces)", "sender kpps": snd["sent"] / snd[
                    "seconds"] / 1e3, "kpps": got / snd["seconds"] / 1e3, "packets in":
                    snd["sent"], "packets out": got,
                    "machine CPU us/pkt": 1e6 * m0.busy_share(m1) * ncpu * snd["seconds"]
                    / max(got, 1)}
                if task is None:
                    row["at its limit"] = ("yes: forwarded less than offered"
                                           if got < 0.97 * snd["sent"] else "no: sender-bound")
                if itr:
                    row["ITR CPU us/pkt"] = 1e6 * itr["cpu_s"] / max(itr["in"], 1)
                    row["ITR kpps per CPU-s"] = itr["in"] / max(itr["cpu_s"], 1e-9) / 1e3
                    row["ITR user CPU %"] = 100 * itr["user_s"] / max(itr["cpu_s"], 1e-9)
                    row["drops"] = itr["socket_drops"] + itr["itr_drops"] + itr["tx_dropped"]
                    if gso and not itr["gso"]:
                        row["note"] = "UDP GSO not available: sent with sendmmsg"
                    elif itr["gso_fallbacks"]:
                        row["note"] = "the kernel refused UDP GSO: sendmmsg after it"
                else:
                    row["drops"] = max(0, snd["sent"] - got)
                runs.setdefault(name, []).append(row)
    rows = []
    for n, _, _, _ in subjects:
        rs = runs[n]
        rows.append({k: (Figure.of(r[k] for r in rs) if isinstance(v, (int, float)) else v)
                     for k, v in rs[0].items()})
    if sink_note:
        rows[0]["note"] = sink_note
    return (rows, {n + " (namespaces)": [r["kpps"] for r in runs[n]] for n, _, _, _ in subjects},
            {n + " (namespaces)": [r["ITR kpps per CPU-s"] for r in runs[n]]
             for n, _, fast, _ in subjects if fast is not None})


#: the paper's figure (section 6): CoreCast cost 1.52x the CPU of plain LISP forwarding
PAPER = Reference(1 / 1.52, "x plain", "CoreCast paper, section 6: CoreCast used 1.52x the CPU "
                  "of plain LISP forwarding (linear EID-to-RLOC search), i.e. 0.66x its packets/s")


def run(quick: bool) -> dict:
    scale, chunks, repeat = (1, 2, 3) if quick else (1, 20, 9)
    e2e_seconds, e2e_reps = (0.4, 2) if quick else (2.0, 3)
    cc_pkts, uc_pkts, pop = _traffic(scale, chunks)
    map_cache = pop.map_cache_text()
    labels = [("pure", False)] + ([("C", True)] if HAVE_C else [])
    itrs = {(label, mode): _itr(map_cache, mode == "corecast", fast)
            for label, fast in labels for mode in ("plain", "corecast")}
    # interleave the variants on every repetition (the machine is shared)
    samples = interleaved({key: partial(_sans_io, cc_pkts if key[1] == "corecast" else uc_pkts, itr)
                           for key, itr in itrs.items()}, repeat)
    pps = {key: [x[0] for x in ss] for key, ss in samples.items()}

    def subject(label: str, mode: str) -> str:
        return f"ITR {mode} ({label}), sans-IO batch path"

    rows: list[dict] = []
    for (label, mode), itr in itrs.items():
        rows.append({"subject": subject(label, mode),
                     "packets in": len(cc_pkts if mode == "corecast" else uc_pkts),
                     "packets out": samples[(label, mode)][-1][1],
                     "drops": sum(itr.drops().values()),
                     "kpps": Figure.of(x / 1e3 for x in pps[(label, mode)])})
    comps = []
    for label, _ in labels:
        comps.append(measured(f"corecast/plain ({label}, sans-IO)", pps[(label, "corecast")],
                              pps[(label, "plain")], anchor=subject(label, "plain"),
                              unit="pkt/CPU-s", target=">= 0.9"))
    for label, _ in labels:
        ratio = [c / p for c, p in zip(pps[(label, "corecast")], pps[(label, "plain")])]
        comps.append(referenced(f"corecast/plain ({label}, sans-IO) / paper's", ratio, PAPER,
                                anchor="CoreCast paper's corecast/plain", target=">= 1"))
    if HAVE_C:
        for mode in ("corecast", "plain"):
            comps.append(measured(f"C/pure ({mode}, sans-IO)", pps[("C", mode)],
                                  pps[("pure", mode)], anchor=subject("pure", mode),
                                  unit="pkt/CPU-s"))
    # end to end, the C ITR also sends with UDP GSO (one message per run of same-size
    # datagrams to one RLOC, cut into datagrams at x's device), and from a TxBatch (the
    # batch loop appends each datagram as references to its header and body, sent from
    # there: no Python object per datagram)
    e2e_labels = [(label, fast, False, False) for label, fast in labels] + (
        [("C, GSO", True, True, False), ("C, TxBatch, GSO", True, True, True)]
        if HAVE_C else [])
    e2e = _end_to_end(cc_pkts, uc_pkts, map_cache, e2e_seconds, e2e_reps, e2e_labels)
    if e2e is None:
        note_e2e = "end to end vs the kernel: needs root (namespace testbed); not measured"
    else:
        rows += e2e[0]
        kpps = e2e[1]
        kern = "Linux kernel forwarding (namespaces)"
        for label, _, _, _ in e2e_labels:
            for mode in ("plain", "corecast"):
                comps.append(measured(f"ITR {mode} ({label}) / kernel, end to end",
                                      kpps[f"our ITR {mode} ({label}) (namespaces)"], kpps[kern],
                                      anchor=kern, unit="kpps",
                                      target=">= 0.8" if label.startswith("C") else ""))
            plain = f"our ITR plain ({label}) (namespaces)"
            comps.append(measured(f"corecast/plain ({label}, end to end)",
                                  kpps[f"our ITR corecast ({label}) (namespaces)"], kpps[plain],
                                  anchor=plain, unit="kpps"))
        if HAVE_C:
            for mode in ("plain", "corecast"):
                base = f"our ITR {mode} (C) (namespaces)"
                comps.append(measured(f"ITR {mode} (C): UDP GSO / sendmmsg, end to end",
                                      kpps[f"our ITR {mode} (C, GSO) (namespaces)"], kpps[base],
                                      anchor=base, unit="kpps"))
                comps.append(measured(f"ITR {mode} (C): TxBatch and GSO / sendmmsg, end to end",
                                      kpps[f"our ITR {mode} (C, TxBatch, GSO) (namespaces)"],
                                      kpps[base], anchor=base, unit="kpps"))
                for variant in ("C, GSO", "C, TxBatch, GSO"):
                    comps.append(measured(
                        f"ITR {mode} ({variant}) / (C), packets per ITR CPU-second",
                        e2e[2][f"our ITR {mode} ({variant}) (namespaces)"], e2e[2][base],
                        anchor=base, unit="kpkt/CPU-s"))
        pg = pktgen_status()
        note_e2e = (
            f"end to end: {_senders()} senders at once (cc_blast, {'C' if HAVE_C else 'pure'} "
            f"sendmmsg of prebuilt packets; pktgen: {pg or 'available, not used yet'}) for "
            f"{e2e_seconds} s per subject, {e2e_reps} interleaved repeats; "
            "kpps = packets arriving at cap / the senders' time; 'sender kpps' is what they "
            "offered: where kpps is below it, the forwarder (kernel or ITR) was at its limit; "
            "machine CPU us/pkt: /proc/stat busy share x CPUs x time / packets out (includes "
            "the senders and the rest of this shared machine); with GSO, x's egress has "
            "tx-udp-segmentation off, so the kernel cuts each message into its datagrams in x "
            "(charged to the ITR's side) and cap counts every datagram")
    sizes = pop.sizes()
    return {
        "title": "CoreCast ITR: plain LISP vs CoreCast demultiplexing vs kernel forwarding "
                 "(packets/s)",
        "rows": rows,
        "comparisons": comps,
        "repeats": repeat,
        "notes": [
            f"{len(pop.clients)} clients over {len(sizes)} ASes "
            f"({sum(1 for s in sizes if s == 1)} with one client, largest {max(sizes)}), "
            f"{chunks} chunks of 1,200 B: {len(cc_pkts)} CoreCast / {len(uc_pkts)} unicast "
            f"packets; sans-IO: input packets per CPU-second, {repeat} interleaved repeats",
            "corecast/plain >= 0.9 means CoreCast costs at most ~1.11x plain forwarding here "
            "(the paper's 1.52x is the reference row)",
            note_e2e,
        ],
    }
