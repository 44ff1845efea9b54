"""What a LISP implementation under test declares about itself (the suite's capabilities).

The suite must not take its own assumptions for the implementation's faults,
so what varies legitimately between deployed implementations is declared, not
assumed.  Declarations are environment variables, set in the registry entry's
``env`` (``deliverykit/conformance/implementations.json``) or in the
environment of ``--impl-cmd``:

``LISP_AUTH_ALGORITHMS`` (default ``2``)
    Comma-separated RFC 9301 sec. 12.5 Algorithm IDs the implementation
    authenticates Map-Registers with (1 HMAC-SHA-1-96, 2 HMAC-SHA-256-128,
    3 HMAC-SHA256-128+HKDF-SHA256).  The authentication cases sign with the
    first of 2, 3, 1 it declares.  Whether it supports an algorithm RFC 9301
    allows (2 or 3) is a case of its own
    (``test_register_with_an_rfc9301_algorithm``), run whatever it declares.
``LISP_AUTH_PROFILE`` (default ``rfc9301``)
    ``rfc9301``: Key ID and Algorithm ID bytes as RFC 9301 sec. 5.6, MACs
    truncated (12 / 16 bytes).  ``rfc6833``: the two bytes are RFC 6833's
    16-bit Key ID whose value names the algorithm (Open Overlay Router:
    ``00 01``), the MAC is the whole digest (20 bytes for HMAC-SHA-1).
``LISP_NETNS`` (default empty)
    ``required``: the implementation may run only inside a network namespace
    (e.g. it decapsulates every UDP/4341 packet of its host, or needs a tun
    device): cases that need it on the host's loopback report *unsupported*
    with that reason instead of running it there.
``LISP_FIXED_PORTS`` (default empty)
    ``1``: it listens on the well-known ports only (4342 control, 4341 data),
    whatever ``--port`` / ``--control-port`` / ``--data-port`` say; cases that
    need other ports report *unsupported*.
"""

from __future__ import annotations

import ctypes
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pytest

from corecast.wire.codec import MapRegister, compute_auth, encode_map_register
from corecast.wire.constants import AlgorithmId

_PREFERENCE = (AlgorithmId.HMAC_SHA_256_128, AlgorithmId.HMAC_SHA_256_128_HKDF_SHA256,
               AlgorithmId.HMAC_SHA_1_96)
_FULL = {AlgorithmId.HMAC_SHA_1_96: 20, AlgorithmId.HMAC_SHA_256_128: 32,
         AlgorithmId.HMAC_SHA_256_128_HKDF_SHA256: 32}


@dataclass(frozen=True, slots=True)
class LispCaps:
    algorithms: tuple[AlgorithmId, ...]
    rfc6833_key_id: bool  #: LISP_AUTH_PROFILE=rfc6833
    netns_only: bool
    fixed_ports: bool

    @property
    def algorithm(self) -> AlgorithmId:
        """The algorithm the authentication cases sign with."""
        return next((a for a in _PREFERENCE if a in self.algorithms), self.algorithms[0])

    def sign(self, m: MapRegister, psk: bytes, site_key_id: int) -> bytes:
        """``m`` signed as this implementation reads Map-Registers.  With the RFC 6833 profile the
        site's key is named by the algorithm's number in the 16-bit field, so ``m.key_id`` equal to
        ``site_key_id`` is written as ``00 AA``; another key_id stays in the first byte
        (unknown)."""
        if self.rfc6833_key_id:
            from dataclasses import replace

            m = replace(m, key_id=0 if m.key_id == site_key_id else m.key_id)
            if m.algorithm_id in _FULL:
                return encode_map_register(
                    m, compute_auth(m, psk, _FULL[AlgorithmId(m.algorithm_id)])
                )
        return encode_map_register(m, compute_auth(m, psk))

    def wire_key_id(self, site_key_id: int) -> tuple[int, int]:
        """(Key ID, Algorithm ID) bytes the implementation's ETR should write for the site key."""
        if self.rfc6833_key_id:
            return 0, int(self.algorithm)
        return site_key_id, int(self.algorithm)

    def need_host_loopback(self, what: str = "this case") -> None:
        if self.netns_only:
            pytest.skip(f"unsupported: {what} runs the implementation on the host's loopback; "
                        "it declares LISP_NETNS=required")

    def need_free_ports(self, what: str = "this case") -> None:
        if self.fixed_ports:
            pytest.skip(f"unsupported: {what} needs ports of the suite's choosing; "
                        "it declares LISP_FIXED_PORTS=1 (4341/4342 only)")


