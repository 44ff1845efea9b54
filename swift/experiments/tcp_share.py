"""Does our LEDBAT yield to TCP at a shared bottleneck (RFC 6817: a scavenger must)?

Testbed (``--backend netns``, root): a PPSPP seeder and a TCP sender behind
router r, a PPSPP leecher and a TCP receiver behind r2; the link r -> r2 is
the one bottleneck (tbf, 10 Mbit/s, a drop-tail queue of 64 or 248 full
frames: ~77 or 300 ms), the return path gets netem's 20 ms::

    seed ---\\                                   /--- leech
             r ==== tbf 10 Mbit/s, queue Q ==> r2
    tsnd ---/  <=== netem 20 ms (the return path) \\--- trcv

The competitor is real Linux TCP (cubic, asked for by ``TCP_CONGESTION``:
this machine's default is bbr) from a bulk sender on plain sockets.  Each
case runs one flow alone, then both, in both orders; nftables counters on
r and r2 give every second each flow's rate and (with tbf's counters) the
queue's drops and backlog.  With ``LIBSWIFT_BIN`` set, libswift's pair runs
the same cases.  Simulator (``--backend sim``): the same bottleneck in
``deliverykit.sim`` with our very ``Peer``; it has no TCP model and none is
built: the competitor is a constant-rate UDP load (``--cbr-share``).

    ppspp experiment tcp-share --quick            # CI: 2 cases x 8 s, 64-frame queue
    ppspp experiment tcp-share                    # 2 orders x 2 queues x (5 + 25) s
    ppspp experiment tcp-share --backend sim [--quick]

Output (``--out``): ``tcp_share[-sim].csv`` (per case and interval) and
``.json`` (parameters, commit, load, summaries), each only when complete;
stdout: one line per case ("TCP kept 74% of 10 Mbit/s ...").  docs/ledbat.md
says how each figure is measured and what was found.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import enum
import json
import os
import random
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from deliverykit import cliutil, outputs
from deliverykit.testbed.shaping import FRAME_BYTES

#: bytes a frame carries beyond its IP packet on a veth (Ethernet header), as tbf counts
ETHERNET = 14
#: a PPSPP rate at or below this share of the link counts as "backed off"
BACKOFF_SHARE = 0.10
#: intervals at least that a back-off must last (to the end of the overlap)
BACKOFF_INTERVALS = 2
PPSPP_PORT = 6779
TCP_PORT = 5201
#: the TCP sender's write size
TCP_WRITE = 64 * 1024
#: seconds after the senders stop before the final counts (the queue empties; what was
#: still in it is not a drop)
DRAIN_S = 0.5


class Order(enum.Enum):
    """Which flow runs alone first."""

    #: PPSPP alone, then TCP joins
    PPSPP_FIRST = "ppspp-first"
    #: TCP alone, then PPSPP joins
    TCP_FIRST = "tcp-first"


class Arm(enum.Enum):
    """Whose PPSPP pair crosses the bottleneck."""

    OURS = "ours"
    #: libswift's seeder and leecher (LIBSWIFT_BIN; testbed only)
    LIBSWIFT = "libswift"


class Backend(enum.Enum):
    NETNS = "netns"
    SIM = "sim"


def frames_for_ms(ms: float, rate_bps: float) -> int:
    """Full frames (tbf's accounting, 1,514 bytes) that queue ``ms`` at ``rate_bps``."""
    return max(1, round(ms / 1000 * rate_bps / 8 / FRAME_BYTES))


@dataclass(frozen=True, slots=True)
class Case:
    """One run: who starts first, the queue, the timing, whose PPSPP."""

    order: Order
    #: tbf queue limit in full frames
    queue_frames: int
    arm: Arm = Arm.OURS
    lead_s: float = 5.0
    overlap_s: float = 25.0
    rate_bps: float = 10e6
    #: base round-trip delay (netem on the return path; the sim splits it over both ways)
    rtt_ms: float = 20.0
    interval_s: float = 1.0
    #: sim only: the competing constant-rate load as a share of the link
    cbr_share: float = 0.9
    #: testbed: the TCP sender's congestion control (RFC 6817 is written against
    #: standard loss-based TCP; this machine's default is bbr)
    tcp_cc: str = "cubic"
    #: our peers' LEDBAT TARGET (PeerConfig.ledbat_target_ms; None: the peer's default)
    ledbat_target_ms: float | None = None

    def peer_config(self) -> Any:
        from swift.core.config import PeerConfig
        return PeerConfig(ledbat_target_ms=self.ledbat_target_ms)

    @property
    def queue_ms(self) -> float:
        return self.queue_frames * FRAME_BYTES * 8 / self.rate_bps * 1000

    @property
    def duration_s(self) -> float:
        return self.lead_s + self.overlap_s

    def start_of(self, flow: str) -> float:
        """Seconds from the case's start until ``flow`` ("ppspp" or "other") starts."""
        first = "ppspp" if self.order is Order.PPSPP_FIRST else "other"
        return 0.0 if flow == first else self.lead_s

    @property
    def label(self) -> str:
        return (f"{self.arm.value} {self.order.value} queue {self.queue_frames} "
                f"({self.queue_ms:.0f} ms)")


@dataclass(frozen=True, slots=True)
class Interval:
    """One measurement interval of one case (rates in bit/s of frames as tbf counts them)."""

    #: seconds from the case's start to the end of the interval
    t: float
    ppspp_bps: float
    #: TCP on the testbed, the constant-rate load in the simulator
    other_bps: float
    #: PPSPP datagrams the bottleneck queue dropped in the interval (an estimate:
    #: :func:`split_drops` of ``queue_drops``)
    ppspp_drops: int
    other_drops: int
    #: queueing delay at the bottleneck at the end of the interval
    queue_ms: float
    #: datagrams the bottleneck queue dropped in the interval, all flows (exact: tbf's count)
    queue_drops: int = 0


def split_drops(drops: int, entered: tuple[int, int], left: tuple[int, int]) -> tuple[int, int]:
    """Share one interval's queue drops (exact, all flows) between (PPSPP, other).

    What entered the queue minus what left it in the interval is a flow's drops plus the
    change of its share of the queue content, so it is not the drops itself (summed it
    overshoots).  The exact total is split in proportion to each flow's positive excess
    (entered - left), else to what entered; the two parts sum to ``drops``."""
    if drops <= 0:
        return 0, 0
    w = [max(0, e - g) for e, g in zip(entered, left)]
    if not sum(w):
        w = [max(0, e) for e in entered]
    if not sum(w):
        w = [1, 1]
    p = min(drops, round(drops * w[0] / (w[0] + w[1])))
    return p, drops - p


@dataclass(frozen=True, slots=True)
class LedbatSample:
    """Our seeder's LEDBAT state toward the leecher at one instant (the channel with the
    most DATA in flight), sampled every ``TRACE_S``: why it grew or yielded."""

    #: seconds from the case's start
    t: float
    cwnd: float
    flightsize: int
    #: MIN(base_delays) (-1 before the first sample) and FILTER(current_delays) - base
    #: (RFC 6817 2.4.2), seconds
    base_delay: float
    queuing_delay: float
    srtt: float
    min_rtt: float
    #: LEDBAT's counters so far: DATA found lost, congestion timeouts
    losses: int
    timeouts: int
    #: window halvings (at most one per RTT however many DATA a loss event took)
    loss_events: int = 0
    #: the Peer's counters: DATA acknowledged after loss repair sent it again, tail probes
    spurious: int = 0
    probes: int = 0
    #: Ledbat.first_delay (seconds, -1 before the first sample): the base delay of the
    #: first CURRENT_FILTER delay samples; how far the base has fallen below it opens
    #: Ledbat.YOUNG_BASE's gate (docs/ledbat.md; the first sample alone before session 15)
    first_delay: float = -1.0


#: seconds between two LedbatSamples
TRACE_S = 0.1


def ledbat_sample(peer: Any, t: float) -> LedbatSample | None:
    """The LEDBAT state of ``peer``'s busiest channel (None without a channel)."""
    chans = list(peer.channels.values())
    if not chans:
        return None
    led = max(chans, key=lambda c: c.send.ledbat.flightsize).send.ledbat
    base = led.base_delay
    return LedbatSample(
        round(t, 3), led.cwnd, led.flightsize, base if base != float("inf") else -1.0,
        led.queuing_delay if base != float("inf") else 0.0, led.srtt or 0.0,
        led.min_rtt if led.min_rtt != float("inf") else 0.0, led.losses, led.timeouts,
        led.loss_events, int(peer.stats.get("spurious", 0)), int(peer.stats.get("probes", 0)),
        led.first_delay if led.first_delay != float("inf") else -1.0)


@dataclass(frozen=True, slots=True)
class CaseResult:
    """A case, its intervals and what they say."""

    case: Case
    backend: Backend
    intervals: tuple[Interval, ...]
    #: the competitor's name in the summary ("TCP", "constant-rate UDP")
    other: str
    #: what the competitor's share is taken of (bit/s): the link for TCP, its offered rate for CBR
    other_base_bps: float
    #: extra figures of the run (peer counters, TCP congestion control, qdisc totals)
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)
    #: our seeder's LEDBAT state every TRACE_S (empty for libswift's arm)
    trace: tuple[LedbatSample, ...] = ()

    def overlap(self) -> list[Interval]:
        start = self.case.lead_s
        return [x for x in self.intervals if x.t - self.case.interval_s >= start - 1e-6]

    def mean(self, field: str, rows: Sequence[Interval] | None = None) -> float:
        rows = self.overlap() if rows is None else rows
        return sum(getattr(x, field) for x in rows) / len(rows) if rows else 0.0

    @property
    def other_kept(self) -> float:
        """The competitor's mean rate over the overlap / its base (0..1)."""
        return min(1.0, self.mean("other_bps") / self.other_base_bps)

    @property
    def other_share_of_delivered(self) -> float:
        ov = self.overlap()
        tot = sum(x.other_bps + x.ppspp_bps for x in ov)
        return sum(x.other_bps for x in ov) / tot if tot else 0.0

    @property
    def backoff_s(self) -> float | None:
        """Seconds from the start of the overlap until PPSPP backed off for good: the first
        interval at or below BACKOFF_SHARE of the link from which PPSPP's mean rate to the
        end of the overlap (at least BACKOFF_INTERVALS intervals) stays there too (None:
        never; a dip it climbs back from is no back-off)."""
        limit = BACKOFF_SHARE * self.case.rate_bps
        ov = self.overlap()
        for i in range(len(ov) - BACKOFF_INTERVALS + 1):
            rest = ov[i:]
            if ov[i].ppspp_bps <= limit and self.mean("ppspp_bps", rest) <= limit:
                first = ov[i].t - self.case.interval_s
                return round(max(0.0, first - self.case.lead_s), 3)
        return None

    def ppspp_drops_overlap(self) -> int:
        """PPSPP datagrams the queue dropped while both flows ran: exact when the backend
        counted the case's total per flow (``extra["ppspp_drops"]``; the lead intervals
        hold one flow, so their split is exact too), else the intervals' shares."""
        ov = self.overlap()
        total = self.extra.get("ppspp_drops")
        if total is None:
            return sum(x.ppspp_drops for x in ov)
        return max(0, int(total) - sum(x.ppspp_drops for x in self.intervals if x not in ov))

    def summary(self) -> dict[str, Any]:
        ov = self.overlap()
        return {
            "case": self.case.label, "backend": self.backend.value, "arm": self.case.arm.value,
            "order": self.case.order.value, "queue_frames": self.case.queue_frames,
            "queue_ms": round(self.case.queue_ms, 1),
            "other": self.other, "other_kept": round(self.other_kept, 3),
            "other_share_of_delivered": round(self.other_share_of_delivered, 3),
            "ppspp_mbps_overlap": round(self.mean("ppspp_bps", ov) / 1e6, 3),
            "other_mbps_overlap": round(self.mean("other_bps", ov) / 1e6, 3),
            "ppspp_mbps_alone": round(self._alone("ppspp") / 1e6, 3),
            "other_mbps_alone": round(self._alone("other") / 1e6, 3),
            "ppspp_drops": sum(x.ppspp_drops for x in self.intervals),
            "other_drops": sum(x.other_drops for x in self.intervals),
            "ppspp_drops_overlap": self.ppspp_drops_overlap(),
            "queue_drops_overlap": sum(x.queue_drops for x in ov),
            "queue_ms_overlap_mean": round(self.mean("queue_ms", ov), 1),
            "backoff_s": self.backoff_s, **self.extra,
        }

    def _alone(self, flow: str) -> float:
        if self.case.start_of(flow) > 0:
            return 0.0
        lead = [x for x in self.intervals if x.t <= self.case.lead_s + 1e-6]
        return self.mean(f"{flow}_bps", lead[1:] or lead)  # the first second is start-up

    def line(self) -> str:
        s = self.summary()
        base = self.other_base_bps / 1e6
        what = "of" if self.other == "TCP" else "of its offered"
        back = (f"backed off in {s['backoff_s']:g} s" if s["backoff_s"] is not None
                else f"did not back off to <= {BACKOFF_SHARE:.0%} of the link")
        return (f"{self.case.label} [{self.backend.value}]: {self.other} kept "
                f"{self.other_kept:.0%} {what} {base:g} Mbit/s "
                f"({s['other_mbps_overlap']:g} Mbit/s; PPSPP {s['ppspp_mbps_overlap']:g} Mbit/s, "
                f"{s['ppspp_drops_overlap']} PPSPP datagrams dropped by the queue in the "
                f"{self.case.overlap_s:g} s overlap; PPSPP {back}; "
                f"queue {s['queue_ms_overlap_mean']:g} ms)")


