"""A network namespace with no route out, for running forwarding roles on hostile input.

A forwarding role (ETR, ITR, relay, proxy) fed fuzzed or mutated input may be
talked into sending packets anywhere. Run it only where "anywhere" does not
exist: a namespace whose only interface is ``lo`` and whose only routes are the
kernel's loopback routes, so a packet to any address outside 127.0.0.0/8 and
::1 fails with ENETUNREACH (and counts in the namespace's ``OutNoRoutes``)::

    from deliverykit.testbed.isolated import IsolatedNamespace, start_forwarding_role

    with IsolatedNamespace(prefix="fz") as ns:
        etr = start_forwarding_role(ns, ["corecast", "etr", "--rloc", "127.83.1.1", ...])
        base = ns.ip_counters()["OutNoRoutes"]             # the IPv4 probe counted one
        ns.run(["ip", "-s", "link"])                      # any command, inside
        task = ns.spawn(fuzz_one_role, seed)               # Python, inside (forked)
        assert ns.ip_counters()["OutNoRoutes"] == base     # nothing tried to leave

``start_forwarding_role`` (and ``spawn_forwarding_role`` for an in-process
core) calls ``assert_no_route_out()`` first and raises ``NotIsolatedError``
if anything could leave: an interface other than ``lo`` (kernel fallback
tunnel devices such as ``sit0``, which stay down, are tolerated), a route
through any other device or a gateway, or a probe ``connect()`` to
192.0.2.1 / 2001:db8::1 that does not fail with ENETUNREACH.

Namespaces are made by a one-host ``Testbed`` (name ``<prefix>-<pid>-<hex>-iso``),
so they are deleted on exit of the ``with`` block, at interpreter exit, and
by ``cleanup_stale`` after a crash; processes started with ``popen`` are
stopped and reaped on exit.
"""

from __future__ import annotations

import errno
import json
import socket
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .core import Testbed
from .errors import TestbedError
from .nsexec import Task

# : Devices the kernel adds to every new namespace when a tunnel module is loaded; harmless while
# down.
FALLBACK_TUNNELS = frozenset({
    "sit0", "tunl0", "gre0", "gretap0", "erspan0", "ip_vti0", "ip6tnl0", "ip6gre0", "ip6_vti0",
})
#: Route types that send nothing anywhere.
_BLOCKING_TYPES = frozenset({"unreachable", "blackhole", "prohibit", "throw"})
#: Documentation addresses (RFC 5737, RFC 3849) the reachability probe tries.
PROBE_ADDRESSES = (("192.0.2.1", socket.AF_INET), ("2001:db8::1", socket.AF_INET6))


class NotIsolatedError(TestbedError):
    """The namespace has a way out: a forwarding role must not start there."""


@dataclass(frozen=True, slots=True)
class ProbeResult:
    """Outcome of one ``connect()`` probe inside the namespace."""

    address: str
    """The destination tried."""
    errno: int
    """The error number connect() failed with; 0 when it succeeded (a route exists)."""


def _probe(addresses: Sequence[tuple[str, int]]) -> list[ProbeResult]:
    """Inside the namespace: UDP connect() to each address (sends nothing; only a route lookup)."""
    out = []
    for addr, family in addresses:
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            try:
                s.connect((addr, 9))
                code = 0
            except OSError as exc:
                code = exc.errno or -1
        out.append(ProbeResult(addr, code))
    return out