def caps_of(impl) -> LispCaps:
    env = {**os.environ, **getattr(impl, "env", {})}
    raw = env.get("LISP_AUTH_ALGORITHMS", "2")
    algs = []
    for tok in raw.split(","):
        tok = tok.strip()
        if not tok:
            continue
        try:
            algs.append(AlgorithmId(int(tok)))
        except ValueError:
            raise pytest.UsageError(
                f"LISP_AUTH_ALGORITHMS: {tok!r} is no RFC 9301 Algorithm ID"
            ) from None
    if not algs:
        raise pytest.UsageError("LISP_AUTH_ALGORITHMS declares no algorithm")
    profile = env.get("LISP_AUTH_PROFILE", "rfc9301")
    if profile not in ("rfc9301", "rfc6833"):
        raise pytest.UsageError(f"LISP_AUTH_PROFILE: {profile!r} (rfc9301 or rfc6833)")
    return LispCaps(tuple(algs), profile == "rfc6833", env.get("LISP_NETNS", "") == "required",
                    env.get("LISP_FIXED_PORTS", "") == "1")


@dataclass(frozen=True, slots=True)
class LispNet:
    """Where a case runs: the implementation's address, ours, and its namespace (None: host)."""

    impl_addr: str
    harness_addr: str
    netns: str | None = None
    #: an address of the ETR site's EID prefix (10.5.0.0/16) configured in the implementation's
    #: namespace: what an ETR decapsulates to must be its own site's (RFC 9300 sec. 4)
    site_host: str = "127.0.0.1"

    def impl_socket(self) -> socket.socket:
        """A UDP socket in the implementation's namespace (the test thread steps in and back)."""
        if self.netns is None:
            return socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        home = os.open("/proc/self/ns/net", os.O_RDONLY)
        there = os.open(f"/var/run/netns/{self.netns}", os.O_RDONLY)
        try:
            _setns(there)
            try:
                return socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            finally:
                _setns(home)
        finally:
            os.close(there)
            os.close(home)


_CLONE_NEWNET = 0x40000000


def _setns(fd: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, _CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


@contextmanager
def lisp_net(caps: LispCaps) -> Iterator[LispNet]:
    """For an implementation that runs only in a namespace (``LISP_NETNS=required``): two new
    namespaces joined by a veth, the implementation's (10.203.0.1) and the case's (10.203.0.2),
    which this thread enters for the body so the case's sockets live there; left, and both
    deleted, at the end. Otherwise the host's loopback (127.0.0.1 both sides)."""
    if not caps.netns_only:
        yield LispNet("127.0.0.1", "127.0.0.1")
        return
    from deliverykit.testing import require_root

    require_root()
    from deliverykit.testbed import Testbed

    with Testbed(prefix="cclispns") as tb:
        i, h = tb.host("i"), tb.host("h")
        tb.link(i, h, "10.203.0.1/24", "10.203.0.2/24", ifname_a="vI", ifname_b="vH")
        tb.address(i, "lo", "10.5.0.1/32")  # a host of the ETR cases' site
        home = os.open("/proc/self/ns/net", os.O_RDONLY)
        try:
            there = os.open(f"/var/run/netns/{h.ns}", os.O_RDONLY)
            try:
                _setns(there)
            finally:
                os.close(there)
            try:
                yield LispNet("10.203.0.1", "10.203.0.2", i.ns, "10.5.0.1")
            finally:
                _setns(home)
        finally:
            os.close(home)
