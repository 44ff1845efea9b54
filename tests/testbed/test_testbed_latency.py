"""``python -m deliverykit.testbed latency``: what the testbed adds to a path, measured on
real namespaces (root). The bounds are physical, not speed claims: every ping answered
on a lossless bridge, a join's first packet after the join call, every leave pruned by
the snooping bridge (the traffic stops), and a second receiver behind the same
fast-leave port keeps its traffic when the first leaves."""

from __future__ import annotations

import socket
import struct
import time

import pytest

from deliverykit.sim.validate import TESTBED_ACCESS_DELAY, TESTBED_IGMP_LATENCY
from deliverykit.testbed import Testbed, __main__ as cli, latency as L


@pytest.mark.root
def test_measure_on_a_real_testbed() -> None:
    lat = L.measure(pings=20, reps=3)
    assert len(lat.rtt.values_ms) == 20  # a lossless bridge answers every ping
    assert all(v > 0 for v in lat.rtt.values_ms)
    assert len(lat.join.values_ms) == 3 and all(v > 0 for v in lat.join.values_ms)
    # every leave pruned: the snooping bridge stopped the group toward the receiver
    assert lat.unpruned == 0 and len(lat.leave.values_ms) == 3
    assert lat.access_delay_s == pytest.approx(lat.rtt.median / 4000)
    text = L.report(lat)
    assert "UDP round trip" in text and "IGMP join" in text and "IGMP leave" in text
    assert f"{TESTBED_IGMP_LATENCY * 1e3:.3f}" in text
    assert f"{4 * TESTBED_ACCESS_DELAY * 1e3:.3f}" in text


def _member(group: str, port: int, addr: str, leave_after: int, last: int,
            deadline: float) -> list[int]:
    """Join; leave after ``leave_after`` packets; read until packet ``last`` arrives or
    ``deadline`` s pass (bounded either way): the sequence numbers received."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("", port))
    mreq = struct.pack("4s4s", socket.inet_aton(group), socket.inet_aton(addr))
    s.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, mreq)
    s.settimeout(0.05)
    t0, got, joined = time.monotonic(), [], True
    try:
        while time.monotonic() - t0 < deadline and (not got or got[-1] != last):
            if joined and len(got) >= leave_after:
                s.setsockopt(socket.IPPROTO_IP, socket.IP_DROP_MEMBERSHIP, mreq)
                joined = False
            try:
                got.append(struct.unpack("!I", s.recv(64))[0])
            except TimeoutError:
                pass
    finally:
        s.close()
    return got


def _numbered(group: str, port: int, count: int, interval: float) -> int:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 4)
    for i in range(count):
        s.sendto(struct.pack("!I", i), (group, port))
        time.sleep(interval)
    s.close()
    return count


@pytest.mark.root
def test_one_leave_behind_a_fast_leave_port_keeps_the_others() -> None:
    """M2C's testbed twins put several receivers behind one fast-leave port (fig5): the
    bridge tracks each host behind it (IGMPv3 explicit host tracking), so one host's
    leave must not cut the group off from the others. A defect here would show as a gap
    in the numbers the staying receiver gets."""
    group, port = "239.255.77.2", 47_011
    with Testbed(prefix="dklat") as tb:
        core = tb.bridge("core")
        edge = tb.bridge("edge", snooping=False, querier=False)
        tb.trunk(core, edge, fastleave=True)
        s = tb.host("s")
        tb.mroute(s, tb.attach(s, core, "10.0.78.1/24").a)
        members = []
        count = 250
        for i, leave_after in ((1, 50), (2, count + 1)):
            h = tb.host(f"r{i}")
            tb.mroute(h, tb.attach(h, edge, f"10.0.78.{10 + i}/24").a)
            members.append(tb.spawn(h, _member, group, port, f"10.0.78.{10 + i}",
                                    leave_after, count - 1, 20.0))
        tb.settle(core)
        time.sleep(0.3)
        sent = tb.run(s, _numbered, group, port, count, 0.01, timeout=30)
        leaver, stayer = (m.result(30) for m in members)
    assert sent == count
    assert stayer, "the staying receiver got nothing"
    # no gap in what the staying receiver got after its first packet
    assert stayer == list(range(stayer[0], stayer[0] + len(stayer)))
    assert stayer[-1] == sent - 1
    assert 50 <= len(leaver) < count - 20  # the leaver's traffic stopped soon after


def test_cli_refuses_bad_counts(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["latency", "--pings", "0"])
    assert "0 must be a positive integer" in capsys.readouterr().err
    with pytest.raises(ValueError, match="pings and reps"):
        L.measure(pings=0)


def test_samples_quantiles() -> None:
    s = L.Samples(tuple(float(x) for x in range(1, 11)))
    assert s.median == 5.5 and s.p10 == 2.0 and s.p90 == 10.0
    empty = L.Samples(())
    assert empty.median != empty.median  # nan: nothing measured
