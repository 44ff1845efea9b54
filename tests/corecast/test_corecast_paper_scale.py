"""CoreCast at the paper's scale (issue 18): the Fig. 2 testbed's warm-up datagrams
left out of the measured bytes by what they are; the multi-domain simulator scenario
(Fig. 4's skewed clients per AS) against eqs. 3 and 5 and Fig. 6's per-AS saving; the
ITR's state measured against the memory model; `corecast plan`'s paper column."""

from __future__ import annotations

import ipaddress

from corecast.experiments.fig2_testbed import WARMUP, WARMUP_PORT, is_warmup
from corecast.wire import codec as c
from corecast.wire.ip import build_ip, build_udp

ETH = bytes(14)


def _a(x: str) -> bytes:
    return ipaddress.ip_address(x).packed


def _lisp(outer_src: str, outer_dst: str, inner: bytes) -> bytes:
    return build_ip(_a(outer_src), _a(outer_dst), 17,
                    build_udp(61000, 4341, bytes([0x80]) + bytes(7) + inner))


def test_warmup_datagrams_are_recognised_by_what_they_are_on_every_link():
    for me, eid, r0, r1 in (("10.0.0.1", "10.1.1.2", "100.64.0.1", "100.64.1.1"),
                            ("fd00::1", "fd00:1:1::2", "fd01::1", "fd01:1::1")):
        warm = build_ip(_a(me), _a(eid), 17, build_udp(WARMUP_PORT, 5001, WARMUP))
        assert is_warmup(ETH + warm)                       # local link, decapsulated
        assert is_warmup(ETH + _lisp(r0, r1, warm))        # transit link, LISP
        assert is_warmup(ETH + warm + bytes(20))           # Ethernet padding after it
        # the measured stream is not: a CoreCast header PDU and a plain UDP datagram
        # of the same shape from another port or with another payload
        h = c.encode_cc_header(0, bytes(20), _a(eid), 5001)
        assert not is_warmup(ETH + _lisp(r0, r1, build_ip(_a(me), _a(eid), 253, h)))
        assert not is_warmup(ETH + build_ip(_a(me), _a(eid), 17,
                                            build_udp(WARMUP_PORT + 1, 5001, WARMUP)))
        assert not is_warmup(ETH + build_ip(_a(me), _a(eid), 17,
                                            build_udp(WARMUP_PORT, 5001, b"warm!")))
    assert not is_warmup(ETH + b"\x45")  # truncated: not a warm-up, no exception