def cases(quick: bool, arms: Sequence[Arm], queues: Sequence[int] | None = None,
          lead_s: float | None = None, overlap_s: float | None = None, rate_bps: float = 10e6,
          cbr_share: float = 0.9, tcp_cc: str = "cubic",
          ledbat_target_ms: float | None = None) -> list[Case]:
    """Both orders x the queues x the arms (quick: 2 + 6 s and the ~77 ms queue only)."""
    qs = list(queues) if queues else ([frames_for_ms(77, rate_bps)] if quick else
                                      [frames_for_ms(77, rate_bps), frames_for_ms(300, rate_bps)])
    lead = lead_s if lead_s is not None else (2.0 if quick else 5.0)
    over = overlap_s if overlap_s is not None else (6.0 if quick else 25.0)
    return [Case(o, q, a, lead, over, rate_bps, cbr_share=cbr_share, tcp_cc=tcp_cc,
                 ledbat_target_ms=ledbat_target_ms)
            for a in arms for q in qs for o in Order]


# -- the testbed ------------------------------------------------------------------------

_NFT = """table inet tcpshare {{
  counter ppspp {{ }}
  counter tcpflow {{ }}
  chain counting {{
    type filter hook forward priority 0; policy accept;
    {dir} "{dev}" meta l4proto udp counter name "ppspp"
    {dir} "{dev}" meta l4proto tcp counter name "tcpflow"
  }}
}}
"""