class IsolatedNamespace:
    """One network namespace with only ``lo`` up and no route out; see the module docstring."""

    __test__ = False

    def __init__(self, prefix: str = "iso") -> None:
        self._tb = Testbed(prefix)
        try:
            self._host = self._tb.host("iso")
        except BaseException:
            self._tb.close()
            raise
        self.name: str = self._host.ns
        """The namespace name, for ``ip netns exec NAME ...``."""

    def __enter__(self) -> IsolatedNamespace:
        self._tb.__enter__()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self._tb.__exit__(exc_type, exc, tb)

    def close(self) -> None:
        """Stop what runs inside and delete the namespace (idempotent)."""
        self._tb.close()

    def popen(self, argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
        """Start ``argv`` inside (own session); stopped and reaped when the namespace closes."""
        return self._tb.popen(self._host, argv, **kwargs)

    def run(self, argv: Sequence[str], timeout: float = 30.0, check: bool = False,
            **kwargs: Any) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` inside to completion; text stdout/stderr captured."""
        return self._tb.exec(self._host, argv, timeout=timeout, check=check, **kwargs)

    def spawn(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Task:
        """Fork a child that enters the namespace and runs ``fn``; ``.result(timeout)`` waits."""
        return self._tb.spawn(self._host, fn, *args, **kwargs)

    def ip_counters(self) -> dict[str, int]:
        """The namespace's ``Ip:`` counters from /proc/net/snmp (OutNoRoutes, OutRequests, ...)."""
        lines = [
            ln.split()
            for ln in self.run(["cat", "/proc/net/snmp"], check=True).stdout.splitlines()
            if ln.startswith("Ip:")
        ]
        names, values = lines[0][1:], lines[1][1:]
        return {k: int(v) for k, v in zip(names, values)}

    def problems(self) -> list[str]:
        """Every way out found (empty when isolated): interfaces, routes, probe results."""
        found: list[str] = []
        links = json.loads(self.run(["ip", "-j", "addr", "show"], check=True).stdout)
        for link in links:
            name, flags = link.get("ifname", "?"), link.get("flags", [])
            if name == "lo":
                continue
            if name in FALLBACK_TUNNELS and "UP" not in flags and not link.get("addr_info"):
                continue
            found.append(f"interface {name} ({','.join(flags)})")
        for family in ("-4", "-6"):
            routes = json.loads(self.run(["ip", "-j", family, "route", "show", "table", "all"],
                                         check=True).stdout or "[]")
            for route in routes:
                if route.get("type") in _BLOCKING_TYPES:
                    continue
                if (
                    route.get("dev") != "lo"
                    or "gateway" in route
                    or "nexthops" in route
                    or "via" in route
                ):
                    found.append(f"route {route.get('dst', '?')} dev {route.get('dev', '?')}"
                                 f" table {route.get('table', 'main')}"
                                 + (f" via {route['gateway']}" if "gateway" in route else ""))
        for probe in self.spawn(_probe, PROBE_ADDRESSES).result(timeout=30):
            if probe.errno != errno.ENETUNREACH:
                what = (
                    "succeeded"
                    if probe.errno == 0
                    else f"failed with {errno.errorcode.get(probe.errno)}"
                )
                found.append(f"connect() to {probe.address} {what}, not ENETUNREACH")
        return found

    def assert_no_route_out(self) -> None:
        """Raise ``NotIsolatedError`` naming every way out; return when there is none."""
        found = self.problems()
        if found:
            raise NotIsolatedError(f"namespace {self.name} is not isolated: " + "; ".join(found))


def start_forwarding_role(
    ns: IsolatedNamespace, argv: Sequence[str], **kwargs: Any
) -> subprocess.Popen[Any]:
    """Check ``ns`` has no route out, then start the forwarding role ``argv`` inside it."""
    if not isinstance(ns, IsolatedNamespace):
        raise NotIsolatedError(
            f"a forwarding role runs only inside an IsolatedNamespace, not {ns!r}"
        )
    ns.assert_no_route_out()
    return ns.popen(argv, **kwargs)


def spawn_forwarding_role(
    ns: IsolatedNamespace, fn: Callable[..., Any], *args: Any, **kwargs: Any
) -> Task:
    """Check ``ns`` has no route out, then run ``fn`` (an in-process forwarding core) inside it."""
    if not isinstance(ns, IsolatedNamespace):
        raise NotIsolatedError(
            f"a forwarding role runs only inside an IsolatedNamespace, not {ns!r}"
        )
    ns.assert_no_route_out()
    return ns.spawn(fn, *args, **kwargs)
