"""SimGrid's flow model under :mod:`vmc.sim` (split out of it; ``vmc.sim`` re-exports these
names): :func:`load_simgrid` finds the ``simgrid`` module, :class:`SimGridFlows` runs the
replay's flows on SimGrid's LV08 model as a :class:`~vmc.core.flows.FlowModel`
(docs/vmc-sim.md)."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from deliverykit.sim.scheduler import Scheduler

#: Where Debian's python3-simgrid puts its module (built for the system Python 3.11).
DEBIAN_SIMGRID = "/usr/lib/python3/dist-packages"


def load_simgrid() -> Any | None:
    """The ``simgrid`` module: installed in this Python, else Debian's python3-simgrid when it was
    built for this Python's version (only that one module is loaded from the system directory)."""
    import glob
    import importlib.machinery
    import importlib.util
    import sys

    try:
        import simgrid  # type: ignore[import-not-found]  # optional, no stubs

        return simgrid
    except ImportError:
        pass
    tag = f"cpython-{sys.version_info.major}{sys.version_info.minor}"
    for path in sorted(glob.glob(f"{DEBIAN_SIMGRID}/simgrid.{tag}-*.so")):
        loader = importlib.machinery.ExtensionFileLoader("simgrid", path)
        spec = importlib.util.spec_from_file_location("simgrid", path, loader=loader)
        if spec is None:
            continue
        module = importlib.util.module_from_spec(spec)
        try:
            loader.exec_module(module)
        except ImportError:
            continue
        sys.modules["simgrid"] = module
        return module
    return None


@dataclass(slots=True, eq=False)
class _SgFlow:
    src: str
    dst: str
    cap: float
    pending: int = 0
    size: int = 0
    comm: Any = None


