"""VMC in simulated time: the sharing core replayed, HTTP transfers as flows (issue 19 item 3).

The proxy's decisions are those of :class:`vmc.core.machine.SharingMachine`,
which asks the same :class:`vmc.core.sharing.Sharing` and
:func:`vmc.core.sharing.next_step` as the asyncio proxy. This module replaces
the sockets: every origin response and every proxy-to-client stream is a *flow*
that shares links with max-min fairness (:class:`MaxMinFair`), each flow capped
at its own rate (the origin's per-connection pacing, like nginx's
``limit_rate``). Events run on :class:`deliverykit.sim.scheduler.Scheduler`
(deterministic: same seed, same run).

The flow model sits behind :class:`FlowModel` (open, push, close, rates,
advance) so a validated flow-level simulator (SimGrid, docs/vmc-sim.md) can
replace it: nothing else here knows how rates are shared.

Links: ``origin`` (the origin's access link: every origin response crosses it)
and ``access`` (the proxy's link to its clients: every client stream crosses
it). Progress is reported in ``chunk``-byte steps: an origin step is an
:class:`~vmc.core.machine.OriginData` input, a client step a
:class:`~vmc.core.machine.Drained` input (the client's transport took it).
"""

from __future__ import annotations

import hashlib
import math
import random
from collections import deque
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

from deliverykit.cliutil import cli_main
from deliverykit.sim.scheduler import Scheduler
from vmc.aio.origin import LAST_MODIFIED, body_slice
from vmc.core import ranges
from vmc.core.flows import EPS, FlowModel, MaxMinFair
from vmc.core.machine import (
    Abort,
    CancelFetch,
    Drained,
    Fetch,
    Finish,
    Finished,
    Input,
    MachineConfig,
    OriginData,
    OriginEnd,
    OriginHead,
    Patched,
    Request,
    Respond,
    Send,
    SharingMachine,
)
from vmc.sim_simgrid import SimGridFlows, load_simgrid


@dataclass(frozen=True, slots=True)
class Arrival:
    """One request of the workload."""

    at: float
    """Seconds from the start."""
    client: str
    """Client name (one request each)."""
    path: str
    """Origin path with ``?size=N`` (the body is :func:`vmc.aio.origin.body_slice` of it)."""


def staggered(
    objects: int = 5,
    per_object: int = 6,
    size: int = 1 << 20,
    stagger: float = 0.45,
    offsets: Sequence[float] = (0.0, 0.3, 0.6, 1.6, 1.9, 2.2),
    jitter: float = 0.05,
    seed: int = 0,
) -> list[Arrival]:
    """``objects`` x ``per_object`` requests: object k's requests at ``k * stagger + offsets[i]``,
    each moved by a uniform draw in ``[-jitter, jitter]`` (``seed``), in time order."""
    rng = random.Random(seed)
    out = []
    for k in range(objects):
        for i in range(per_object):
            t = max(0.0, k * stagger + offsets[i % len(offsets)] + rng.uniform(-jitter, jitter))
            out.append(Arrival(round(t, 6), f"c{k}-{i}", f"/obj{k}?size={size}"))
    return sorted(out, key=lambda a: (a.at, a.client))


@dataclass(frozen=True)
class SimConfig:
    """The network of one replay (bytes/s; 0 = unlimited) and the proxy's settings."""

    origin_rate: float = 1 << 20
    """Each origin response's own pace (nginx ``limit_rate``; the test origin's ``rate``)."""
    origin_link: float = 0.0
    """The origin's access link, shared by every origin response."""
    access_link: float = 1 << 30
    """The proxy's link to its clients, shared by every client stream."""
    client_rate: float = 0.0
    """Each client's own downlink."""
    rtt: float = 0.001
    """Request to response head."""
    chunk: int = 16 << 10
    """Progress step (origin reads, client drains)."""
    authority: str = "origin:80"
    """Origin host:port in the URIs."""
    machine: MachineConfig = field(default_factory=MachineConfig)
    """The proxy's settings."""
    counting: bool = False
    """Counting mode (paper scale): bodies are zero bytes of the right length, the disk store
    keeps lengths only and clients count what they receive instead of hashing it. The machine
    decides on lengths and positions only, so its decisions and byte counts are those of the byte
    mode (``test_counting_mode_makes_the_byte_modes_decisions``); what is lost is the check that
    every client got the right bytes (``digests_ok`` then counts complete lengths)."""


