"""C fast paths (deliverykit/csrc/corecast.c) vs their pure twins (corecast/_fast.py)."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given, settings, strategies as st

from corecast import _fast
from corecast.core.maptrie import PrefixTrie
from corecast.wire import codec as c
from deliverykit.fastpath import speedups

C = pytest.mark.skipif(speedups is None or not hasattr(speedups, "cc_parse"),
                       reason="deliverykit._speedups not built (setup.py build_ext --inplace)")

RANGES = ((bytes([10, 255, 0, 0]), bytes([255, 255, 0, 0])),
          (ipaddress.ip_address("fd00:cc::").packed, bytes([255] * 4 + [0] * 12)))


@st.composite
def inner_packets(draw):
    """Mostly well-formed CoreCast/plain packets, then mutated or truncated."""
    v6 = draw(st.booleans())
    chan = (ipaddress.ip_address("fd00:cc::1") if v6 else ipaddress.ip_address("10.255.0.1")
            ) if draw(st.booleans()) else (ipaddress.ip_address("fd00:1::1") if v6
                                           else ipaddress.ip_address("10.1.0.1"))
    src = ipaddress.ip_address("fd00::9" if v6 else "10.0.0.9").packed
    hid = draw(st.sampled_from([1, 2]))
    if draw(st.booleans()):
        pdu = c.encode_cc_payload(draw(st.integers(0, 2**32 - 1)), draw(st.binary(max_size=64)),
                                  hid)
    else:
        eid = draw(st.one_of(st.binary(min_size=4, max_size=4),
                             st.binary(min_size=16, max_size=16)))
        pdu = c.encode_cc_header(draw(st.integers(0, 2**32 - 1)),
                                 b"\x01" * (20 if hid == 1 else 32), eid, 5000, hid)
    proto = draw(st.sampled_from([17, 253, 6]))
    body = c.build_udp(54341, draw(st.sampled_from([54341, 54341, 80])), pdu) if proto == 17 \
        else pdu
    pkt = bytearray(c.build_ip(src, chan.packed, proto, body))
    for _ in range(draw(st.integers(0, 2))):
        if pkt:
            pkt[draw(st.integers(0, len(pkt) - 1))] = draw(st.integers(0, 255))
    if draw(st.booleans()):
        pkt = pkt[: draw(st.integers(0, len(pkt)))]
    return bytes(pkt)


@C
@settings(max_examples=800, deadline=None)
@given(st.one_of(inner_packets(), st.binary(max_size=100)))
def test_cc_parse_c_equals_twin(pkt):
    assert speedups.cc_parse(pkt, RANGES) == _fast.py_cc_parse(pkt, RANGES)


@C
@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2**32 - 1), st.integers(0, 32)), max_size=20),
       st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=10))
def test_cc_trie_lookup_c_equals_twin(nets, probes):
    t: PrefixTrie[int] = PrefixTrie()
    for i, (n, plen) in enumerate(nets):
        net = ipaddress.IPv4Network((n, plen), strict=False)
        t.insert(net.network_address.packed, plen, i)
    root = t._roots[4]
    for p in probes + [n for n, _ in nets]:
        a = p.to_bytes(4, "big")
        assert speedups.cc_trie_lookup(root, a) == _fast.py_cc_trie_lookup(root, a)


@C
def test_c_functions_reject_bad_arguments():
    with pytest.raises(TypeError):
        speedups.cc_parse(b"\x45" + b"\x00" * 30, (("x", "y"),))
    with pytest.raises(TypeError):
        speedups.cc_trie_lookup([None, None], b"\x00" * 4)
    with pytest.raises(TypeError):
        speedups.cc_parse("text", RANGES)


@C
@settings(max_examples=100, deadline=None)
@given(st.lists(inner_packets(), min_size=1, max_size=30))
def test_itr_same_outputs_with_c_and_pure(pkts):
    from corecast.core.itr import Itr
    from corecast.core.mapcache import MapCache

    def make(fast):
        mc = MapCache()
        mc.load_static("10.0.0.0/8 192.0.2.1\nfd00::/16 192.0.2.2\n0.0.0.0/0 192.0.2.3")
        return Itr("192.0.2.100", [(n, 16) if len(n) == 4 else (n, 32) for n, _ in RANGES],
                   mc, fast=fast)

    a, b = make(True), make(False)
    for p in pkts:
        assert a.handle_inner(p, 0) == b.handle_inner(p, 0)
    assert a.counters == b.counters
