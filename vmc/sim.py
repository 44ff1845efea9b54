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
from typing import Any, Protocol
from urllib.parse import parse_qs, urlsplit

from deliverykit.sim.scheduler import Scheduler
from vmc.aio.origin import LAST_MODIFIED, body_slice
from vmc.core import ranges
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

#: Bytes below this count as nothing (float progress).
EPS = 1e-6


class FlowModel(Protocol):
    """How concurrent transfers share links (the part SimGrid can replace)."""

    def open(self, fid: Hashable, links: Sequence[str], cap: float) -> None:
        """A new flow over ``links`` (in order), at most ``cap`` bytes/s (0: no cap of its own)."""

    def push(self, fid: Hashable, n: int) -> None:
        """``n`` more bytes to carry on ``fid``."""

    def backlog(self, fid: Hashable) -> float:
        """Bytes ``fid`` still has to carry."""

    def ids(self) -> list[Hashable]:
        """Every open flow."""

    def close(self, fid: Hashable) -> None:
        """Forget ``fid`` (what it still had to carry is dropped)."""

    def rates(self) -> dict[Hashable, float]:
        """The rate of every flow with bytes to carry (recomputed after any change)."""

    def advance(self, dt: float) -> None:
        """Let ``dt`` seconds pass at the current rates."""


@dataclass(slots=True)
class _Flow:
    links: tuple[str, ...]
    cap: float
    backlog: float = 0.0
    rate: float = 0.0


class MaxMinFair:
    """Max-min fair sharing (progressive filling) of link capacities, with per-flow caps.

    The classic fluid model of long-lived TCP flows sharing bottlenecks: every flow
    gets the same share of a bottleneck unless it is limited elsewhere (another
    link, or its own cap). No slow start, no RTT bias, no queueing: the
    differences this makes to the testbed are in docs/vmc-sim.md.
    """

    def __init__(self, links: dict[str, float]) -> None:
        #: Capacity in bytes/s by link name (math.inf: unlimited).
        self.links = {k: (v if v > 0 else math.inf) for k, v in links.items()}
        self.flows: dict[Hashable, _Flow] = {}
        self._dirty = True

    def open(self, fid: Hashable, links: Sequence[str], cap: float) -> None:
        self.flows[fid] = _Flow(tuple(links), cap if cap > 0 else math.inf)
        self._dirty = True

    def push(self, fid: Hashable, n: int) -> None:
        f = self.flows[fid]
        if f.backlog <= EPS:
            self._dirty = True
        f.backlog += n

    def close(self, fid: Hashable) -> None:
        if self.flows.pop(fid, None) is not None:
            self._dirty = True

    def ids(self) -> list[Hashable]:
        return list(self.flows)

    def backlog(self, fid: Hashable) -> float:
        f = self.flows.get(fid)
        return f.backlog if f is not None else 0.0

    def rates(self) -> dict[Hashable, float]:
        if self._dirty:
            self._fill()
        return {k: f.rate for k, f in self.flows.items() if f.backlog > EPS}

    def _fill(self) -> None:
        active = {k: f for k, f in self.flows.items() if f.backlog > EPS}
        for f in self.flows.values():
            f.rate = 0.0
        residual = dict(self.links)
        while active:
            users: dict[str, int] = {}
            for f in active.values():
                for link in f.links:
                    users[link] = users.get(link, 0) + 1
            share = min(
                [residual[link] / n for link, n in users.items()] + [f.cap for f in active.values()]
            )
            if math.isinf(share):
                raise ValueError("a flow crosses no finite link and has no cap")
            tight = {link for link, n in users.items() if residual[link] / n <= share * (1 + 1e-12)}
            done = [
                k
                for k, f in active.items()
                if f.cap <= share * (1 + 1e-12) or tight.intersection(f.links)
            ]
            for k in done:
                f = active.pop(k)
                f.rate = share
                for link in f.links:
                    residual[link] = max(0.0, residual[link] - share)
        self._dirty = False

    def advance(self, dt: float) -> None:
        if dt <= 0:
            return
        for f in self.flows.values():
            if f.backlog > EPS:
                f.backlog = max(0.0, f.backlog - f.rate * dt)
                if f.backlog <= EPS:
                    f.backlog = 0.0
                    self._dirty = True


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


@dataclass
class SimResult:
    """What a replay produced (JSON-able)."""

    virtual_time: float
    records: list[dict[str, Any]]
    stats: dict[str, Any]
    patches: list[tuple[str, str, int, int]]
    digests_ok: int
    events: int

    def decisions(self) -> list[tuple[str, str, bool]]:
        """Per request in arrival order: (path, mode, patched from the origin?)."""
        return [(r["path"], r["mode"], r["origin_bytes"] > 0) for r in self.records]


