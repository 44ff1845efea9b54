"""Hypothesis strategies shared by the corecast tests."""

from __future__ import annotations

import dataclasses
import ipaddress

from hypothesis import strategies as st

from corecast.wire import codec as c

ipv4 = st.integers(0, 2**32 - 1).map(ipaddress.IPv4Address)
ipv6 = st.integers(0, 2**128 - 1).map(ipaddress.IPv6Address)
addr = st.one_of(ipv4, ipv6)


@st.composite
def network(draw):
    a = draw(addr)
    plen = draw(st.integers(0, a.max_prefixlen))
    return ipaddress.ip_network(f"{a}/{plen}", strict=False)


locator = st.builds(
    c.LocatorRecord,
    addr,
    st.integers(0, 255),
    st.integers(0, 255),
    st.integers(0, 255),
    st.integers(0, 255),
    st.booleans(),
    st.booleans(),
    st.booleans(),
)

iid = st.one_of(st.just(0), st.integers(1, 2**32 - 1))

eid_record = st.builds(
    c.EidRecord,
    network(),
    st.lists(locator, max_size=4).map(tuple),
    st.integers(0, 2**32 - 1),
    st.integers(0, 7),
    st.booleans(),
    st.integers(0, 4095),
    iid,
)

map_request = st.builds(
    c.MapRequest,
    st.integers(0, 2**64 - 1),
    st.lists(addr, min_size=1, max_size=32).map(tuple),
    st.lists(network(), min_size=0, max_size=3).map(tuple),
    st.one_of(st.none(), addr),
    st.booleans(),
    st.just(False),
    st.booleans(),
    st.booleans(),
    st.booleans(),
    st.booleans(),
    st.booleans(),
    st.booleans(),
    st.one_of(st.none(), eid_record),
    st.lists(iid, max_size=3).map(tuple),
    iid,  # Source EID's Instance ID (an LCAF address when non-zero, RFC 8060 sec. 4.1)
).map(lambda m: dataclasses.replace(
    m, map_data_present=m.map_reply_record is not None,
    eid_iids=(m.eid_iids + (0,) * 3)[:len(m.eid_prefixes)] if any(
        m.eid_iids[:len(m.eid_prefixes)]) else (),
    source_iid=m.source_iid if m.source_eid is not None else 0))

map_reply = st.builds(
    c.MapReply,
    st.integers(0, 2**64 - 1),
    st.lists(eid_record, max_size=3).map(tuple),
    st.booleans(),
    st.booleans(),
    st.booleans(),
)


@st.composite
def map_register(draw):
    typ = draw(st.sampled_from([3, 4, 5]))
    reg = typ == 3
    ident = draw(st.booleans())
    return c.MapRegister(
        draw(st.integers(0, 2**64 - 1)),
        tuple(draw(st.lists(eid_record, max_size=3))),
        draw(st.integers(0, 255)),
        draw(st.integers(0, 255)),
        draw(st.binary(max_size=40)),
        typ,
        reg and draw(st.booleans()),
        reg and draw(st.booleans()),
        reg and draw(st.booleans()),
        reg and draw(st.booleans()),
        reg and draw(st.booleans()),
        reg and draw(st.booleans()),
        draw(st.binary(min_size=16, max_size=16)) if ident else None,
        draw(st.binary(min_size=8, max_size=8)) if ident else None,
        rtr=draw(st.booleans()),  # the R bit, in both Map-Register and Map-Notify
    )


hash_id = st.sampled_from([1, 2])


@st.composite
def cc_payload(draw):
    hid = draw(hash_id)
    data = draw(st.binary(max_size=1500))
    return c.CCPayload(draw(st.integers(0, 2**32 - 1)), c.digest(hid, data), data, hid,
                       draw(st.integers(0, 255)))


@st.composite
def cc_header(draw):
    hid = draw(hash_id)
    return c.CCHeader(
        draw(st.integers(0, 2**32 - 1)),
        draw(st.binary(min_size=20 if hid == 1 else 32, max_size=20 if hid == 1 else 32)),
        draw(st.one_of(st.binary(min_size=4, max_size=4), st.binary(min_size=16, max_size=16))),
        draw(st.integers(0, 65535)),
        hid,
        draw(st.integers(0, 255)),
    )