class CountingDisk:
    """The simulator's disk store in counting mode: a :class:`vmc.core.machine.MemoryDisk` that
    keeps each copy's length written, not its bytes (reads give zero bytes)."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.reserved = 0

    def open(self, length: int) -> CountingCopy | None:
        if length <= 0 or self.reserved + length > self.budget:
            return None
        self.reserved += length
        return CountingCopy(self, length)

    def finished(self, copy: Any) -> None:
        """Nothing to do: a whole copy stays until closed (as in ``MemoryDisk``)."""

    def touch(self, copy: Any) -> None:
        """Nothing to do (no eviction order)."""


@dataclass(eq=False)
class CountingCopy:
    """One object's body in a :class:`CountingDisk`: how many bytes were written from 0."""

    store: CountingDisk
    length: int
    written: int = 0
    closed: bool = False

    @property
    def complete(self) -> bool:
        return not self.closed and self.written == self.length

    def holds(self, first: int) -> bool:
        return not self.closed and 0 <= first < self.written

    def write(self, offset: int, chunk: bytes) -> bool:
        if self.closed or offset != self.written:
            return False
        self.written += len(chunk)
        return True

    def read(self, first: int, end: int) -> bytes:
        return bytes(max(0, min(end, self.written) - first))

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.store.reserved -= self.length


@dataclass
class SimResult:
    """What a replay produced (JSON-able)."""

    virtual_time: float
    records: list[dict[str, Any]]
    stats: dict[str, Any]
    patches: list[tuple[str, str, int, int]]
    digests_ok: int
    events: int
    complete: bool = True
    """False when the run stopped at its event or time bound with events left (then some requests
    are missing or unfinished: never to be reported as a whole run)."""
    clock_steps: int = 0
    """Float residues of bytes carried by moving the clock one representable step: each was a
    point where the replay before eea5e9d stopped advancing (the event storm; docs/vmc-sim.md)."""

    def decisions(self) -> list[tuple[str, str, bool]]:
        """Per request in arrival order: (path, mode, patched from the origin?)."""
        return [(r["path"], r["mode"], r["origin_bytes"] > 0) for r in self.records]


@dataclass(slots=True)
class _ClientState:
    path: str
    size: int
    pending: deque[bytes] = field(default_factory=deque)
    queued: int = 0
    """Bytes sent to the client and not yet carried (the sum of ``pending``; counting mode keeps
    this alone)."""
    hash: Any = field(default_factory=hashlib.sha256)
    got: int = 0
    status: int = 0
    finished: bool = False
    done_at: float | None = None