class SimGridFlows:
    """The flows on SimGrid's validated flow model (LV08: max-min sharing with TCP's bandwidth and
    latency factors, fitted to packet-level TCP), as a :class:`FlowModel`.

    Each flow carries its bytes as a sequence of ``chunk``-byte communications, one at a time
    (SimGrid 3.32 cannot change a communication's size once started); the per-flow cap is the
    communication's rate (``set_rate``, on the sending side: the origin's helper actor for origin
    flows, the driver for client flows). SimGrid owns the clock: :meth:`drive` runs the replay's
    scheduler inside one SimGrid actor. One SimGrid engine per process: run each replay in its
    own process (``python -m vmc.sim --flows simgrid``).
    """

    def __init__(self, sg: Any, links: dict[str, float], chunk: int, latency: float = 1e-6) -> None:
        self.sg = sg
        self.chunk = chunk
        self.engine = sg.Engine(
            ["vmc-sim", "--log=root.thres:critical", "--log=xbt_cfg.thres:critical"]
        )
        zone = sg.NetZone.create_full_zone("vmc")
        self.hosts = {n: zone.create_host(n, 1e9) for n in ("origin", "proxy", "client")}
        for h in self.hosts.values():
            h.seal()
        made = {}
        for name, rate in links.items():
            link = zone.create_link(name, rate if rate > 0 else 1e12)
            link.set_latency(latency)
            link.seal()
            made[name] = link
        zone.add_route(
            self.hosts["origin"].netpoint,
            self.hosts["proxy"].netpoint,
            None,
            None,
            [sg.LinkInRoute(made["origin"])],
            True,
        )
        zone.add_route(
            self.hosts["proxy"].netpoint,
            self.hosts["client"].netpoint,
            None,
            None,
            [sg.LinkInRoute(made["access"])],
            True,
        )
        zone.seal()
        self.flows: dict[Hashable, _SgFlow] = {}
        self._orders: dict[str, list[tuple[str, str, int, float]]] = {"origin": [], "client": []}
        self._sems: dict[str, Any] = {}
        #: Keeps every communication and receive buffer alive until the run ends (SimGrid writes
        #: into a receive's buffer when it completes, also for a flow closed meanwhile).
        self._keep: list[Any] = []
        self._seq = 0

    # ------------------------------------------------------------------ FlowModel
    def open(self, fid: Hashable, links: Sequence[str], cap: float) -> None:
        src, dst = ("origin", "proxy") if tuple(links) == ("origin",) else ("proxy", "client")
        self.flows[fid] = _SgFlow(src, dst, cap)

    def push(self, fid: Hashable, n: int) -> None:
        f = self.flows[fid]
        f.pending += n
        if f.comm is None:
            self._start(f)

    def backlog(self, fid: Hashable) -> float:
        f = self.flows.get(fid)
        return 0.0 if f is None else float(f.pending + (f.size if f.comm is not None else 0))

    def ids(self) -> list[Hashable]:
        return list(self.flows)

    def close(self, fid: Hashable) -> None:
        self.flows.pop(fid, None)  # its communication in flight ends unobserved

    def rates(self) -> dict[Hashable, float]:
        raise NotImplementedError("SimGrid shares the rates itself: use drive()")

    def advance(self, dt: float) -> None:
        raise NotImplementedError("SimGrid keeps the clock: use drive()")

    # ------------------------------------------------------------------ communications
    def _start(self, f: _SgFlow) -> None:
        n = min(self.chunk, f.pending)
        if n <= 0:
            return
        f.pending -= n
        f.size = n
        self._seq += 1
        mb = self.sg.Mailbox.by_name(f"f{self._seq}")
        if f.src == "origin":  # the origin's helper sends (and caps); the driver receives
            self._order("origin", ("put", mb.name, n, f.cap))
            got = mb.get_async()
            self._keep.append(got)
            f.comm = got[0]
        else:  # the driver sends (and caps); the client's helper receives
            comm = mb.put_init(None, n)
            if f.cap > 0:
                comm.set_rate(f.cap)
            comm.start()
            self._keep.append(comm)
            self._order("client", ("get", mb.name, n, 0.0))
            f.comm = comm

    def _order(self, role: str, order: tuple[str, str, int, float]) -> None:
        self._orders[role].append(order)
        self._sems[role].release()

    def _helper(self, role: str) -> Any:
        def run() -> None:
            while True:
                self._sems[role].acquire()
                op, name, n, cap = self._orders[role].pop(0)
                if op == "stop":
                    return
                mb = self.sg.Mailbox.by_name(name)
                if op == "put":
                    comm = mb.put_init(None, n)
                    if cap > 0:
                        comm.set_rate(cap)
                    comm.start()
                    self._keep.append(comm)
                else:
                    self._keep.append(mb.get_async())

        return run

    def drive(self, sched: Scheduler, carried: Any, until: float) -> None:
        """Run ``sched`` (arrivals, origin heads, the machine's timer) and the flows together in
        SimGrid's time until nothing is left (or ``until``); ``carried(fid, n, empty)`` for every
        communication that completes."""
        sg = self.sg
        engine = self.engine

        def driver() -> None:
            sched.run(until=0.0)
            while engine.clock < until:
                live = [(fid, f) for fid, f in self.flows.items() if f.comm is not None]
                t_next = sched.peek()
                if not live and t_next is None:
                    break
                horizon = until if t_next is None else min(t_next, until)
                if live:
                    i = sg.Comm.wait_any_for(
                        [f.comm for _, f in live], max(0.0, horizon - engine.clock)
                    )
                else:
                    sg.this_actor.sleep_until(horizon)
                    i = -1
                sched.run(until=engine.clock)
                if i >= 0:
                    done_id, done = live[i]
                    n, done.comm, done.size = done.size, None, 0
                    # a flow closed meanwhile (a cancelled fetch) reports nothing
                    if done_id in self.flows and self.flows[done_id] == done:
                        self._start(done)
                        carried(done_id, n, done.comm is None and done.pending == 0)
            for role in ("origin", "client"):
                self._order(role, ("stop", "", 0, 0.0))

        for role in ("origin", "client"):
            self._sems[role] = sg.Semaphore(0)
            sg.Actor.create(role, self.hosts[role], self._helper(role))
        sg.Actor.create("driver", self.hosts["proxy"], driver)
        engine.run()