@dataclass(slots=True)
class _ClientState:
    path: str
    size: int
    pending: deque[bytes] = field(default_factory=deque)
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
        self.machine = SharingMachine(self.cfg.machine)
        self.clients: dict[str, _ClientState] = {}
        #: Origin fetches: id -> (path, first, end, bytes delivered so far)
        self.fetches: dict[int, list[Any]] = {}
        self.patches: list[tuple[str, str, int, int]] = []
        self._gen = 0
        self._last = 0.0
        self._timer: float | None = None
        self.inputs = 0

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
        self._reschedule()

    def _on_timer(self, t: float) -> None:
        if self._timer != t:
            return
        self._timer = None
        self._settle()
        self.machine.handle_timer(self.sched.now)
        self._drain(self.sched.now)

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
            c.pending.append(a.data)
            self.flows.push(("c", a.client), len(a.data))
        elif isinstance(a, Finish):
            c = self.clients[str(a.client)]
            c.finished = True
            if not c.pending:
                c.done_at = now
        elif isinstance(a, Abort):
            self.clients[str(a.client)].finished = True

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
        """Bring every flow to ``now``."""
        now = self.sched.now
        if now > self._last:
            self.flows.rates()
            self.flows.advance(now - self._last)
        self._last = now

    def _reschedule(self) -> None:
        self._gen += 1
        rates = self.flows.rates()
        best: float | None = None
        chunk = self.cfg.chunk
        for fid, rate in rates.items():
            left = self.flows.backlog(fid)
            if rate <= 0 or left <= EPS:
                continue
            step = max(0.0, min(left, chunk - self._unreported(fid, left)))
            t = self.sched.now + step / rate
            best = t if best is None or t < best else best
        if best is not None:
            self.sched.at(best, self._tick, self._gen)

    def _unreported(self, fid: Hashable, left: float) -> float:
        """Bytes ``fid`` carried since its last progress report."""
        assert isinstance(fid, tuple)
        kind, ident = fid
        if kind == "o":
            f = self.fetches.get(ident)
            return 0.0 if f is None else (f[2] - f[1] - left) - f[3]
        return sum(len(p) for p in self.clients[str(ident)].pending) - left

    def _tick(self, gen: int) -> None:
        if gen != self._gen:
            return
        self._settle()
        chunk = self.cfg.chunk
        for fid in sorted(self.flows.ids(), key=repr):  # stable order: same seed, same run
            assert isinstance(fid, tuple)
            kind, ident = fid
            left = self.flows.backlog(fid)
            if kind == "o":
                f = self.fetches.get(ident)
                if f is None:
                    continue
                path, first, last, sent = f
                done = int(round(last - first - left))
                if done - sent >= chunk or (left <= EPS and done > sent):
                    f[3] = done
                    self._input(
                        OriginData(
                            ident, body_slice(path.split("?")[0], first + sent, first + done)
                        )
                    )
                if left <= EPS and ident in self.fetches:
                    self.fetches.pop(ident, None)
                    self.flows.close(fid)
                    self._input(OriginEnd(ident))
            else:
                self._client_progress(str(ident), fid, left, chunk)
        self._reschedule()

    def _client_progress(self, name: str, fid: Hashable, left: float, chunk: int) -> None:
        c = self.clients[name]
        queued = sum(len(p) for p in c.pending)
        taken = int(round(queued - left))
        if taken < chunk and left > EPS:
            return
        n = taken
        while n > 0 and c.pending:
            head = c.pending[0]
            if len(head) <= n:
                c.pending.popleft()
                c.hash.update(head)
                n -= len(head)
                c.got += len(head)
            else:
                c.hash.update(head[:n])
                c.pending[0] = head[n:]
                c.got += n
                n = 0
        if c.finished and not c.pending and c.done_at is None:
            c.done_at = self.sched.now
        if taken:
            self._input(Drained(name, taken))

    # ------------------------------------------------------------------ the run
    def _arrive(self, a: Arrival) -> None:
        size = int(parse_qs(urlsplit(a.path).query).get("size", ["1048576"])[0])
        self.clients[a.client] = _ClientState(a.path, size)
        self.flows.open(("c", a.client), ("access",), self.cfg.client_rate)
        self._settle()
        self._input(Request(a.client, b"GET", f"http://{self.cfg.authority}{a.path}"))

    def run(self, until: float = 3600.0) -> SimResult:
        """Replay every arrival (at most ``until`` virtual seconds); ``virtual_time``: the last
        byte delivered to a client."""
        for a in self.arrivals:
            self.sched.at(a.at, self._arrive, a)
        self.sched.run(until=until, max_events=10_000_000)
        end = max((c.done_at or 0.0 for c in self.clients.values()), default=0.0)
        ok = 0
        for c in self.clients.values():
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
        )