class VmcSim:
    """Replay ``arrivals`` through a :class:`SharingMachine` over a :class:`FlowModel`."""

    def __init__(
        self,
        arrivals: Sequence[Arrival],
        cfg: SimConfig | None = None,
        seed: int = 0,
        flows: FlowModel | None = None,
    ) -> None:
        self.cfg = cfg or SimConfig()
        self.arrivals = list(arrivals)
        self.sched = Scheduler(seed)
        self.flows = flows or MaxMinFair(
            {"origin": self.cfg.origin_link, "access": self.cfg.access_link}
        )
        self.fluid = isinstance(self.flows, MaxMinFair)
        self.counting = self.cfg.counting
        disk = CountingDisk(self.cfg.machine.disk_budget) if self.counting else None
        self.machine = SharingMachine(self.cfg.machine, disk=disk)
        # every request's record (the status log's ring keeps 2,000; a replay reports all)
        self.machine.stats.keep = max(self.machine.stats.keep, len(self.arrivals))
        self.clients: dict[str, _ClientState] = {}
        #: Origin fetches: id -> (path, first, end, bytes delivered so far)
        self.fetches: dict[int, list[Any]] = {}
        self.patches: list[tuple[str, str, int, int]] = []
        self._gen = 0
        #: When the live tick (generation ``_gen``) runs, or None.
        self._next: float | None = None
        self._last = 0.0
        self._timer: float | None = None
        self.inputs = 0
        #: Residues carried by moving the clock one representable step (see ``_reschedule``).
        self.clock_steps = 0

    # ------------------------------------------------------------------ driving the machine
    def _input(self, inp: Input) -> None:
        now = self.sched.now
        self.inputs += 1
        self.machine.input_received(inp, now)
        self._drain(now)

    def _drain(self, now: float) -> None:
        for _ in range(10_000):
            actions = self.machine.actions_to_send(now)
            if not actions:
                break
            for a in actions:
                self._act(a, now)
        while (ev := self.machine.next_event()) is not None:
            if isinstance(ev, Patched):
                self.patches.append(
                    (str(ev.client), self.clients[str(ev.client)].path, ev.first, ev.end)
                )
            elif isinstance(ev, Finished) and ev.error:
                self.clients[str(ev.client)].finished = True
        t = self.machine.get_timer(now)
        if t is not None and t != self._timer:
            self._timer = t
            self.sched.at(t, self._on_timer, t)

    def _on_timer(self, t: float) -> None:
        if self._timer != t:
            return
        self._timer = None
        self._settle()
        self.machine.handle_timer(self.sched.now)
        self._drain(self.sched.now)
        self._reschedule()

    def _act(self, a: Any, now: float) -> None:
        self._settle()
        if isinstance(a, Fetch):
            path = a.uri.split("://", 1)[1]
            path = "/" + path.split("/", 1)[1] if "/" in path else "/"
            self.sched.after(self.cfg.rtt, self._origin_head, a.fetch, path, a.first, a.end)
        elif isinstance(a, CancelFetch):
            self.fetches.pop(a.fetch, None)
            self.flows.close(("o", a.fetch))
        elif isinstance(a, Respond):
            self.clients[str(a.client)].status = a.status
        elif isinstance(a, Send):
            c = self.clients[str(a.client)]
            if not self.counting:
                c.pending.append(a.data)
            c.queued += len(a.data)
            self.flows.push(("c", a.client), len(a.data))
        elif isinstance(a, Finish):
            c = self.clients[str(a.client)]
            c.finished = True
            if not c.queued:
                c.done_at = now
                self.flows.close(("c", a.client))  # done: the flow leaves the model
        elif isinstance(a, Abort):
            self.clients[str(a.client)].finished = True
            self.flows.close(("c", a.client))

    # ------------------------------------------------------------------ the origin
    def _origin_head(self, fid: int, path: str, first: int, end: int | None) -> None:
        q = parse_qs(urlsplit(path).query)
        size = int(q.get("size", ["1048576"])[0])
        last = size if end is None else min(end, size)
        etag = b'"' + hashlib.md5(f"{path}:{size}".encode()).hexdigest()[:16].encode() + b'"'
        hdrs = [(b"etag", etag), (b"last-modified", LAST_MODIFIED), (b"accept-ranges", b"bytes")]
        ranged = first > 0 or end is not None
        status = 206 if ranged else 200
        if ranged:
            hdrs.append(
                (b"content-range", ranges.format_content_range(first, last - 1, size).encode())
            )
        hdrs.append((b"content-length", str(last - first).encode()))
        self.fetches[fid] = [path, first, last, 0]
        self.flows.open(("o", fid), ("origin",), self.cfg.origin_rate)
        self._settle()
        self._input(OriginHead(fid, status, tuple(hdrs)))
        if fid in self.fetches:
            self.flows.push(("o", fid), last - first)
        self._reschedule()

    # ------------------------------------------------------------------ flows in time
    def _settle(self) -> None:
        """Bring every flow to ``now`` (the fluid model; SimGrid keeps its own time)."""
        if not self.fluid:
            return
        now = self.sched.now
        if now > self._last:
            self.flows.rates()
            self.flows.advance(now - self._last)
        self._last = now

    def _reschedule(self) -> None:
        """Schedule the next progress report (once per scheduler event, after its inputs: the
        earliest time a flow has carried ``chunk`` bytes since its last report, or drained)."""
        if not self.fluid:
            return
        rates = self.flows.rates()
        best: float | None = None
        residue = False
        now = self.sched.now
        chunk = self.cfg.chunk
        for fid, rate in rates.items():
            left = self.flows.backlog(fid)
            if rate <= 0 or left <= EPS:
                continue
            step = chunk - self._unreported(fid, left)
            if left < step:
                step = left
            t = now + (step / rate if step > 0 else 0.0)
            if best is None or t < best:
                best, residue = t, step == left
        if best is not None:
            if best <= now:
                # A step shorter than the clock's resolution at ``now`` (a float residue of bytes
                # on a fast flow late in a replay) rounds to ``now``: a tick there carries
                # nothing and sets the same tick again, forever (the event storm of issue 19).
                # The clock moves by one representable step instead, which carries the residue.
                best = math.nextafter(now, math.inf)
                self.clock_steps += residue
            if best != self._next:  # the tick already set for ``best`` stays valid
                self._gen += 1
                self._next = best
                self.sched.at(best, self._tick, self._gen)
        elif self._next is not None:
            self._gen += 1  # nothing left to carry: the tick set earlier is void
            self._next = None

    def _unreported(self, fid: Hashable, left: float) -> float:
        """Bytes ``fid`` carried since its last progress report."""
        assert isinstance(fid, tuple)
        kind, ident = fid
        if kind == "o":
            f = self.fetches.get(ident)
            return 0.0 if f is None else (f[2] - f[1] - left) - f[3]
        return self.clients[str(ident)].queued - left

    def _tick(self, gen: int) -> None:
        if gen != self._gen:
            return
        self._next = None
        self._settle()
        chunk = self.cfg.chunk
        for fid in sorted(self.flows.ids(), key=repr):  # stable order: same seed, same run
            left = self.flows.backlog(fid)
            carried = int(round(self._unreported(fid, left)))
            if (
                carried >= chunk
                or (left <= EPS and carried > 0)
                or (left <= EPS and isinstance(fid, tuple) and fid[0] == "o")
            ):
                self.carried(fid, carried, left <= EPS)
        self._reschedule()

    def carried(self, fid: Hashable, n: int, empty: bool) -> None:
        """Flow ``fid`` carried ``n`` more bytes (``empty``: it has nothing left to carry)."""
        assert isinstance(fid, tuple)
        kind, ident = fid
        if kind == "o":
            f = self.fetches.get(ident)
            if f is None:
                return
            path, first, last, sent = f
            if n > 0:
                f[3] = sent + n
                data = (
                    bytes(n)
                    if self.counting
                    else body_slice(path.split("?")[0], first + sent, first + sent + n)
                )
                self._input(OriginData(ident, data))
            if empty and f[3] >= last - first and ident in self.fetches:
                self.fetches.pop(ident, None)
                self.flows.close(fid)
                self._input(OriginEnd(ident))
            return
        name = str(ident)
        c = self.clients[name]
        left = 0 if self.counting else n
        c.queued -= n
        if self.counting:
            c.got += n
        while left > 0 and c.pending:
            head = c.pending[0]
            if len(head) <= left:
                c.pending.popleft()
                c.hash.update(head)
                left -= len(head)
                c.got += len(head)
            else:
                c.hash.update(head[:left])
                c.pending[0] = head[left:]
                c.got += left
                left = 0
        if c.finished and not c.queued and c.done_at is None:
            c.done_at = self.sched.now
            self.flows.close(fid)
        if n:
            self._input(Drained(name, n))

    # ------------------------------------------------------------------ the run
    def _arrive(self, a: Arrival) -> None:
        size = int(parse_qs(urlsplit(a.path).query).get("size", ["1048576"])[0])
        self.clients[a.client] = _ClientState(a.path, size)
        self.flows.open(("c", a.client), ("access",), self.cfg.client_rate)
        self._settle()
        self._input(Request(a.client, b"GET", f"http://{self.cfg.authority}{a.path}"))
        self._reschedule()

    def run(self, until: float = 3600.0, max_events: int = 10_000_000) -> SimResult:
        """Replay every arrival (at most ``until`` virtual seconds and ``max_events`` events);
        ``virtual_time``: the last byte delivered to a client; ``complete``: nothing was left."""
        for a in self.arrivals:
            self.sched.at(a.at, self._arrive, a)
        if isinstance(self.flows, SimGridFlows):
            self.flows.drive(self.sched, self.carried, until)
        else:
            self.sched.run(until=until, max_events=max_events)
        end = max((c.done_at or 0.0 for c in self.clients.values()), default=0.0)
        ok = 0
        for c in self.clients.values():
            if self.counting:
                ok += int(c.got == c.size)
                continue
            want = hashlib.sha256(body_slice(c.path.split("?")[0], 0, c.size)).digest()
            ok += int(c.got == c.size and c.hash.digest() == want)
        snap = self.machine.stats.snapshot(recent=self.machine.stats.keep)
        records = [
            {
                "id": r["id"],
                "path": "/" + r["uri"].split("://", 1)[1].split("/", 1)[1],
                "mode": r["mode"],
                "offset": r["offset"],
                "origin_bytes": r["origin_bytes"],
                "client_bytes": r["client_bytes"],
                "completion": r["completion"],
                "detached": r["detached"],
            }
            for r in snap["recent"]
        ]
        return SimResult(
            end,
            records,
            {k: v for k, v in snap.items() if k != "recent"},
            self.patches,
            ok,
            self.sched.executed,
            self.sched.peek() is None,
            self.clock_steps,
        )


