"""``deliverykit analyse --only m2c`` on a captured ``m2c send`` / ``m2c receive`` on loopback.

The sender reports its packets and UDP payload bytes, the receiver its joins,
leaves and packets; the analyser must find the same in the capture: every
M2C packet by group, the receiver's membership changes from the kernel's
IGMPv3 reports, and the packets sent to its groups while it was a member.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import time

import pytest
from analysis_support import PY, analyse, tcpdump
from hypothesis import given, settings, strategies as st

from deliverykit.pcap import Frame, Reader
from m2c.analysis import Analyser


@pytest.mark.root
@pytest.mark.tool("tcpdump")
@pytest.mark.slow
def test_send_receive_capture(tmp_path, procs):
    net = f"239.193.{random.randint(1, 250)}"
    port = random.randint(41000, 49000)
    src = tmp_path / "f.bin"
    src.write_bytes(os.urandom(200_000))
    sdp = tmp_path / "s.json"
    cap = tmp_path / "m2c.pcap"
    with tcpdump(cap, f"igmp or (udp and dst net {net}.0/24)"):
        send = subprocess.Popen([PY, "-m", "m2c", "send", str(src), "--sdp", str(sdp), "--group",
                                 f"{net}.1", "--port", str(port), "--max-rate", "8000",
                                 "--duration", "5"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        procs.append(send)
        end = time.monotonic() + 10
        while not (sdp.exists() and sdp.stat().st_size) and time.monotonic() < end:
            time.sleep(0.05)
        rx = subprocess.run([PY, "-m", "m2c", "receive", str(sdp), "-o", str(tmp_path / "out"),
                             "-q", "--timeout", "15"], capture_output=True, text=True, timeout=30)
        assert rx.returncode == 0, rx.stderr
        _, err = send.communicate(timeout=30)
    sent = json.loads(err.strip().splitlines()[-1])
    got = json.loads(rx.stdout)
    assert (tmp_path / "out").read_bytes() == src.read_bytes()

    res = analyse(cap, tmp_path, "--only", "m2c", "--plots", str(tmp_path / "plots"))
    res = res["results"]["m2c"]
    groups = [g for g in res["m2c_groups"] if g["destination"].startswith(net + ".")]
    packets = sum(g["packets"] for g in groups)
    assert packets == sent["packets"]
    assert sum(g["ip_bytes"] for g in groups) - 28 * packets == sent["bytes"]  # IPv4 + UDP
    assert all(g["psn_gaps"] == 0 for g in groups)
    assert len({g["group"] for g in groups}) == len(groups) > 1
    rates = [r for r in res["m2c_rates"] if r["group"] in {g["group"] for g in groups}]
    assert sum(r["ip_bytes"] for r in rates) == sum(g["ip_bytes"] for g in groups)
    ours = [j for j in res["m2c_joins"] if j["group"].startswith(net + ".")]
    # every change the wire shows is one the receiver made; a leave and the next join of
    # the same group inside one tick of the kernel's IGMPv3 state-change report cancel
    # out on the wire (igmpv3_del_delrec), one join and one leave each time (CI saw 23 of
    # 25 joins once), so what the wire lacks it lacks in pairs
    wire_joins = sum(j["change"] == "join" for j in ours)
    wire_leaves = sum(j["change"] == "leave" for j in ours)
    assert 0 < wire_joins <= got["joins"] and wire_leaves <= got["leaves"]
    assert got["joins"] - wire_joins == got["leaves"] - wire_leaves
    (recv,) = {j["receiver"] for j in ours}
    (row,) = [r for r in res["m2c_receivers"] if r["receiver"] == recv]
    # what was sent to its groups while it was a member, recomputed here from the join/leave
    # rows and the raw frames; it is what the receiver could get (it stops counting at
    # completion, and the kernel reports a change a little after it is in effect)
    spans: dict[str, list[list[float]]] = {}
    for j in ours:
        if j["change"] == "join":
            spans.setdefault(j["group"], []).append([j["t"], float("inf")])
        else:
            spans[j["group"]][-1][1] = j["t"]
    expect = sum(1 for f in Reader(cap) if f.proto == 17 and f.dst in spans
                 and any(t0 <= f.ts < t1 for t0, t1 in spans[f.dst]))
    assert row["packets_while_member"] == expect
    assert expect >= got["metrics"]["raw"]["packets"] // 2
    assert (tmp_path / "plots" / "m2c-group-rates.png").stat().st_size > 1000


def _igmpv3(records: list[tuple[int, str, int]]) -> bytes:
    body = b""
    for rtype, group, nsrc in records:
        body += bytes([rtype, 0]) + nsrc.to_bytes(2, "big") + bytes(map(int, group.split(".")))
        body += b"\x0a\0\0\1" * nsrc
    return b"\x22\0\0\0\0\0" + len(records).to_bytes(2, "big") + body


def test_igmp_membership_changes_counted_once():
    """v3 reports repeated for robustness, v2 report/leave: joins and leaves are state changes."""
    a = Analyser({})
    msgs = [_igmpv3([(4, "239.1.1.1", 0), (4, "239.1.1.2", 0)]),
            _igmpv3([(4, "239.1.1.1", 0), (4, "239.1.1.2", 0)]),  # robustness repeat
            _igmpv3([(3, "239.1.1.2", 0)]), _igmpv3([(3, "239.1.1.2", 0)]),
            _igmpv3([(5, "239.1.1.3", 1)]), _igmpv3([(6, "239.1.1.3", 1)])]
    for i, m in enumerate(msgs):
        a.feed(Frame(float(i), "10.0.0.5", "224.0.0.22", 2, None, None, m, 20 + len(m)))
    a.feed(Frame(9.0, "10.0.0.6", "239.1.1.9", 2, None, None,
                 b"\x16\0\0\0" + bytes([239, 1, 1, 9]), 28))
    a.feed(Frame(10.0, "10.0.0.6", "224.0.0.2", 2, None, None,
                 b"\x17\0\0\0" + bytes([239, 1, 1, 9]), 28))
    r = {x["receiver"]: x for x in a.tables()["m2c_receivers"]}
    assert (r["10.0.0.5"]["joins"], r["10.0.0.5"]["leaves"]) == (3, 1)
    assert r["10.0.0.5"]["member_at_end"] == 2  # 239.1.1.1 and the source-filtered 239.1.1.3
    assert (r["10.0.0.6"]["joins"], r["10.0.0.6"]["leaves"]) == (1, 1)


def test_mld_membership_changes():
    """IPv6: MLDv2 records (RFC 3810) and MLDv1 report/done (RFC 2710)."""
    import ipaddress
    g1, g2 = ipaddress.IPv6Address("ff0e::1234").packed, ipaddress.IPv6Address("ff0e::99").packed

    def v2(rtype: int, group: bytes) -> bytes:
        return b"\x8f\0\0\0\0\0\0\1" + bytes([rtype, 0, 0, 0]) + group

    a = Analyser({})
    msgs = [v2(4, g1), v2(4, g1), v2(3, g1), b"\x83\0\0\0\0\0\0\0" + g2,
            b"\x84\0\0\0\0\0\0\0" + g2, b"\x8f\0\0\0\0\0\0\5\4"]
    for i, m in enumerate(msgs):
        f = Frame(float(i), "fe80::1", "ff02::16", 58, None, None, m, 40 + len(m))
        assert a.accepts(f)
        a.feed(f)
    t = a.tables()
    (r,) = t["m2c_receivers"]
    assert (r["joins"], r["leaves"], r["groups"]) == (2, 2, 2)
    errs = {e["what"]: e["count"] for e in t["m2c_errors"]}
    assert errs["igmp_malformed"] == 1 and errs["igmp mldv2 report"] == 4


_frames = st.builds(
    Frame, ts=st.floats(0, 100), src=st.sampled_from(["10.0.0.1", "0.0.0.0"]),
    dst=st.sampled_from(["239.1.1.1", "10.0.0.2", "224.0.0.22"]),
    proto=st.sampled_from([17, 2, 58]),
    sport=st.just(5000), dport=st.just(47000),
    payload=st.one_of(st.binary(max_size=120),
                      st.binary(max_size=100).map(lambda b: b"\x10\xa0" + b),
                      st.binary(max_size=60).map(lambda b: b"\x22\0\0\0\0\0\0\3" + b),
                      st.binary(max_size=90).map(lambda b: b"\x8f\0\0\0\0\0\0\3" + b)),
    length=st.integers(0, 2000))


@settings(max_examples=300, deadline=None)
@given(st.lists(_frames, max_size=30))
def test_fuzz_feed_never_raises(frames):
    a = Analyser({"max-groups": "2", "max-rows": "5"})
    for f in frames:
        if a.accepts(f):
            a.feed(f)
    assert "m2c_groups" in a.tables()