def _counters(tb: Any, host: Any) -> dict[str, tuple[int, int]]:
    """name -> (packets, frame bytes) of the nftables counters in ``host``."""
    cp = tb.exec(host, ["nft", "-j", "list", "counters", "table", "inet", "tcpshare"], check=True)
    out: dict[str, tuple[int, int]] = {}
    for item in json.loads(cp.stdout)["nftables"]:
        c = item.get("counter")
        if c:
            n = int(c["packets"])
            out[c["name"].removesuffix("flow")] = (n, int(c["bytes"]) + ETHERNET * n)
    return out


def _qdisc(tb: Any, host: Any, dev: str) -> dict[str, int]:
    """The tbf's totals and backlog on ``dev``."""
    return tb.tbf_counters(host, dev)


def _udp_counters(tb: Any, host: Any) -> dict[str, int]:
    """The ``Udp:`` counters of ``host``'s namespace (/proc/net/snmp): RcvbufErrors are
    datagrams a socket there dropped, a loss no queue counter sees."""
    lines = [ln.split() for ln in tb.exec(host, ["cat", "/proc/net/snmp"], check=True)
             .stdout.splitlines() if ln.startswith("Udp:")]
    return {k: int(v) for k, v in zip(lines[0][1:], lines[1][1:])}


def _sleep_until(t: float) -> None:
    delay = t - time.time()
    if delay > 0:
        time.sleep(delay)


def _tcp_receiver(ready: Any, until: float) -> dict[str, int]:
    with socket.create_server(("0.0.0.0", TCP_PORT)) as srv:
        ready.set()
        srv.settimeout(max(1.0, until - time.time()))
        conn, _ = srv.accept()
        got = 0
        with conn:
            while time.time() < until + 5:
                conn.settimeout(max(0.5, until + 5 - time.time()))
                try:
                    b = conn.recv(1 << 18)
                except (TimeoutError, ConnectionResetError):  # the sender aborts at the end
                    break
                if not b:
                    break
                got += len(b)
    return {"tcp_received": got}


