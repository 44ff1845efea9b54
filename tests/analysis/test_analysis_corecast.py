"""``deliverykit analyse --only corecast`` on a captured ``corecast deploy`` (Fig. 2 on loopback).

The deployment reports its own counters (bytes on each ITR->ETR link, payload
copies per ETR, local bytes); the analyser, given a prefix-to-AS table for
the deployment's addresses, must find the same numbers in the capture, and
the unicast equivalent must be one (H_L + H_I + D) packet per client per
chunk into each AS.
"""

from __future__ import annotations

import json
import subprocess

import pytest
from analysis_support import PY, analyse, tcpdump
from hypothesis import given, settings, strategies as st

from corecast.analysis import Analyser
from deliverykit.pcap import Frame

CHUNKS = 12


@pytest.mark.root
@pytest.mark.tool("tcpdump")
@pytest.mark.slow
@pytest.mark.parametrize("transport", ["udp", "raw"])
def test_deploy_capture(tmp_path, transport):
    """``raw``: CoreCast PDUs straight over IP protocol 253 inside the tunnels, not UDP 54341."""
    cap = tmp_path / "cc.pcap"
    with tcpdump(cap, "udp"):
        r = subprocess.run([PY, "-m", "corecast", "deploy", "--chunks", str(CHUNKS), "--json",
                            "--transport", transport], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    dep = json.loads(r.stdout)
    lay = dep["layout"]
    base = ".".join(lay["source"].split(".")[:2])
    table = tmp_path / "as.csv"
    rows = ["prefix,asn", f"{base}.0.0/24,100", f"{base}.255.0/24,100"]
    for i, (etr, pfx) in enumerate(zip(lay["etrs"], lay["prefixes"])):
        rows += [f"{etr}/32,{201 + i}", f"{pfx},{201 + i}"]
    table.write_text("\n".join(rows) + "\n")
    res = analyse(cap, tmp_path, "--only", "corecast", "--opt", f"as-table={table}",
                  "--plots", str(tmp_path / "plots"))
    assert (tmp_path / "plots" / "corecast-as.png").read_bytes()[:4] == b"\x89PNG"
    res = res["results"]["corecast"]

    links = {r["rloc"]: r for r in res["corecast_links"]}
    for etr, n in zip(lay["etrs"], (len(c) for c in lay["clients"])):
        assert links[etr]["payload_packets"] == dep["payloads_per_etr"][etr] == CHUNKS
        assert links[etr]["header_packets"] == CHUNKS * n
    (ch,) = [c for c in res["corecast_channels"] if c["channel"] == lay["channel"]]
    k = dep["clients"]
    assert ch["distinct_payloads"] == CHUNKS
    assert ch["seq_first"] == 0 and ch["seq_last"] == CHUNKS - 1
    # headers: k per chunk from the source to the ITR, and k per chunk on the ITR->ETR links
    assert ch["header_packets"] == 2 * k * CHUNKS and ch["headers_without_known_payload"] == 0
    sizes = dep["sizes"]
    d = 1200
    assert ch["unicast_equivalent_bytes"] == 2 * k * CHUNKS * (sizes["h_i"] + d)

    ases = {r["asn"]: r for r in res["corecast_as"]}
    for i, (etr, clients) in enumerate(zip(lay["etrs"], lay["clients"])):
        a = ases[201 + i]
        assert a["transit_in_corecast_bytes"] == dep["transit_per_link"][etr] == \
            dep["eq3_per_link"][etr]
        assert a["cc_payload_packets_in"] == CHUNKS
        assert a["cc_header_packets_in"] == CHUNKS * len(clients)
        assert a["local_corecast_deliveries"] == CHUNKS * len(clients)
        assert a["unicast_equivalent_transit_in_bytes"] == \
            CHUNKS * len(clients) * (sizes["h_l"] + sizes["h_i"] + d)
    assert sum(ases[201 + i]["local_corecast_delivery_bytes"] for i in range(len(lay["etrs"]))) \
        == dep["local_bytes"] == dep["eq5_bytes"]
    # "unmapped": loopback traffic of anything else running on this host
    # (another deploy, another test)
    assert sum(a["transit_in_corecast_bytes"] for asn, a in ases.items() if asn != "unmapped") \
        == dep["transit_bytes"]
    assert ases[100]["local_bytes"] > 0  # source -> ITR inside the source's AS
    ctl = {r["message"]: r["packets"] for r in res["lisp_control"]}
    assert ctl.get("Map-Register", 0) >= 3 and ctl.get("Map-Notify", 0) >= 3


_frames = st.builds(
    Frame, ts=st.floats(0, 10), src=st.sampled_from(["10.0.0.1", "192.0.2.9"]),
    dst=st.sampled_from(["10.0.0.2", "192.0.2.1"]), proto=st.sampled_from([17, 253, 6]),
    sport=st.sampled_from([4341, 4342, 1234, None]),
    dport=st.sampled_from([4341, 4342, 54341, 9341, None]),
    payload=st.one_of(st.binary(max_size=120),
                      st.binary(max_size=80).map(lambda b: b"\x08\0\0\0\0\0\0\0\x45" + b)),
    length=st.integers(0, 2000))


@settings(max_examples=300, deadline=None)
@given(st.lists(_frames, max_size=30), st.booleans())
def test_fuzz_feed_never_raises(tmp_path_factory, frames, with_table):
    opts = {"max-hashes": "3", "max-channels": "2"}
    if with_table:
        p = tmp_path_factory.mktemp("as") / "t.csv"
        p.write_text("prefix,asn\n10.0.0.0/8,1\n192.0.2.0/24,AS2\njunk\n")
        opts["as-table"] = str(p)
    a = Analyser(opts)
    for f in frames:
        if a.accepts(f):
            a.feed(f)
    t = a.tables()
    assert "corecast_channels" in t and ("corecast_as" in t) == with_table


def test_direct_pdus_raw_ip_and_udp():
    """A source's PDUs straight on the wire: IP protocol 253 and UDP port 54341."""
    from corecast.wire.codec import decode_cc, encode_cc_header, encode_cc_payload
    a = Analyser({})
    for i in range(3):
        pl = encode_cc_payload(i, bytes([i]) * 500)
        h = decode_cc(pl).hash
        a.feed(Frame(float(i), "10.0.0.1", "10.255.0.1", 253, None, None, pl, 20 + len(pl)))
        for k in range(2):
            hd = encode_cc_header(i, h, bytes([10, 1, 0, k + 1]), 5000)
            f = Frame(float(i), "10.0.0.1", "10.255.0.1", 17, 40000, 54341, hd, 28 + len(hd))
            assert a.accepts(f)
            a.feed(f)
    (ch,) = a.tables()["corecast_channels"]
    assert (ch["payload_packets"], ch["distinct_payloads"], ch["header_packets"]) == (3, 3, 6)
    assert ch["unicast_equivalent_bytes"] == 6 * (28 + 500)
    assert ch["headers_without_known_payload"] == 0