# ---------------------------------------------------------------------- SimGrid: sim_simgrid.py
# ---------------------------------------------------------------------- a Squid log, Normal vs VMC
def log_arrivals(entries: Sequence[Any], speed: float = 1.0) -> list[Arrival]:
    """Arrivals of Squid log entries (:class:`vmc.workload.squid.LogEntry`) at their logged start
    times, compressed by ``speed``, bodies named as the loopback replay names them."""
    if not entries:
        return []
    t0 = min(e.start for e in entries)
    return [
        Arrival((e.start - t0) / speed, f"r{i}", e.object_path()) for i, e in enumerate(entries)
    ]


@dataclass
class Arm:
    """One arm (Normal or VMC) of a log replay, over all its batches."""

    origin_bytes: int = 0
    elapsed: float = 0.0
    """The paper's latency: the elapsed time of the whole workload (the batches' sum: the paper ran
    its 5,000-file batches one after another)."""
    joins: int = 0
    right_bodies: int = 0
    latencies: list[float] = field(default_factory=list)
    """Per request, in arrival order: its completion time (s)."""
    origin_per_request: list[int] = field(default_factory=list)
    """Per request, in arrival order: the origin bytes it caused (a shared stream's, to the request
    that started it)."""
    incomplete: int = 0
    """Batches cut by the event bound (their figures are partial: reported, never hidden)."""
    clock_steps: int = 0
    """:attr:`SimResult.clock_steps` over the batches."""

    @property
    def latency_sum(self) -> float:
        """Our per-request measure: the sum of completion times."""
        return sum(self.latencies)

    def add(self, r: SimResult) -> None:
        self.incomplete += int(not r.complete)
        self.clock_steps += r.clock_steps
        self.origin_bytes += int(r.stats["origin_bytes"])
        self.elapsed += r.virtual_time
        self.joins += int(r.stats["joins"])
        self.right_bodies += r.digests_ok
        self.latencies += [float(x["completion"] or 0.0) for x in r.records]
        # a shared stream's bytes are charged to the request that started it (its record counts
        # its own patches and pass-through bytes only)
        self.origin_per_request += [
            int(x["client_bytes"] if x["mode"] == "origin" else x["origin_bytes"])
            for x in r.records
        ]


