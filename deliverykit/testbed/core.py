"""Testbed: hosts (network namespaces), veth links, bridges, routes, shaping, execution.

Everything lives inside namespaces named ``<run_id>-<host>`` with
``run_id = <prefix>-<pid>-<4 hex>``: nothing is created in the root namespace,
so parallel runs cannot clash, and deleting a run's namespaces deletes every
veth and bridge it made. See docs/testbed.md for the API and a multicast recipe.
"""

from __future__ import annotations

import asyncio
import atexit
import ipaddress
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import threading
import time
import warnings
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from deliverykit.cliutil import stop_signals_held

from . import shaping
from .capture import Capture
from .errors import TestbedError, TestbedNeedsRoot, TestbedTimeout
from .lifecycle import NETNS_DIR, PREFIX, have_root, remove_netns, stop_process
from .netlink import IPRouteProxy, NetlinkWorker
from .nsexec import Event, Task, ethtool_features, spawn_in_netns, write_sysctls
from .objects import Bridge, End, Host, Link
from .shaping import Netem, Tbf

_HOST_NAME = re.compile(r"^[a-z0-9_]{1,11}$")
_IFNAME = re.compile(r"^[A-Za-z0-9_.-]{1,15}$")

_LIVE: weakref.WeakSet[Testbed] = weakref.WeakSet()


Dev = End | str


