"""The testbed's value objects: hosts, link ends, links, bridges (frozen dataclasses)."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from .errors import TestbedError


@dataclass(frozen=True, slots=True)
class Host:
    """One network namespace: ``name`` as given to ``Testbed.host``, ``ns`` its netns name."""

    name: str
    ns: str


@dataclass(frozen=True, slots=True)
class End:
    """One end of a link: the interface ``ifname`` in ``host``, with ``addr`` (CIDR) or None."""

    host: Host
    ifname: str
    addr: str | None = None

    @property
    def ip(self) -> str | None:
        """The address without its prefix length."""
        return None if self.addr is None else str(ipaddress.ip_interface(self.addr).ip)


@dataclass(frozen=True, slots=True)
class Link:
    """A veth pair; for ``Testbed.attach`` ``a`` is the host's end and ``b`` the bridge port."""

    a: End
    b: End

    @property
    def ends(self) -> tuple[End, End]:
        return (self.a, self.b)

    def end(self, host: Host) -> End:
        """The end that lives in ``host``."""
        for end in (self.a, self.b):
            if end.host == host:
                return end
        raise TestbedError(f"link {self.a.ifname}<->{self.b.ifname} has no end in {host.name}")


@dataclass(frozen=True, slots=True)
class Bridge:
    """A Linux bridge device ``ifname`` inside ``host``."""

    name: str
    host: Host
    ifname: str
    #: time.monotonic() after which snooping forwards by membership only
    ready_at: float = 0.0