def replay_arm(
    arrivals: Sequence[Arrival],
    sharing: bool,
    link_rate: float,
    window: int = 8 << 20,
    seed: int = 0,
    batch: int = 0,
    counting: bool = False,
    max_events: int = 100_000_000,
) -> Arm:
    """Replay ``arrivals`` with sharing on or off, the origin's link shared max-min at
    ``link_rate``, in batches of ``batch`` requests (0: one run) each starting afresh at its
    first arrival (the paper's 5,000-file runs)."""
    arm = Arm()
    size = batch if batch > 0 else max(1, len(arrivals))
    for i in range(0, len(arrivals), size):
        part = list(arrivals[i : i + size])
        t0 = part[0].at
        part = [Arrival(a.at - t0, a.client, a.path) for a in part]
        cfg = SimConfig(
            origin_rate=0.0,
            origin_link=link_rate,
            counting=counting,
            machine=MachineConfig(window=window, disk_budget=0, sharing=sharing),
        )
        arm.add(VmcSim(part, cfg, seed=seed).run(until=1e9, max_events=max_events))
    return arm


def saving(a: float, b: float) -> float:
    """Percent of ``a`` that ``b`` saves."""
    return 100.0 * (1 - b / a) if a else 0.0


def compare_log(
    entries: Sequence[Any],
    speed: float = 1.0,
    link_rate: float = 4e6,
    window: int = 8 << 20,
    seed: int = 0,
    batch: int = 0,
    counting: bool = False,
    latencies: bool = False,
) -> dict[str, Any]:
    """``vmc replay LOG --backend sim``: Normal (no sharing) vs VMC (sharing, no disk store: the
    paper's router, as the loopback replay runs it) in simulated time, the origin's link shared at
    ``link_rate`` bytes/s. Clients are plain (the proxy patches a joiner's prefix itself), where
    the loopback replay's are VMC-aware (they fetch it by Range): the same bytes from the origin.
    Latency both ways: the sum of per-request completion times, and the elapsed time of the whole
    workload (the paper's measure). ``batch``: requests per run (the paper's 5,000; 0: one run);
    ``counting``: counting mode (:attr:`SimConfig.counting`); ``latencies``: also the per-request
    completion times and origin bytes of both arms (the figures)."""
    import time

    arrivals = log_arrivals(entries, speed)
    cpu = time.process_time()
    n = replay_arm(arrivals, False, link_rate, window, seed, batch, counting)
    v = replay_arm(arrivals, True, link_rate, window, seed, batch, counting)
    cpu = time.process_time() - cpu
    out: dict[str, Any] = {
        "backend": "sim (max-min fair flows)" + (", counting" if counting else ""),
        "requests": len(arrivals),
        "batch": batch or len(arrivals),
        "normal_MB": n.origin_bytes / 1e6,
        "vmc_MB": v.origin_bytes / 1e6,
        "bandwidth_saving_%": saving(n.origin_bytes, v.origin_bytes),
        "latency_sum_normal_s": n.latency_sum,
        "latency_sum_vmc_s": v.latency_sum,
        "latency_saving_%": saving(n.latency_sum, v.latency_sum),
        "elapsed_normal_s": n.elapsed,
        "elapsed_vmc_s": v.elapsed,
        "elapsed_saving_%": saving(n.elapsed, v.elapsed),
        "joins": v.joins,
        "right_bodies": min(n.right_bodies, v.right_bodies),
        "incomplete_batches": n.incomplete + v.incomplete,
        "clock_steps": n.clock_steps + v.clock_steps,
        "cpu_s": round(cpu, 3),
    }
    if latencies:
        out["normal_latencies"] = n.latencies
        out["vmc_latencies"] = v.latencies
        out["normal_origin"] = n.origin_per_request
        out["vmc_origin"] = v.origin_per_request
    return out