class Testbed:
    """A set of namespaces with links between them, all removed by ``close()``.

    Use as a context manager; cleanup also runs at interpreter exit and, while
    inside ``with`` in the main thread, SIGTERM raises ``SystemExit(143)`` so
    the block unwinds. Raises ``TestbedError`` when not root.
    """

    __test__ = False  # not a pytest test class

    def __init__(self, prefix: str = "dk") -> None:
        if not have_root():
            raise TestbedNeedsRoot(
                "needs root: network namespaces, veth links and tc need CAP_SYS_ADMIN/CAP_NET_ADMIN"
                " (run the command as root, e.g. with sudo)"
            )
        if not PREFIX.match(prefix or ""):
            raise TestbedError(f"bad prefix {prefix!r}: [a-z][a-z0-9]{{0,7}}")
        if shutil.which("ip") is None:
            raise TestbedError("the testbed needs `ip` (Debian package iproute2)")
        self.prefix = prefix
        self.run_id = f"{prefix}-{os.getpid()}-{secrets.token_hex(2)}"
        self._owner = os.getpid()
        self._hosts: dict[str, Host] = {}
        self._ns_made: list[str] = []
        self._nl = NetlinkWorker()  # pyroute2 is imported (~0.5 s) only when a host is made
        self._ipr: dict[str, IPRouteProxy] = {}
        self._ifnames: dict[str, set[str]] = {}
        self._tasks: list[Task] = []
        self._procs: list[subprocess.Popen[Any]] = []
        self._captures: list[Capture] = []
        self._events: list[Event] = []
        self._impairers: dict[tuple[str, str], tuple[subprocess.Popen[str], str]] = {}
        self._closed = False
        self._closing = False
        self._old_sigterm: Any = None
        _LIVE.add(self)

    # -- lifecycle -----------------------------------------------------------------

    def __enter__(self) -> Testbed:
        if threading.current_thread() is threading.main_thread():
            if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
                global _SIGTERM_OWNER
                _SIGTERM_OWNER = os.getpid()
                self._old_sigterm = signal.signal(signal.SIGTERM, _sigterm_to_exit)
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            self.close()
        except TestbedError as err:
            if exc_type is None:
                raise
            # do not hide the exception that ended the block behind a cleanup problem
            warnings.warn(f"{err} (while handling {exc_type.__name__})", RuntimeWarning,
                          stacklevel=2)
        finally:
            if self._old_sigterm is not None and os.getpid() == self._owner:
                signal.signal(signal.SIGTERM, self._old_sigterm)
                self._old_sigterm = None

    def close(self) -> None:
        """Stop captures, kill tasks and processes, delete every namespace. Idempotent.

        Interrupted (a second Ctrl-C), it can be called again and finishes the
        job; the atexit hook does that.
        """
        if self._closed or self._closing or os.getpid() != self._owner:
            return
        self._closing = True
        errors: list[str] = []
        try:
            while self._captures:
                try:
                    self._captures.pop().stop(timeout=5)
                except Exception as exc:  # noqa: BLE001 - keep cleaning
                    errors.append(f"capture: {exc}")
            while self._tasks:
                self._tasks.pop().kill()
            while self._impairers:
                proc, _ = self._impairers.popitem()[1]
                try:
                    shaping.stop_impairer(proc, timeout=3)
                except Exception as exc:  # noqa: BLE001
                    errors.append(f"impairer: {exc}")
            while self._procs:
                stop_process(self._procs.pop())
            while self._events:
                self._events.pop().close()
            while self._ipr:
                try:
                    self._ipr.popitem()[1].close()
                except Exception:  # noqa: BLE001 - at interpreter exit the worker is gone
                    pass
            self._nl.shutdown()
            while self._ns_made:
                ns = self._ns_made[-1]
                try:
                    remove_netns(ns)
                except OSError as exc:
                    errors.append(f"netns {ns}: {exc}")
                self._ns_made.pop()
            self._closed = True
            _LIVE.discard(self)
        finally:
            self._closing = False
        if errors:
            raise TestbedError("cleanup incomplete: " + "; ".join(errors))

    def _check_open(self) -> None:
        if self._closed:
            raise TestbedError(f"testbed {self.run_id} is closed")

    # -- topology --------------------------------------------------------------------

    @property
    def hosts(self) -> dict[str, Host]:
        return dict(self._hosts)

    def host(self, name: str, forwarding: bool = False) -> Host:
        """A new namespace with ``lo`` up; ``forwarding`` turns on IPv4 and IPv6 forwarding."""
        self._check_open()
        if not _HOST_NAME.match(name):
            raise TestbedError(f"bad host name {name!r}: [a-z0-9_]{{1,11}}")
        if name in self._hosts:
            raise TestbedError(f"host {name!r} exists already in this testbed")
        ns = f"{self.run_id}-{name}"
        self._ns_made.append(ns)
        self._nl.create_netns(ns)
        host = Host(name, ns)
        self._hosts[name] = host
        self._ifnames[ns] = {"lo"}
        ipr = self._ipr[ns] = self._nl.iproute(ns)
        ipr.link("set", index=ipr.link_lookup(ifname="lo")[0], state="up")
        settings = {
            "net.ipv6.conf.all.accept_dad": "0",
            "net.ipv6.conf.default.accept_dad": "0",
            "net.ipv4.conf.all.rp_filter": "0",
            "net.ipv4.conf.default.rp_filter": "0",
        }
        if forwarding:
            settings["net.ipv4.ip_forward"] = "1"
            settings["net.ipv6.conf.all.forwarding"] = "1"
        self.sysctl(host, settings)
        return host

    def _own(self, host: Host) -> Host:
        if self._hosts.get(host.name) != host:
            raise TestbedError(f"{host!r} does not belong to testbed {self.run_id}")
        return host

    def _ifname(self, host: Host, wanted: str | None, stem: str) -> str:
        used = self._ifnames[host.ns]
        if wanted is not None:
            if not _IFNAME.match(wanted) or wanted in used:
                raise TestbedError(f"interface name {wanted!r} is invalid or taken in {host.name}")
            name = wanted
        else:
            name, n = stem[:15], 0
            while name in used:  # to-r, to-r1, to-r2, ... within IFNAMSIZ (15 characters)
                n += 1
                name = f"{stem[:15 - len(str(n))]}{n}"
        used.add(name)
        return name

    def _index(self, host: Host, dev: Dev) -> int:
        ifname = dev.ifname if isinstance(dev, End) else dev
        found = self._ipr[host.ns].link_lookup(ifname=ifname)
        if not found:
            raise TestbedError(f"no interface {ifname!r} in host {host.name}")
        return found[0]

    def _veth(self, h1: Host, n1: str, h2: Host, n2: str, mtu: int | None) -> None:
        ipr1 = self._ipr[h1.ns]
        peer: dict[str, Any] = {"ifname": n2}
        fd = None
        if h2.ns != h1.ns:
            fd = os.open(os.path.join(NETNS_DIR, h2.ns), os.O_RDONLY)
            peer["net_ns_fd"] = fd
        try:
            ipr1.link("add", ifname=n1, kind="veth", peer=peer)
        finally:
            if fd is not None:
                os.close(fd)
        for host, name in ((h1, n1), (h2, n2)):
            extra = {"mtu": mtu} if mtu else {}
            self._ipr[host.ns].link("set", index=self._index(host, name), state="up", **extra)

    def address(self, host: Host, dev: Dev, addr: str) -> None:
        """Add ``addr`` (IPv4 or IPv6 CIDR, e.g. "10.0.1.1/24") to ``dev`` in ``host``."""
        iface = ipaddress.ip_interface(addr)
        self._ipr[host.ns].addr("add", index=self._index(host, dev), address=str(iface.ip),
                                prefixlen=iface.network.prefixlen)

    def link(self, h1: Host, h2: Host, addr1: str | None = None, addr2: str | None = None, *,
             ifname_a: str | None = None, ifname_b: str | None = None,
             mtu: int | None = None) -> Link:
        """A veth pair between two hosts, both ends up, with optional addresses."""
        self._check_open()
        self._own(h1), self._own(h2)
        if h1 == h2:
            raise TestbedError("a link needs two different hosts")
        n1 = self._ifname(h1, ifname_a, f"to-{h2.name}")
        n2 = self._ifname(h2, ifname_b, f"to-{h1.name}")
        self._veth(h1, n1, h2, n2, mtu)
        for host, name, addr in ((h1, n1, addr1), (h2, n2, addr2)):
            if addr:
                self.address(host, name, addr)
        return Link(End(h1, n1, addr1), End(h2, n2, addr2))

    def bridge(self, name: str, host: Host | None = None, *, snooping: bool = True,
               querier: bool = True, igmp_version: int = 3, mld_version: int = 2,
               query_response_s: float = 1.0) -> Bridge:
        """A Linux bridge, up, with IGMP/MLD snooping and the bridge's own querier.

        Without ``host`` it gets its own namespace named ``name`` and is called
        ``br0`` there; in a given host the device is called ``name``.

        IGMPv3 (and MLDv2) queries by default: v3 hosts never suppress their
        reports, so the bridge learns every member even while it still floods
        reports (with v2 queries, hosts that hear another member's report stay
        silent and their port is never registered). A v3 leave (TO_IN {}) on a
        fast-leave port prunes it at once. ``query_response_s`` is the max
        response time of the bridge's queries (kernel default 10 s); for that
        long after creation the bridge has no querier yet and floods every
        group: ``settle(br)`` waits it out (``br.ready_at``).
        """
        self._check_open()
        if host is None:
            host = self.host(name)
            ifname = self._ifname(host, "br0", "br0")
        else:
            self._own(host)
            ifname = self._ifname(host, name, name)
        ipr = self._ipr[host.ns]
        # The querier is switched on in a second request, after the response interval is
        # set: enabling it starts a "querier delay" of one response interval (default 10 s)
        # during which the bridge still floods every group.
        ipr.link("add", ifname=ifname, kind="bridge", br_mcast_snooping=int(snooping),
                 br_mcast_igmp_version=igmp_version, br_mcast_mld_version=mld_version,
                 br_mcast_query_response_intvl=int(query_response_s * 100))
        index = self._index(host, ifname)
        if querier:
            ipr.link("set", index=index, kind="bridge", br_mcast_querier=1)
        ipr.link("set", index=index, state="up")
        return Bridge(name, host, ifname, time.monotonic() + query_response_s + 0.1)

    def settle(self, br: Bridge) -> None:
        """Sleep until ``br``'s querier counts as present (no more flooding of unknown groups)."""
        time.sleep(max(0.0, br.ready_at - time.monotonic()))

    def attach(self, host: Host, br: Bridge, addr: str | None = None, *, fastleave: bool = True,
               ifname: str | None = None) -> Link:
        """A veth from ``host`` to a new port of ``br`` (fast leave on that port)."""
        self._check_open()
        self._own(host), self._own(br.host)
        port = self._ifname(br.host, None, f"p-{host.name}")
        name = self._ifname(host, ifname, f"to-{br.name}")
        self._veth(br.host, port, host, name, None)
        ipr = self._ipr[br.host.ns]
        index = self._index(br.host, port)
        ipr.link("set", index=index, master=self._index(br.host, br.ifname))
        ipr.brport("set", index=index, fast_leave=int(fastleave))
        if addr:
            self.address(host, name, addr)
        return Link(End(host, name, addr), End(br.host, port, None))

    def trunk(self, a: Bridge, b: Bridge, *, fastleave: bool = False) -> Link:
        """A veth between two bridges, each end a port of its bridge (``to-<b>`` in a's
        host, ``to-<a>`` in b's); ``fastleave`` on a's port: a v3 leave prunes it at once
        (the bridge tracks each host behind it, so one host's leave keeps the others')."""
        self._check_open()
        lk = self.link(a.host, b.host)
        for br, end in ((a, lk.a), (b, lk.b)):
            ipr = self._ipr[br.host.ns]
            ipr.link("set", index=self._index(br.host, end.ifname),
                     master=self._index(br.host, br.ifname))
        if fastleave:
            self._ipr[a.host.ns].brport("set", index=self._index(a.host, lk.a.ifname),
                                        fast_leave=1)
        return lk

    def route(self, host: Host, dst: str, via: str | None = None, dev: Dev | None = None) -> None:
        """Add a unicast route (``dst`` a CIDR or "default") through ``via`` and/or ``dev``."""
        if via is None and dev is None:
            raise TestbedError("route needs via= or dev=")
        spec: dict[str, Any] = {}
        v6 = ":" in dst or (via is not None and ":" in via)
        if dst == "default":
            spec["dst"] = "::/0" if v6 else "0.0.0.0/0"
        else:
            spec["dst"] = str(ipaddress.ip_network(dst, strict=False))
        if via is not None:
            spec["gateway"] = via
        if dev is not None:
            spec["oif"] = self._index(host, dev)
        self._ipr[self._own(host).ns].route("add", **spec)

    def mroute(self, host: Host, dev: Dev, group: str = "224.0.0.0/4") -> None:
        """Route multicast ``group`` out of ``dev``, so sockets without IP_MULTICAST_IF use it."""
        self.route(host, group, dev=dev)

    def shape(self, end: End, netem: Netem | None = None, tbf: Tbf | None = None) -> None:
        """Shape the egress of ``end`` (one direction); replaces any earlier shaping.

        netem runs in the kernel when it has sch_netem, else in a userspace
        impairer process (see ``deliverykit.testbed.shaping``); tbf always in the kernel.
        """
        self._check_open()
        host = self._own(end.host)
        self.unshape(end)
        tap = self._ifname(host, None, f"nm-{end.ifname}"[:13])
        try:
            proc = shaping.apply(self._ipr[host.ns], host.ns, end.ifname, netem, tbf, tap)
        except BaseException:
            self._ifnames[host.ns].discard(tap)
            raise
        if proc is None:
            self._ifnames[host.ns].discard(tap)
        else:
            self._impairers[(host.ns, end.ifname)] = (proc, tap)

    def unshape(self, end: End) -> dict[str, int] | None:
        """Remove shaping from ``end``'s egress; returns the userspace impairer's counters."""
        host = self._own(end.host)
        shaping.clear(self._ipr[host.ns], self._index(host, end))
        found = self._impairers.pop((host.ns, end.ifname), None)
        if found is None:
            return None
        proc, tap = found
        self._ifnames[host.ns].discard(tap)
        return shaping.stop_impairer(proc)

    @staticmethod
    def netem_backend() -> str:
        """"kernel", "userspace" or "unknown" (before the first netem shape)."""
        return shaping.netem_backend()

    # -- inspection --------------------------------------------------------------------

    def ifaces(self, host: Host) -> list[str]:
        """Interface names in ``host`` (as the kernel reports them)."""
        return sorted(m.get("ifname") for m in self._ipr[self._own(host).ns].get_links())

    def counters(self, host: Host, dev: Dev) -> dict[str, int]:
        """Interface statistics (``rx_packets``, ``tx_packets``, ``rx_bytes``, ``tx_bytes``...)."""
        (msg,) = self._ipr[host.ns].get_links(self._index(host, dev))
        stats = msg.get("IFLA_STATS64") or msg.get("IFLA_STATS")
        return {k: int(v) for k, v in dict(stats).items() if isinstance(v, int)}

    def sysctl(self, host: Host, key: str | dict[str, str], value: str | int | None = None) -> None:
        """Write sysctls inside ``host``: ``sysctl(h, "net.ipv4.ip_forward", 1)`` or a dict."""
        settings = key if isinstance(key, dict) else {key: str(value)}
        self.run(host, write_sysctls, settings, timeout=30)

    def features(self, host: Host, dev: Dev, **changes: bool) -> dict[str, bool]:
        """Set device features inside ``host`` as ``ethtool -K`` does, with the
        names' dashes as underscores (``features(x, end, tx_udp_segmentation=False)``:
        the kernel then cuts UDP GSO messages into datagrams in ``host`` instead of
        handing them whole to the veth peer), and return every feature's state."""
        ifname = dev.ifname if isinstance(dev, End) else str(dev)
        named = {k.replace("_", "-"): v for k, v in changes.items()}
        result: dict[str, bool] = self.run(host, ethtool_features, ifname, named, timeout=30)
        return result

    # -- running code --------------------------------------------------------------------

    def spawn(self, host: Host, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Task:
        """Start ``fn(*args, **kwargs)`` in a forked child inside ``host``; see ``Task``."""
        self._check_open()
        with stop_signals_held():  # a Ctrl-C now arrives after the child is on the list
            task = spawn_in_netns(self._own(host).ns, fn, args, kwargs,
                                  label=f"{getattr(fn, '__qualname__', fn)} in host {host.name}")
            self._tasks.append(task)
        return task

    def event(self) -> Event:
        """A flag a spawned child sets (``ev.set()``) and the caller waits on; closed on exit."""
        ev = Event()
        self._events.append(ev)
        return ev

    def run(self, host: Host, fn: Callable[..., Any], *args: Any, timeout: float | None = 30.0,
            **kwargs: Any) -> Any:
        """Call ``fn`` inside ``host`` and return its result (or raise its exception)."""
        task = self.spawn(host, fn, *args, **kwargs)
        try:
            return task.result(timeout)
        finally:
            if task in self._tasks:
                self._tasks.remove(task)
            task.kill()

    async def arun(self, host: Host, fn: Callable[..., Any], *args: Any,
                   timeout: float | None = 30.0, **kwargs: Any) -> Any:
        """``run`` for async callers: the event loop keeps running while the child works."""
        task = self.spawn(host, fn, *args, **kwargs)
        try:
            return await asyncio.to_thread(task.result, timeout)
        finally:
            if task in self._tasks:
                self._tasks.remove(task)
            task.kill()

    def _argv(self, host: Host, argv: Sequence[str]) -> list[str]:
        if isinstance(argv, str):
            raise TypeError("argv must be a sequence of strings, not one string")
        return ["ip", "netns", "exec", self._own(host).ns, *map(str, argv)]

    def popen(self, host: Host, argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
        """Start ``argv`` inside ``host`` (own session); terminated and reaped on close."""
        self._check_open()
        kwargs.setdefault("start_new_session", True)
        proc = subprocess.Popen(self._argv(host, argv), **kwargs)
        self._procs.append(proc)
        return proc

    def exec(self, host: Host, argv: Sequence[str], timeout: float = 30.0, check: bool = False,
             **kwargs: Any) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` inside ``host`` to completion; text output captured."""
        self._check_open()
        kwargs.setdefault("capture_output", True)
        kwargs.setdefault("text", True)
        try:
            return subprocess.run(self._argv(host, argv), timeout=timeout, check=check, **kwargs)
        except subprocess.TimeoutExpired as exc:
            raise TestbedTimeout(f"{argv!r} in host {host.name} ran over {timeout} s") from exc

    def tbf_counters(self, host: Host, dev: Dev) -> dict[str, int]:
        """tc's counters of the tbf qdisc on ``dev`` in ``host`` (``tc -s -j qdisc``):
        packets and bytes sent, drops, overlimits (a packet waited for tokens),
        requeues, backlog; a :class:`TestbedError` if ``dev`` has no tbf."""
        ifname = dev.ifname if isinstance(dev, End) else dev
        cp = self.exec(host, ["tc", "-s", "-j", "qdisc", "show", "dev", ifname], check=True)
        for q in json.loads(cp.stdout):
            if q.get("kind") == "tbf":
                return {k: int(q.get(k, 0)) for k in
                        ("packets", "bytes", "drops", "overlimits", "requeues", "backlog")}
        raise TestbedError(f"no tbf qdisc on {ifname} in host {host.name}")

    @contextmanager
    def capture(self, host: Host, dev: Dev, path: str | os.PathLike[str], filter: str | None = None,
                snaplen: int = 262144) -> Iterator[Capture]:
        """tcpdump ``dev`` in ``host`` into pcap ``path`` for the duration of the block."""
        self._check_open()
        ifname = dev.ifname if isinstance(dev, End) else dev
        cap = Capture(self._own(host).ns, ifname, path, filter, snaplen)
        self._captures.append(cap)
        cap.start()
        try:
            yield cap
        finally:
            cap.stop()


_SIGTERM_OWNER = os.getpid()


def _sigterm_to_exit(signum: int, frame: Any) -> None:
    """SIGTERM -> SystemExit in the process that installed it; default action in forked children."""
    if os.getpid() != _SIGTERM_OWNER:
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        return
    raise SystemExit(128 + signum)


@atexit.register
def _close_all() -> None:
    for tb in list(_LIVE):
        try:
            tb.close()
        except Exception:  # noqa: BLE001 - best effort at exit
            pass
