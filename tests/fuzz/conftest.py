"""Shared fuzz helpers: mutators, bounded loops, a datagram fuzzer, and capture checks.

Every package's ``tests/fuzz/test_fuzz_<pkg>.py`` may import these::

    # in tests/fuzz/test_fuzz_<pkg>.py
    from .conftest import Mutator, bounded, fuzz_udp, emitted_udp
    # or, inside a fuzz test module, as fixtures: fuzz_seconds, fuzz_rng

* :class:`Mutator` turns seed packets (bytes or scapy packets) into an endless stream of
  mutations: bit flips, truncation, extension, random bytes, byte-splices, and scapy
  *field* mutation (one field of one layer set to a random or boundary value, lengths and
  checksums recomputed so the packet gets past the first parser).
* :func:`bounded` stops any iterable after ``seconds`` or ``count``, whichever comes first
  (every fuzz loop is bounded in both).
* :func:`fuzz_udp` sends mutations to UDP targets from chosen source addresses for a bounded
  time; call it inside a namespace (``IsolatedNamespace.spawn``) for forwarding roles.
* :func:`emitted_udp` reads a capture (``deliverykit.pcap``) and lists the UDP packets sent
  by given hosts, for "emits nothing outside the configured addresses" assertions.

The seed is printed on failure (``FUZZ_SEED=N`` reproduces a run); ``FUZZ_SECONDS`` sets
the time per role (default 3 s: CI).
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import random
import socket
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest

T = TypeVar("T")

#: Addresses a mutated field is set to: boundaries, public, loopback, multicast, broadcast.
BAIT_V4 = ("0.0.0.0", "255.255.255.255", "8.8.8.8", "192.0.2.1", "127.0.0.1", "127.66.6.6",
           "224.0.0.1", "239.255.255.250", "10.0.0.1", "100.64.0.1")
BAIT_V6 = ("::", "::1", "2001:db8::1", "ff02::1", "fe80::1", "::ffff:8.8.8.8")
_INT_EDGES = (0, 1, 2, 0x7F, 0x80, 0xFF, 0x100, 0x7FFF, 0x8000, 0xFFFF, 0x10000, 0x7FFFFFFF,
              0x80000000, 0xFFFFFFFF)


def fuzz_seconds() -> float:
    """Seconds each role is fuzzed (``FUZZ_SECONDS``, default 3)."""
    return float(os.environ.get("FUZZ_SECONDS", "3"))


def fuzz_seed() -> int:
    return int(os.environ.get("FUZZ_SEED", str(random.SystemRandom().randrange(1 << 32))))


@pytest.fixture(name="fuzz_seconds")
def _fuzz_seconds_fixture() -> float:
    return fuzz_seconds()


@pytest.fixture(name="fuzz_rng")
def _fuzz_rng_fixture(request: pytest.FixtureRequest) -> random.Random:
    seed = fuzz_seed()
    request.node.user_properties.append(("fuzz_seed", seed))
    print(f"fuzz seed {seed} (FUZZ_SEED={seed} reproduces this run)")
    return random.Random(seed)


def bounded(items: Iterable[T], seconds: float, count: int = 1_000_000) -> Iterator[T]:
    """``items`` until ``seconds`` pass or ``count`` items were taken."""
    end = time.monotonic() + seconds
    for n, item in enumerate(items):
        if n >= count or time.monotonic() >= end:
            return
        yield item


# ------------------------------------------------------------------ byte mutators


def bit_flips(data: bytes, rng: random.Random, max_flips: int = 8) -> bytes:
    if not data:
        return data
    b = bytearray(data)
    for _ in range(rng.randint(1, max_flips)):
        i = rng.randrange(len(b) * 8)
        b[i // 8] ^= 1 << (i % 8)
    return bytes(b)


def truncate(data: bytes, rng: random.Random) -> bytes:
    return data[: rng.randrange(len(data) + 1)] if data else data


def extend(data: bytes, rng: random.Random, max_extra: int = 64) -> bytes:
    return data + rng.randbytes(rng.randint(1, max_extra))


def random_bytes(rng: random.Random, max_len: int = 1400) -> bytes:
    return rng.randbytes(rng.choice((0, 1, 2, 4, 8, 12, 20, 28, 40, rng.randint(0, max_len))))


def set_bytes(data: bytes, rng: random.Random) -> bytes:
    """Overwrite 1-4 bytes at a random offset with an edge value (0x00, 0xFF, 0x7F, 0x80)."""
    if not data:
        return data
    b = bytearray(data)
    i = rng.randrange(len(b))
    for j in range(i, min(len(b), i + rng.randint(1, 4))):
        b[j] = rng.choice((0x00, 0xFF, 0x7F, 0x80, rng.randrange(256)))
    return bytes(b)


def splice(a: bytes, b: bytes, rng: random.Random) -> bytes:
    """The head of one seed with the tail of another."""
    return a[: rng.randrange(len(a) + 1)] + b[rng.randrange(len(b) + 1):]


# ------------------------------------------------------------------ scapy field mutation


def _random_value(fld: Any, current: Any, rng: random.Random) -> Any:
    from scapy.fields import IP6Field, IPField, StrField

    name = type(fld).__name__
    if isinstance(fld, IP6Field) or "IP6" in name:
        return rng.choice(BAIT_V6)
    if isinstance(fld, IPField) or name in ("SourceIPField", "DestIPField"):
        return rng.choice(BAIT_V4 + (str(ipaddress.IPv4Address(rng.getrandbits(32))),))
    if isinstance(fld, StrField) or isinstance(current, (bytes, str)):
        choice = rng.random()
        if choice < 0.3:
            return b""
        if choice < 0.6 and isinstance(current, bytes) and current:
            return bit_flips(current, rng)
        return rng.randbytes(rng.randint(1, 64))
    size = getattr(fld, "size", None)  # BitField width in bits
    if size is None:
        sz = getattr(fld, "sz", None)
        size = sz * 8 if isinstance(sz, int) else 32
    top = (1 << size) - 1
    if rng.random() < 0.5:
        return rng.choice([v & top for v in _INT_EDGES])
    return rng.randint(0, top)


@contextlib.contextmanager
def no_name_lookups() -> Iterator[None]:
    """Refuse host *names* (numeric addresses pass): scapy resolves a field value that is
    not an address with DNS, which in a namespace with no route out would itself be a send
    attempt (and move the OutNoRoutes counter the fuzz tests assert on)."""
    saved = socket.getaddrinfo, socket.gethostbyname, socket.gethostbyname_ex

    def numeric(host: Any) -> None:
        try:
            text = host.decode() if isinstance(host, bytes) else str(host).split("%")[0]
            ipaddress.ip_address(text)
        except ValueError:
            message = f"name lookups are off while fuzzing: {host!r}"
            raise socket.gaierror(socket.EAI_NONAME, message) from None

    def getaddrinfo(host: Any, *a: Any, **kw: Any) -> Any:
        if host is not None:
            numeric(host)
        return saved[0](host, *a, **kw)

    def gethostbyname(host: Any) -> Any:
        numeric(host)
        return saved[1](host)

    def gethostbyname_ex(host: Any) -> Any:
        numeric(host)
        return saved[2](host)

    (socket.getaddrinfo,  # type: ignore[assignment]  # numeric hosts only
     socket.gethostbyname, socket.gethostbyname_ex) = (getaddrinfo, gethostbyname, gethostbyname_ex)
    try:
        yield
    finally:
        (socket.getaddrinfo,  # type: ignore[assignment]  # restore DNS
         socket.gethostbyname, socket.gethostbyname_ex) = saved


def mutate_fields(pkt: Any, rng: random.Random, n: int = 1) -> bytes:
    """``pkt`` (a scapy packet) with ``n`` random fields of random layers set to random or
    boundary values; length and checksum fields left unset are recomputed by scapy. Host
    names are never looked up (:func:`no_name_lookups`)."""
    with no_name_lookups():
        return _mutate_fields(pkt, rng, n)


def _mutate_fields(pkt: Any, rng: random.Random, n: int) -> bytes:
    from scapy.fields import ConditionalField, PacketField, PacketListField

    p = pkt.copy()
    layers = []
    layer = p
    while layer is not None and layer.__class__.__name__ not in ("NoPayload", "Raw", "Padding"):
        layers.append(layer)
        layer = layer.payload if layer.payload else None
    for _ in range(n):
        if not layers:
            break
        target = rng.choice(layers)
        fields = [f.fld if isinstance(f, ConditionalField) else f for f in target.fields_desc]
        fields = [f for f in fields if not isinstance(f, (PacketListField, PacketField))]
        if not fields:
            continue
        fld = rng.choice(fields)
        try:
            setattr(target, fld.name, _random_value(fld, target.getfieldval(fld.name), rng))
        except Exception:  # noqa: BLE001 - a value scapy refuses: try another next time
            continue
    try:
        return bytes(p)
    except Exception:  # noqa: BLE001 - the mutation made it unbuildable: flip bits instead
        return bit_flips(bytes(pkt), rng)


@dataclass
class Mutator:
    """An endless stream of mutations of ``seeds`` (bytes, or scapy packets for field mutation).

    ``weights`` picks among: bits, truncate, extend, random, set_bytes, splice, fields.
    """

    seeds: Sequence[Any]
    rng: random.Random
    weights: dict[str, float] = field(default_factory=lambda: {
        "bits": 3, "truncate": 2, "extend": 1, "random": 1, "set_bytes": 2, "splice": 1,
        "fields": 4})

    def __post_init__(self) -> None:
        self._raw = [s if isinstance(s, bytes) else bytes(s) for s in self.seeds]
        self._pkts = [s for s in self.seeds if not isinstance(s, bytes)]
        if not self._pkts:
            self.weights = {k: v for k, v in self.weights.items() if k != "fields"}
        self._names = list(self.weights)
        self._w = [self.weights[k] for k in self._names]

    def one(self) -> bytes:
        rng = self.rng
        kind = rng.choices(self._names, self._w)[0]
        seed = rng.choice(self._raw) if self._raw else b""
        if kind == "bits":
            return bit_flips(seed, rng)
        if kind == "truncate":
            return truncate(seed, rng)
        if kind == "extend":
            return extend(seed, rng)
        if kind == "random":
            return random_bytes(rng)
        if kind == "set_bytes":
            return set_bytes(seed, rng)
        if kind == "splice":
            return splice(seed, rng.choice(self._raw), rng)
        return mutate_fields(rng.choice(self._pkts), rng, rng.randint(1, 3))

    def __iter__(self) -> Iterator[bytes]:
        while True:
            yield self.one()


# ------------------------------------------------------------------ sending and checking


@dataclass(frozen=True)
class Target:
    """Where to send mutations of ``seeds`` and from which local addresses."""

    name: str
    addr: tuple[str, int]
    seeds: Sequence[Any]
    sources: Sequence[str]


def fuzz_udp(targets: Sequence[Target], seconds: float, seed: int, max_count: int = 200_000,
             pace: Callable[[int], None] | None = None) -> dict[str, int]:
    """Send mutations to every target, round robin, for ``seconds`` at most (and at most
    ``max_count`` datagrams); returns datagrams sent per target. Bounded, paced every 64
    datagrams with a 1 ms sleep so the roles under test and the transfer beside keep up."""
    rng = random.Random(seed)
    socks: dict[str, socket.socket] = {}
    sent = {t.name: 0 for t in targets}
    mutators = {t.name: Mutator(t.seeds, random.Random(rng.getrandbits(32))) for t in targets}
    try:
        for t in targets:
            for src in t.sources:
                if src not in socks:
                    fam = socket.AF_INET6 if ":" in src else socket.AF_INET
                    s = socket.socket(fam, socket.SOCK_DGRAM)
                    s.bind((src, 0))
                    s.setblocking(False)
                    socks[src] = s
        n = 0
        for n in bounded(range(max_count), seconds, max_count):
            t = targets[n % len(targets)]
            data = mutators[t.name].one()[:65000]
            try:
                socks[rng.choice(list(t.sources))].sendto(data, t.addr)
                sent[t.name] += 1
            except OSError:  # a full buffer or an ICMP error reported late: keep going
                pass
            if n % 64 == 63:
                (pace or (lambda _n: time.sleep(0.001)))(n)
    finally:
        for s in socks.values():
            s.close()
    return sent


def emitted_udp(pcap: str | os.PathLike[str], senders: Iterable[str]) -> list[tuple[str, str, int]]:
    """(src, dst, dport) of every captured UDP packet whose source is one of ``senders``."""
    from deliverykit.pcap import Reader

    hosts = set(senders)
    return [(f.src, f.dst, f.dport or 0)
            for f in Reader(Path(pcap)) if f.proto == 17 and f.src in hosts]