# ---------------------------------------------------------------------- command line
@cli_main("vmc.sim")
def main(argv: Sequence[str] | None = None) -> int:
    """``python -m vmc.sim``: replay a staggered workload; the result as JSON on stdout."""
    import argparse
    import json
    import sys
    from dataclasses import asdict

    ap = argparse.ArgumentParser(prog="python -m vmc.sim", description=main.__doc__)
    ap.add_argument(
        "--flows",
        choices=("maxmin", "simgrid"),
        default="maxmin",
        help="flow model: ours (max-min fair) or SimGrid's LV08 (Debian python3-simgrid)",
    )
    ap.add_argument("--objects", type=int, default=5)
    ap.add_argument("--per-object", type=int, default=6)
    ap.add_argument("--size", type=int, default=1 << 20, help="bytes per object")
    ap.add_argument(
        "--origin-rate", type=float, default=1 << 20, help="bytes/s per origin response"
    )
    ap.add_argument("--window", type=int, default=64 << 10)
    ap.add_argument("--disk-budget", type=int, default=1 << 30)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if min(args.objects, args.per_object, args.size) <= 0 or args.origin_rate <= 0:
        print(
            "vmc.sim: --objects, --per-object, --size and --origin-rate must be > 0",
            file=sys.stderr,
        )
        return 2
    cfg = SimConfig(
        origin_rate=args.origin_rate,
        machine=MachineConfig(window=args.window, disk_budget=args.disk_budget),
    )
    flows: FlowModel | None = None
    if args.flows == "simgrid":
        sg = load_simgrid()
        if sg is None:
            print("vmc.sim: SimGrid not found (Debian package python3-simgrid)", file=sys.stderr)
            return 2
        flows = SimGridFlows(sg, {"origin": cfg.origin_link, "access": cfg.access_link}, cfg.chunk)
    arrivals = staggered(args.objects, args.per_object, args.size, seed=args.seed)
    result = VmcSim(arrivals, cfg, seed=args.seed, flows=flows).run()
    print(json.dumps(asdict(result), default=str))
    print(
        f"vmc.sim ({args.flows}): {len(arrivals)} requests, {result.virtual_time:.3f} virtual s, "
        f"origin {result.stats['origin_bytes']} B, {result.digests_ok} right bodies",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