def _tcp_sender(dst: str, start: float, stop: float, cc: str) -> dict[str, Any]:
    """Bulk TCP from ``start`` to ``stop`` (wall clock) with congestion control ``cc``."""
    _sleep_until(start)
    buf = bytes(TCP_WRITE)
    sent = 0
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc.encode())
        s.settimeout(10)
        s.connect((dst, TCP_PORT))
        cc = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).split(b"\0")[0].decode()
        while time.time() < stop:
            s.settimeout(max(0.05, stop - time.time()))
            try:
                sent += s.send(buf)
            except TimeoutError:
                break
        info = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
        retrans = int.from_bytes(info[100:104], sys.byteorder)  # tcpi_total_retrans
        # stop now: a plain close would send what the socket buffer still holds (seconds
        # at 10 Mbit/s) past the end of the case; linger 0 aborts with a RST
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    return {"tcp_sent": sent, "tcp_congestion_control": cc, "tcp_total_retrans": retrans}


async def _our_seeder(path: str, cfg: Any, ready: Any, stop: Any) -> dict[str, Any]:
    """``ppspp seed`` with ``cfg`` until the parent sets ``stop``."""
    from swift.aio.node import seeder
    from swift.sim import upload_diag
    async with seeder(path, cfg, host="0.0.0.0", port=PPSPP_PORT) as node:
        ready.set()
        diag: dict[str, int] = {}
        trace: list[LedbatSample] = []
        for _ in range(int(3600 / TRACE_S)):  # bounded: an hour
            if stop.wait(0):
                break
            if node.peer.channels:  # LEDBAT's counters live while the leecher's channel does
                diag = upload_diag(node.peer)
                x = ledbat_sample(node.peer, time.time())  # wall clock: the parent's t0
                if x is not None:
                    trace.append(x)
            await asyncio.sleep(TRACE_S)
        return {"seeder_sent_data": int(node.peer.stats.get("sent_data", 0)),
                **{f"seeder_{k}": v for k, v in diag.items()},
                "seeder_loss_events": trace[-1].loss_events if trace else 0,
                "seeder_trace": trace}


async def _our_leecher(root: str, seeder_ip: str, out: str, cfg: Any, start: float,
                       stop: float) -> dict[str, int]:
    from swift.aio.node import downloader
    await asyncio.sleep(max(0.0, start - time.time()))
    async with downloader(bytes.fromhex(root), out, cfg, host="0.0.0.0",
                          port=PPSPP_PORT) as node:
        node.connect((seeder_ip, PPSPP_PORT))
        await asyncio.sleep(max(0.0, stop - time.time()))
        st = node.peer.stats
        # DATA that arrived but was not acknowledged: "unverifiable" (hashes it needed
        # were lost with an earlier datagram, RFC 7574 5.3), duplicates, rejected
        return {"leecher_chunks": node.peer.content.have.count(),
                **{f"leecher_{k}": int(st.get(k, 0))
                   for k in ("verified", "unverifiable", "dup", "rejected", "unsolicited")}}


def _libswift_seeder(tb: Any, host: Any, binary: str, path: str) -> tuple[Any, str]:
    """Start libswift seeding ``path``; (process, root hash) once it printed the root."""
    import select
    proc = tb.popen(host, [binary, "-f", path, "-l", f"0.0.0.0:{PPSPP_PORT}"],
                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                    cwd=os.path.dirname(path))
    deadline = time.time() + 120
    while time.time() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 1.0)
        line = proc.stdout.readline() if ready else ""
        if "Root hash:" in line:
            return proc, line.split("Root hash:")[1].strip()[:40]
        if proc.poll() is not None:
            break
    raise RuntimeError(f"libswift seeder ({binary}) printed no root hash")


