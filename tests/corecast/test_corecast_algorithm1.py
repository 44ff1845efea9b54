"""The ITR against a reference written line by line from the paper's Algorithm 1
(and Algorithm 2 for the ETR), on random packet sequences."""

from __future__ import annotations

import hashlib

from hypothesis import given, settings, strategies as st

from corecast.core.etr import Etr
from corecast.core.itr import Itr
from corecast.core.mapcache import MapCache
from corecast.core.maptrie import parse_prefix
from corecast.wire import codec as c

# These tests exercise other behaviour: their ETRs serve every EID and trust every RLOC
# (the site checks are tested in test_corecast_etr_safety.py).
OPEN_ETR = {"eids": [(bytes(4), 0), (bytes(16), 0)], "trusted_rlocs": None}

CHANNELS = [bytes([10, 255, 0, i]) for i in (1, 2)]
RLOC_OF_AS = {1: "192.0.2.1", 2: "192.0.2.2", 3: "192.0.2.3"}
SRC = bytes([10, 0, 0, 1])


def client(as_: int, host: int) -> bytes:
    return bytes([10, as_, 0, host])


def reference_itr(events, extra_every=0):
    """Algorithm 1 (section 3.4), with the extra-payload option; returns what is sent."""
    payload_buffer = {}  # channel -> (hash, payload, servedRLOC{rloc: headers since payload})
    sent = []
    for kind, chan, data, eid in events:
        if kind == "payload":
            h = hashlib.sha1(data).digest()
            if eid == "bad":  # a payload whose carried hash is wrong
                continue  # Drop
            payload_buffer[chan] = (h, data, {})  # store; new servedRLOC
        else:
            h = hashlib.sha1(data).digest()
            entry = payload_buffer.get(chan)
            if entry is None or entry[0] != h:
                continue  # Drop
            rloc = RLOC_OF_AS[eid[1]]
            served = entry[2]
            if rloc in served and not (extra_every and served[rloc] >= extra_every):
                served[rloc] += 1
                sent.append(("H", rloc, chan, eid))
            else:
                served[rloc] = 1
                sent += [("P", rloc, chan, entry[1]), ("H", rloc, chan, eid)]
    return sent


def packet(kind, chan, data, eid):
    if kind == "payload":
        h = b"\x00" * 20 if eid == "bad" else None
        pdu = c.encode_cc_payload(0, data, 1, h)
    else:
        pdu = c.encode_cc_header(0, hashlib.sha1(data).digest(), eid, 5000)
    return c.build_ip(SRC, chan, 253, pdu)


events = st.lists(st.one_of(
    st.tuples(st.just("payload"), st.sampled_from(CHANNELS), st.sampled_from([b"a", b"b", b"c"]),
              st.sampled_from([None, None, None, "bad"])),
    st.tuples(st.just("header"), st.sampled_from(CHANNELS), st.sampled_from([b"a", b"b", b"c"]),
              st.builds(client, st.sampled_from([1, 2, 3]), st.integers(1, 4))),
), max_size=60)


@settings(max_examples=300, deadline=None)
@given(events, st.sampled_from([0, 1, 2, 3]))
def test_itr_matches_algorithm1_reference(evs, extra):
    mc = MapCache()
    mc.load_static("".join(f"10.{a}.0.0/16 {r}\n" for a, r in RLOC_OF_AS.items()))
    itr = Itr("192.0.2.100", [parse_prefix("10.255.0.0/16")], mc, extra_payload_every=extra)
    etrs = {r: Etr([parse_prefix("10.255.0.0/16")], **OPEN_ETR) for r in RLOC_OF_AS.values()}
    got = []
    delivered = []
    for ev in evs:
        for data, (host, _port) in itr.handle_inner(packet(*ev), 0.0):
            ip = c.decode_ip(data[8:])
            pdu = c.decode_cc(ip.payload)
            if isinstance(pdu, c.CCPayload):
                got.append(("P", host, ip.dst, pdu.payload))
            else:
                got.append(("H", host, ip.dst, pdu.eid))
            delivered += etrs[host].handle_data(data)
    want = reference_itr(evs, extra)
    assert got == want
    # Algorithm 2: each header the ETRs got becomes exactly one unicast copy of its payload
    expected = []
    current = {}
    for kind, rloc, chan, x in want:
        if kind == "P":
            current[(rloc, chan)] = x
        else:
            expected.append((current[(rloc, chan)], (".".join(map(str, x)), 5000)))
    assert delivered == expected
