"""Bounded cache of PEX_REScert membership certificates (RFC 7574 8.13, 12.2).

Address -> (DER, notBefore, notAfter) for certificates that passed
:func:`swift.core.pexcert.check` or that we issued as the tracker (CA).
Also indexed by the DER bytes, so a certificate replayed to us is
recognised without a parse and an ECDSA verification each time.
Entries expire with their certificate, are purged when the channel to
their address closes, and at most ``limit`` are kept (oldest out first).
"""

from __future__ import annotations

from collections.abc import Iterator

from deliverykit.protocol import Address

#: notBefore may lie this far in our future (tracker and peer clocks differ)
CLOCK_SKEW = 180.0


class CertCache:
    """See the module docstring; ``cache[addr]`` is the DER certificate."""

    def __init__(self, limit: int = 256) -> None:
        self.limit = limit
        self._by_addr: dict[Address, tuple[bytes, float, float]] = {}
        self._by_der: dict[bytes, Address] = {}

    def __len__(self) -> int:
        return len(self._by_addr)

    def __contains__(self, addr: Address) -> bool:
        return addr in self._by_addr

    def __getitem__(self, addr: Address) -> bytes:
        return self._by_addr[addr][0]

    def __iter__(self) -> Iterator[Address]:
        return iter(self._by_addr)

    def get(self, addr: Address, now: float | None = None) -> bytes | None:
        """The certificate for ``addr``; None if absent or (given ``now``) expired."""
        e = self._by_addr.get(addr)
        if e is None or (now is not None and now > e[2]):
            return None
        return e[0]

    def put(self, addr: Address, der: bytes, not_before: float, not_after: float) -> None:
        self.pop(addr)
        while len(self._by_addr) >= self.limit:
            self.pop(next(iter(self._by_addr)))
        self._by_addr[addr] = (der, not_before, not_after)
        self._by_der[der] = addr

    def pop(self, addr: Address) -> None:
        e = self._by_addr.pop(addr, None)
        if e is not None and self._by_der.get(e[0]) == addr:
            del self._by_der[e[0]]

    def known(self, der: bytes, now: float) -> Address | None:
        """The address of an already checked, unexpired ``der`` (else None)."""
        addr = self._by_der.get(der)
        if addr is None:
            return None
        e = self._by_addr[addr]
        return addr if e[1] <= now + CLOCK_SKEW and now <= e[2] else None

    def fresh(self, addr: Address, now: float, margin: float = 0.1) -> bool:
        """True while more than ``margin`` of the lifetime is left (re-issue after)."""
        e = self._by_addr.get(addr)
        if e is None:
            return False
        _, nb, na = e
        return na - now > margin * max(0.0, na - nb)