def run_netns(case: Case, size: int, libswift_bin: str | None = None,
              progress: bool = False) -> CaseResult:
    """One case on the namespace testbed (root)."""
    from deliverykit.testbed import Netem, Tbf, Testbed
    from deliverykit.testbed.lifecycle import stop_process
    from swift.aio.node import tree_for_file
    from swift.wire.constants import HashFunc
    extra: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="tcp-share-") as d, Testbed(prefix="tsh") as tb:
        path = os.path.join(d, "content.bin")
        with open(path, "wb") as f:
            f.write(random.Random(0).randbytes(size))
        h = {n: tb.host(n, forwarding=n in ("r", "r2"))
             for n in ("seed", "tsnd", "r", "r2", "leech", "trcv")}
        tb.link(h["seed"], h["r"], "10.81.1.2/24", "10.81.1.1/24")
        tb.link(h["tsnd"], h["r"], "10.81.2.2/24", "10.81.2.1/24")
        bn = tb.link(h["r"], h["r2"], "10.81.3.1/24", "10.81.3.2/24")
        tb.link(h["leech"], h["r2"], "10.81.4.2/24", "10.81.4.1/24")
        tb.link(h["trcv"], h["r2"], "10.81.5.2/24", "10.81.5.1/24")
        for n, gw in (("seed", "10.81.1.1"), ("tsnd", "10.81.2.1"), ("leech", "10.81.4.1"),
                      ("trcv", "10.81.5.1")):
            tb.route(h[n], "default", via=gw)
        tb.route(h["r"], "10.81.4.0/23", via="10.81.3.2")
        tb.route(h["r2"], "10.81.0.0/22", via="10.81.3.1")
        tb.shape(bn.a, tbf=Tbf(int(case.rate_bps), limit_pkts=case.queue_frames))
        tb.shape(bn.b, netem=Netem(delay_ms=case.rtt_ms, limit_pkts=10000))
        for host, direction, dev in ((h["r"], "oifname", bn.a.ifname),
                                     (h["r2"], "iifname", bn.b.ifname)):
            cp = subprocess.run(["ip", "netns", "exec", host.ns, "nft", "-f", "-"], text=True,
                                input=_NFT.format(dir=direction, dev=dev), capture_output=True,
                                timeout=30)
            if cp.returncode:
                raise RuntimeError(f"nft in {host.name}: {cp.stderr.strip()}")
        procs: list[Any] = []
        tasks: list[Any] = []
        stop = tb.event()
        try:
            # times are fixed once the seeder is up (it hashes the content first)
            if case.arm is Arm.LIBSWIFT:
                assert libswift_bin
                sp, root = _libswift_seeder(tb, h["seed"], libswift_bin, path)
                procs.append(sp)
            else:
                root = tree_for_file(path, HashFunc.SHA256, 1024, cache=True).root_hash.hex()
                sready = tb.event()
                tasks.append(tb.spawn(h["seed"], _our_seeder, path, case.peer_config(), sready,
                                      stop))
                if not sready.wait(60):
                    raise RuntimeError("our seeder did not start within 60 s")
            t0 = time.time() + 1.0
            end = t0 + case.duration_s
            p_start, o_start = t0 + case.start_of("ppspp"), t0 + case.start_of("other")
            tready = tb.event()
            rx = tb.spawn(h["trcv"], _tcp_receiver, tready, end)
            if not tready.wait(30):
                raise RuntimeError("TCP receiver did not start")
            tx = tb.spawn(h["tsnd"], _tcp_sender, "10.81.5.2", o_start, end, case.tcp_cc)
            leech_dir = os.path.join(d, "leech")
            os.mkdir(leech_dir)
            lproc = None
            if case.arm is Arm.OURS:
                tasks.append(tb.spawn(h["leech"], _our_leecher, root, "10.81.1.2",
                                      os.path.join(leech_dir, "out.bin"), case.peer_config(),
                                      p_start, end))
            intervals = []
            _sleep_until(t0)
            before = time.time()
            prev_r2 = _counters(tb, h["r2"])
            prev_t = (before + time.time()) / 2
            prev_r = _counters(tb, h["r"])
            prev_drops = _qdisc(tb, h["r"], bn.a.ifname)["drops"]
            k = 0
            while True:
                k += 1
                tk = t0 + k * case.interval_s
                due = tk - case.interval_s >= p_start - 1e-3
                if lproc is None and case.arm is Arm.LIBSWIFT and libswift_bin and due:
                    lproc = tb.popen(h["leech"], [libswift_bin, "-t", f"10.81.1.2:{PPSPP_PORT}",
                                                  "-h", root, "-l", f"0.0.0.0:{PPSPP_PORT}"],
                                     cwd=leech_dir, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
                    procs.append(lproc)
                if tk > end + 1e-6:
                    break
                _sleep_until(tk)
                before = time.time()
                cr2 = _counters(tb, h["r2"])  # the rates: timed as closely as one exec allows
                now = (before + time.time()) / 2
                cr = _counters(tb, h["r"])
                q = _qdisc(tb, h["r"], bn.a.ifname)
                dt = max(1e-3, now - prev_t)
                entered = (cr["ppspp"][0] - prev_r["ppspp"][0], cr["tcp"][0] - prev_r["tcp"][0])
                left = (cr2["ppspp"][0] - prev_r2["ppspp"][0], cr2["tcp"][0] - prev_r2["tcp"][0])
                drops = q["drops"] - prev_drops
                intervals.append(Interval(
                    round(tk - t0, 3),
                    (cr2["ppspp"][1] - prev_r2["ppspp"][1]) * 8 / dt,
                    (cr2["tcp"][1] - prev_r2["tcp"][1]) * 8 / dt,
                    *split_drops(drops, entered, left),
                    q["backlog"] * 8 / case.rate_bps * 1000, drops))
                prev_r, prev_r2, prev_t, prev_drops = cr, cr2, now, q["drops"]
                if progress:
                    x = intervals[-1]
                    print(f"\r{case.label}: t={x.t:5.1f} s PPSPP {x.ppspp_bps / 1e6:5.2f} TCP "
                          f"{x.other_bps / 1e6:5.2f} Mbit/s queue {x.queue_ms:5.1f} ms",
                          end="", file=sys.stderr, flush=True)
            if progress:
                print(file=sys.stderr)
            stop.set()
            for p in procs:
                stop_process(p)
            procs.clear()
            for _ in range(50):  # the senders stopped; wait (<= 5 s) until the queue is empty
                time.sleep(0.1)
                if _qdisc(tb, h["r"], bn.a.ifname)["backlog"] == 0:
                    break
            time.sleep(DRAIN_S)
            cr, cr2 = _counters(tb, h["r"]), _counters(tb, h["r2"])
            q = _qdisc(tb, h["r"], bn.a.ifname)
            extra.update({"qdisc_drops": q["drops"], "qdisc_packets": q["packets"],
                          # exact per-flow drops: entered minus left once the queue drained
                          "ppspp_drops": cr["ppspp"][0] - cr2["ppspp"][0],
                          "other_drops": cr["tcp"][0] - cr2["tcp"][0],
                          "ppspp_frames_in": cr["ppspp"][0], "ppspp_frames_out": cr2["ppspp"][0],
                          "tcp_frames_in": cr["tcp"][0], "tcp_frames_out": cr2["tcp"][0]})
            # losses past the bottleneck: datagrams a PPSPP socket dropped (DATA at the
            # leecher, ACKs at the seeder), and the return path's impairer's own drops
            for name in ("seed", "leech"):
                u = _udp_counters(tb, h[name])
                extra[f"{name}_udp_rcvbuf_errors"] = u.get("RcvbufErrors", 0)
                extra[f"{name}_udp_in_errors"] = u.get("InErrors", 0)
            imp = tb.unshape(bn.b)
            if imp is not None:
                extra["return_path_lost"] = sum(int(imp.get(k, 0))
                                                for k in ("lost", "overlimit", "send_errors"))
            extra.update(tx.result(timeout=30))
            extra.update(rx.result(timeout=30))
            for t in tasks:
                extra.update(t.result(timeout=30))
        finally:
            stop.set()
            for p in procs:
                stop_process(p)
    extra["netem_backend"] = Testbed.netem_backend()
    trace = tuple(dataclasses.replace(x, t=round(x.t - t0, 3))
                  for x in extra.pop("seeder_trace", ()))
    return CaseResult(case, Backend.NETNS, tuple(intervals), "TCP", case.rate_bps, extra,
                      trace)


# -- the simulator ----------------------------------------------------------------------


class ConstantRate:
    """A DatagramCore sending ``size``-byte datagrams to ``dst`` at ``rate_bps`` (frame
    bytes, ``overhead`` included) from its first timer on: the competitor that never yields."""

    def __init__(self, dst: Any, rate_bps: float, size: int, overhead: int) -> None:
        self.dst = dst
        self.size = size
        self.period = (size + overhead) * 8 / rate_bps
        self.next: float | None = None
        self.out: list[tuple[bytes, Any]] = []
        self.payload = bytes(size)

    def datagram_received(self, data: bytes, addr: Any, now: float) -> None:
        pass

    def datagrams_to_send(self, now: float) -> list[tuple[bytes, Any]]:
        out, self.out = self.out, []
        return out

    def get_timer(self, now: float) -> float | None:
        if self.next is None:
            self.next = now
        return self.next

    def handle_timer(self, now: float) -> None:
        assert self.next is not None
        while self.next <= now + 1e-12:
            self.out.append((self.payload, self.dst))
            self.next += self.period

    def next_event(self) -> object | None:
        return None


class Metered:
    """Wraps a core: counts what it sends and receives per interval; all else is the core's."""

    def __init__(self, core: Any, interval: float, overhead: int) -> None:
        self.core = core
        self.interval = interval
        self.overhead = overhead
        self.rx: dict[int, list[int]] = {}  # interval -> [frames, frame bytes]
        self.tx: dict[int, int] = {}  # interval -> frames

    def __getattr__(self, name: str) -> Any:
        return getattr(self.core, name)

    def datagram_received(self, data: bytes, addr: Any, now: float) -> None:
        slot = self.rx.setdefault(int(now / self.interval), [0, 0])
        slot[0] += 1
        slot[1] += len(data) + self.overhead
        self.core.datagram_received(data, addr, now)

    def datagrams_to_send(self, now: float) -> list[tuple[bytes, Any]]:
        out = self.core.datagrams_to_send(now)
        if out:
            k = int(now / self.interval)
            self.tx[k] = self.tx.get(k, 0) + len(out)
        return list(out)

    def close(self, now: float) -> list[tuple[bytes, Any]]:
        """The core's closing datagrams (a swift Peer's), counted like the rest."""
        out = list(self.core.close(now))
        if out:
            k = int(now / self.interval)
            self.tx[k] = self.tx.get(k, 0) + len(out)
        return out

    def get_timer(self, now: float) -> float | None:
        return self.core.get_timer(now)

    def handle_timer(self, now: float) -> None:
        self.core.handle_timer(now)

    def next_event(self) -> object | None:
        return self.core.next_event()


def sim_scenario(case: Case, size: int) -> Any:
    """The bottleneck as a simulator scenario: groups L (seeder, cbr) and R (leecher, sink)."""
    from deliverykit.sim import BottleneckSpec, LinkSpec, NodeSpec, QueueUnit, Scenario
    from deliverykit.testbed.shaping import Tbf
    from swift.sim import ETHERNET_OVERHEAD, LEECHER, SEEDER
    queue = Tbf(int(case.rate_bps), limit_pkts=case.queue_frames).limit_bytes
    bn = LinkSpec(rate=case.rate_bps, delay=case.rtt_ms / 2000, queue=queue,
                  queue_unit=QueueUnit.BYTES)
    end = case.duration_s  # the senders stop; the receivers stay DRAIN_S for the queue to empty
    nodes = (NodeSpec("seeder", SEEDER, "L", arrive=0.0, depart=end),
             NodeSpec("leecher", LEECHER, "R", arrive=case.start_of("ppspp")),
             NodeSpec("sink", "sink", "R", arrive=0.0),
             NodeSpec("cbr", "cbr", "L", arrive=case.start_of("other"), depart=end))
    return Scenario(f"tcp-share-{case.order.value}-{case.queue_frames}", nodes,
                    bottlenecks=(BottleneckSpec("bn", bn, ("L",), ("R",)),),
                    duration=end + DRAIN_S, overhead=ETHERNET_OVERHEAD,
                    params={"size": size, "content_seed": 0, "linger": None})


def run_sim(case: Case, size: int, progress: bool = False) -> CaseResult:
    """One case in the simulator: our Peer against a constant-rate UDP load."""
    from deliverykit.sim import Simulation
    from swift.sim import SwiftApp, upload_diag
    sc = sim_scenario(case, size)
    iv = case.interval_s
    cbr_bps = case.cbr_share * case.rate_bps
    cbr_payload = FRAME_BYTES - sc.overhead
    meters: dict[str, Metered] = {}
    queue_ms: dict[int, float] = {}
    queue_drops: dict[int, int] = {}

    class App(SwiftApp):
        def make_core(self, node: Any, addr: Any, sim: Any) -> Any:
            if node.role == "sink":
                self.sink_addr = addr
                core: Any = ConstantRate(None, 1.0, 1, 0)  # a core that only receives
                core.get_timer = lambda now: None
            elif node.role == "cbr":
                core = ConstantRate(self.sink_addr, cbr_bps, cbr_payload, sc.overhead)
            else:
                core = super().make_core(node, addr, sim)
            m = meters[node.name] = Metered(core, iv, sc.overhead)
            return m

        def on_stop(self, host: Any) -> None:
            if host.spec.role in ("seeder", "leecher"):
                super().on_stop(host)

        def done(self, sim: Any) -> bool:
            return False

    app = App(sc, case.peer_config(), case.peer_config())
    sim = Simulation(sc, app)
    link = next(x for x in sim.network.bottlenecks if x.name == "bn.ab")

    def sample(k: int) -> None:
        queue_ms[k] = link.queueing_delay(sim.now) * 1000
        queue_drops[k] = link.queue_drops
        if (k + 1) * iv < case.duration_s + 1e-9:
            sim.sched.at((k + 2) * iv, sample, k + 1)
        if progress:
            print(f"\r{case.label} [sim]: virtual {sim.now:5.1f} s", end="", file=sys.stderr,
                  flush=True)

    trace: list[LedbatSample] = []

    def sample_ledbat() -> None:
        m = meters.get("seeder")
        x = ledbat_sample(m.core, sim.now) if m is not None else None
        if x is not None:
            trace.append(x)
        if sim.now + TRACE_S < case.duration_s + 1e-9:
            sim.sched.at(sim.now + TRACE_S, sample_ledbat)

    sim.sched.at(iv, sample, 0)
    sim.sched.at(TRACE_S, sample_ledbat)
    stats = sim.run()
    if progress:
        print(file=sys.stderr)
    n = int(round(case.duration_s / iv))
    leech, sink, seed, cbr = (meters.get(x) for x in ("leecher", "sink", "seeder", "cbr"))

    def rx(m: Metered | None, k: int) -> list[int]:
        return m.rx.get(k, [0, 0]) if m is not None else [0, 0]

    def tx(m: Metered | None, k: int) -> int:
        return m.tx.get(k, 0) if m is not None else 0

    def drops(k: int) -> int:
        return queue_drops.get(k, 0) - queue_drops.get(k - 1, 0)

    intervals = tuple(Interval(
        round((k + 1) * iv, 6), rx(leech, k)[1] * 8 / iv, rx(sink, k)[1] * 8 / iv,
        *split_drops(drops(k), (tx(seed, k), tx(cbr, k)), (rx(leech, k)[0], rx(sink, k)[0])),
        queue_ms.get(k, 0.0), drops(k)) for k in range(n))
    extra: dict[str, Any] = {"queue_drops_total": link.queue_drops, "cpu_s": round(stats.cpu_s, 1),
                             "cbr_offered_mbps": round(cbr_bps / 1e6, 3)}
    if seed is not None:
        extra.update({f"seeder_{k}": v for k, v in upload_diag(seed.core).items()})
    # exact per-flow drops: all sent minus all received once the queue drained (the
    # per-interval figures count what entered minus what left in each interval)
    for flow, src, dst in (("ppspp", seed, leech), ("other", cbr, sink)):
        extra[f"{flow}_drops"] = (sum(src.tx.values()) - sum(v[0] for v in dst.rx.values())
                                  if src is not None and dst is not None else 0)
    return CaseResult(case, Backend.SIM, intervals, "constant-rate UDP", cbr_bps, extra,
                      tuple(trace))


# -- front end ---------------------------------------------------------------------------


def content_size(case: Case) -> int:
    """Enough content that PPSPP at full link rate does not finish within the case."""
    return int(case.rate_bps / 8 * case.duration_s * 1.3) + (1 << 20)


def run(cs: Sequence[Case], backend: Backend, libswift_bin: str | None = None,
        progress: bool = False) -> list[CaseResult]:
    out = []
    for c in cs:
        if backend is Backend.SIM:
            out.append(run_sim(c, content_size(c), progress))
        else:
            out.append(run_netns(c, content_size(c), libswift_bin, progress))
    return out


def write(out_dir: str, results: Sequence[CaseResult], params: dict[str, Any],
          started: float, load0: tuple[float, ...]) -> tuple[str, str]:
    """The per-interval CSV and the JSON metadata, each under its name only when complete."""
    from swift.experiments import output as O
    os.makedirs(out_dir, exist_ok=True)
    base = "tcp_share" + ("-sim" if results and results[0].backend is Backend.SIM else "")
    rows = [{"case": r.case.label, "backend": r.backend.value, "arm": r.case.arm.value,
             "order": r.case.order.value, "queue_frames": r.case.queue_frames,
             "t_s": x.t, "ppspp_mbps": round(x.ppspp_bps / 1e6, 4),
             "other_mbps": round(x.other_bps / 1e6, 4), "ppspp_drops": x.ppspp_drops,
             "other_drops": x.other_drops, "queue_drops": x.queue_drops,
             "queue_ms": round(x.queue_ms, 2)}
            for r in results for x in r.intervals]
    csv_path = os.path.join(out_dir, base + ".csv")
    json_path = os.path.join(out_dir, base + ".json")
    with outputs.replacing(csv_path) as tmp:
        O.write_csv(str(tmp), rows)
    trace_rows = [{"case": r.case.label, "order": r.case.order.value,
                   "queue_frames": r.case.queue_frames, "t_s": x.t,
                   "cwnd_kib": round(x.cwnd / 1024, 2), "flight_kib": round(x.flightsize / 1024, 2),
                   "base_delay_ms": round(x.base_delay * 1000, 2) if x.base_delay >= 0 else -1,
                   "queuing_delay_ms": round(x.queuing_delay * 1000, 2),
                   "srtt_ms": round(x.srtt * 1000, 2), "min_rtt_ms": round(x.min_rtt * 1000, 2),
                   "losses": x.losses, "loss_events": x.loss_events, "timeouts": x.timeouts,
                   "spurious": x.spurious,
                   "probes": x.probes,
                   "first_delay_ms": (round(x.first_delay * 1000, 2) if x.first_delay >= 0
                                      else -1)}
                  for r in results for x in r.trace]
    if trace_rows:
        with outputs.replacing(os.path.join(out_dir, base + "-ledbat.csv")) as tmp:
            O.write_csv(str(tmp), trace_rows)
    meta = O.metadata("swift.experiments.tcp_share", params, load0, started)
    meta["summary"] = [r.summary() for r in results]
    meta["lines"] = [r.line() for r in results]
    outputs.write_when_done(json_path, json.dumps(meta, indent=2, default=str) + "\n")
    return csv_path, json_path


@cliutil.cli_main("ppspp experiment tcp-share", expected=(RuntimeError,))
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="ppspp experiment tcp-share", description=(__doc__ or "").splitlines()[0],
        epilog="--backend netns needs root, nft and tc. LIBSWIFT_BIN=/path/to/swift adds the "
               "libswift arm (testbed only). Prints one summary line per case on stdout; "
               "CSV and JSON in --out.")
    ap.add_argument("--quick", action="store_true",
                    help="2 s alone + 6 s together, the ~77 ms queue only (what CI runs)")
    ap.add_argument("--backend", choices=[b.value for b in Backend], default="netns",
                    help="netns: the namespace testbed with real TCP (root); sim: the simulator "
                         "with a constant-rate UDP competitor (default: %(default)s)")
    ap.add_argument("--queue-ms", type=cliutil.positive_float, action="append", metavar="MS",
                    help="bottleneck queue in ms at the rate, in full frames (repeatable; "
                         "default 77 and 300, --quick 77)")
    ap.add_argument("--order", choices=[o.value for o in Order], action="append",
                    help="run only this order (repeatable; default both)")
    ap.add_argument("--lead-s", type=cliutil.positive_float, metavar="S",
                    help="seconds the first flow runs alone (default 5, --quick 2)")
    ap.add_argument("--overlap-s", type=cliutil.positive_float, metavar="S",
                    help="seconds both flows run (default 25, --quick 6)")
    ap.add_argument("--rate-mbps", type=cliutil.positive_float, default=10.0, metavar="MBPS",
                    help="bottleneck rate (default: %(default)s)")
    ap.add_argument("--cbr-share", type=float, default=0.9, metavar="X",
                    help="sim: the constant-rate load as a share of the link "
                         "(default: %(default)s)")
    ap.add_argument("--tcp-cc", default="cubic", metavar="NAME",
                    help="the TCP sender's congestion control (default: %(default)s; one of "
                         "/proc/sys/net/ipv4/tcp_available_congestion_control)")
    ap.add_argument("--ledbat-target-ms", type=cliutil.positive_float, metavar="MS",
                    help="our peers' LEDBAT TARGET, at most 100 (default: the peer's own)")
    ap.add_argument("--no-ours", action="store_true", help="run only the libswift arm")
    ap.add_argument("--out", default="swift-results", metavar="DIR",
                    help="directory for the CSV and JSON (default: %(default)s)")
    ap.add_argument("--progress", action="store_true",
                    help="a progress line on stderr even when it is not a terminal")
    a = ap.parse_args(argv)
    if not 0 < a.cbr_share <= 1:
        ap.error("--cbr-share must be within (0, 1]")
    backend = Backend(a.backend)
    libswift = os.environ.get("LIBSWIFT_BIN") or None
    if libswift and not (shutil.which(libswift) or os.access(libswift, os.X_OK)):
        ap.error(f"LIBSWIFT_BIN={libswift} is not an executable")
    arms = [] if a.no_ours else [Arm.OURS]
    if libswift and backend is Backend.NETNS:
        arms.append(Arm.LIBSWIFT)
    if not arms:
        ap.error("--no-ours needs LIBSWIFT_BIN and --backend netns")
    rate = a.rate_mbps * 1e6
    queues = [frames_for_ms(ms, rate) for ms in a.queue_ms] if a.queue_ms else None
    if a.ledbat_target_ms is not None and a.ledbat_target_ms > 100:
        ap.error("--ledbat-target-ms must be at most 100 (RFC 6817 3.2.2)")
    cs = cases(a.quick, arms, queues, a.lead_s, a.overlap_s, rate, a.cbr_share, a.tcp_cc,
               a.ledbat_target_ms)
    if a.order:
        cs = [c for c in cs if c.order.value in a.order]
    if backend is Backend.NETNS:
        from deliverykit.testbed import have_root
        if not have_root():
            ap.error("--backend netns needs root (network namespaces); --backend sim does not")
        for tool in ("nft", "tc"):
            if shutil.which(tool) is None:
                ap.error(f"--backend netns needs {tool}")
        try:
            with open("/proc/sys/net/ipv4/tcp_available_congestion_control") as f:
                available = f.read().split()
        except OSError:
            available = [a.tcp_cc]
        if a.tcp_cc not in available:
            ap.error(f"--tcp-cc {a.tcp_cc}: this kernel has {' '.join(available)}")
    started, load0 = time.time(), os.getloadavg()
    results = run(cs, backend, libswift, progress=a.progress or sys.stderr.isatty())
    from swift.core.ledbat import Ledbat
    params = {"backend": backend.value, "quick": a.quick, "rate_bps": rate,
              "ledbat_target_s": (a.ledbat_target_ms / 1000 if a.ledbat_target_ms is not None
                                  else Ledbat.TARGET),
              # the young-base rule (docs/ledbat.md): the class's switch as our forked peers had it
              "ledbat_young_base": Ledbat.YOUNG_BASE, "ledbat_young_s": Ledbat.YOUNG_S,
              "ledbat_young_revision": Ledbat.YOUNG_REVISION,
              "rtt_ms": cs[0].rtt_ms if cs else None, "libswift_bin": libswift,
              "cases": [{**dataclasses.asdict(c), "order": c.order.value, "arm": c.arm.value}
                        for c in cs]}
    csv_path, json_path = write(a.out, results, params, started, load0)
    for r in results:
        print(r.line())
    print(f"files: {csv_path}, {json_path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
