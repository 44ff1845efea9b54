"""Live interop with Open Overlay Router in network namespaces (issue 15 item 3; opt-in, not CI).

Set ``OOR_BIN`` to an ``oor`` binary (built as docs/conformance.md says) and run as root.
OOR decapsulates every UDP/4341 packet of its host through a raw socket, so it runs
only inside namespaces these tests create (veth, no route out), never on the host.

* OOR (as xTR, ``key-type = 1``, ``key = testkey``, EID 192.0.2.0/24) registers with our
  map-server configured the way OOR's docs suggest (site Key ID 1).
* Data both ways: OOR encapsulates to our ETR (it resolves 198.51.100.0/24 through our
  map-resolver with an ECM Map-Request), our ITR encapsulates to OOR.
* Our ETR (``--profile oor``) registers with OOR's map-server (operating-mode MS).

Topology (addresses as in ../shared/captures/oor): host ``a`` runs OOR at 10.201.0.1
(interface vA, its EID 192.0.2.1 on lo); host ``b`` runs our map-server at 10.201.0.2 and
our ETR/ITR at 10.201.0.3 (EID 198.51.100.7 on lo); host ``m`` runs OOR's map-server at
10.202.0.1, linked to ``b`` (10.202.0.2).
"""

from __future__ import annotations

import ipaddress
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from corecast.wire.codec import build_ip, build_udp

OOR_BIN = os.environ.get("OOR_BIN", "")
pytestmark = [
    pytest.mark.live_peer("OOR_BIN"),  # opt-in: deselected without $OOR_BIN (tests/conftest.py)
    pytest.mark.slow,
]
PY = sys.executable
OOR_START = 3.4  # OOR ignores tunnel traffic for about this long after it starts (field notes)
A_EID, B_EID = "192.0.2.1", "198.51.100.7"

XTR_CONF = """\
debug = 3
log-file = oor.log
map-request-retries = 1
operating-mode = xTR
encapsulation = LISP
rloc-probing {
    rloc-probe-interval = 0
    rloc-probe-retries = 0
    rloc-probe-retries-interval = 5
}
map-resolver = {
    10.201.0.2
}
map-server {
    address = 10.201.0.2
    key-type = 1
    key = testkey
    proxy-reply = on
}
database-mapping {
    eid-prefix = 192.0.2.0/24
    iid = 0
    ttl = 10
    rloc-iface {
        interface = vA
        ip_version = 4
        priority = 1
        weight = 100
    }
}
"""

MS_CONF = """\
debug = 3
log-file = oor.log
operating-mode = MS
control-iface = vM
lisp-site {
    eid-prefix = 198.51.100.0/24
    key-type = 1
    key = testkey
    iid = 0
    accept-more-specifics = true
    proxy-reply = true
}
"""


def _a_side(tries: int = 60) -> list[bytes]:
    """In OOR's namespace: send from OOR's EID to ours until two answers come back."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((A_EID, 5000))
    s.settimeout(0.5)
    got: list[bytes] = []
    try:
        for i in range(tries):
            s.sendto(b"from-oor %d" % i, (B_EID, 6000))
            try:
                got.append(s.recvfrom(2000)[0])
            except TimeoutError:
                continue
            if len(got) >= 2:
                break
    finally:
        s.close()
    return got


def _b_side(inside: tuple[str, int], tries: int = 60) -> list[bytes]:
    """In our namespace: hand inner packets to our ITR, collect what OOR's packets deliver."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((B_EID, 6000))
    s.settimeout(0.5)
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    got: list[bytes] = []
    try:
        for i in range(tries):
            inner = build_ip(ipaddress.ip_address(B_EID).packed, ipaddress.ip_address(A_EID).packed,
                             17, build_udp(6000, 5000, b"to-oor %d" % i))
            tx.sendto(inner, inside)
            try:
                got.append(s.recvfrom(2000)[0])
            except TimeoutError:
                continue
            if len(got) >= 2:
                break
    finally:
        s.close()
        tx.close()
    return got


def _final_json(proc: subprocess.Popen, timeout: float = 60.0) -> tuple[dict, str]:
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, f"exit {proc.returncode}: {err[-1500:]}"
    return json.loads(out), err


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@pytest.fixture
def testbed():
    from deliverykit.testing import require_root

    require_root()
    from deliverykit.testbed import Testbed

    with Testbed(prefix="ccoor") as tb:
        yield tb


def test_oor_registers_with_our_map_server_and_data_flows_both_ways(testbed, tmp_path):
    tb = testbed
    a, b = tb.host("a"), tb.host("b")
    tb.link(a, b, "10.201.0.1/24", "10.201.0.2/24", ifname_a="vA", ifname_b="vB")
    tb.address(b, "vB", "10.201.0.3/24")
    tb.address(a, "lo", f"{A_EID}/32")
    tb.address(b, "lo", f"{B_EID}/32")
    (tmp_path / "oor.conf").write_text(XTR_CONF)
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True}
    # the site configured as OOR's docs suggest: key-type = 1 -> Key ID 1
    ms = tb.popen(b, [PY, "-m", "corecast", "mapserver", "--addr", "10.201.0.2",
                      "--site", "oor:192.0.2.0/24:1:testkey",
                      "--site", "ours:198.51.100.0/24:1:testkey", "--duration", "30"], **pipes)
    time.sleep(1.0)
    etr = tb.popen(b, [PY, "-m", "corecast", "etr", "--rloc", "10.201.0.3",
                       "--prefix", "198.51.100.0/24", "--map-server", "10.201.0.2",
                       "--key-id", "1", "--psk", "testkey",
                       "--cc-range", "232.0.0.0/8", "--trust-rloc", "10.201.0.1/32",
                       "--duration", "27"], **pipes)
    itr = tb.popen(b, [PY, "-m", "corecast", "itr", "--rloc", "10.201.0.3",
                       "--inside", "10.201.0.3:7000", "--map-resolver", "10.201.0.2",
                       "--control-port", "4344",
                       "--cc-range", "232.0.0.0/8", "--duration", "27"], **pipes)
    oor = tb.popen(a, [OOR_BIN, "-f", str(tmp_path / "oor.conf")], cwd=tmp_path,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(OOR_START + 0.6)
        to_ours = tb.spawn(a, _a_side)
        to_oor = tb.spawn(b, _b_side, ("10.201.0.3", 7000))
        got_by_oor, got_by_us = to_ours.result(60), to_oor.result(60)
        ms_out, ms_err = _final_json(ms)
        etr_out, _ = _final_json(etr)
        itr_out, _ = _final_json(itr)
    finally:
        _stop(oor)
        for p in (ms, etr, itr):
            _stop(p)
    oor_regs = [r for r in ms_out["registrations"] if r["site"] == "oor"]
    assert oor_regs and oor_regs[0]["rlocs"] == ["10.201.0.1"], ms_out["registrations"]
    assert ms_out["counters"]["auth_old_style_key_id"] >= 1
    assert "RFC 6833's 16-bit Key ID 1" in ms_err
    assert etr_out["registered"] is True
    assert any(p.startswith(b"from-oor") for p in got_by_us), "OOR -> our ETR: nothing delivered"
    assert any(p.startswith(b"to-oor") for p in got_by_oor), "our ITR -> OOR: nothing delivered"
    assert itr_out["role"] == "itr"


def _ecm_map_request(eid: str, me: str, ms: tuple[str, int]) -> list[str]:
    """An Encapsulated Map-Request from ``me`` to the map-server; the RLOCs of the reply."""
    from corecast.wire.codec import (
        MapReply,
        MapRequest,
        decode_control,
        ecm_wrap,
        encode_map_request,
    )

    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((me, 4342))  # OOR answers at the ITR-RLOC's port 4342
    s.settimeout(1.0)
    try:
        for nonce in range(1, 11):
            m = MapRequest(nonce, (ipaddress.ip_address(me),), (ipaddress.ip_network(f"{eid}/32"),))
            s.sendto(ecm_wrap(encode_map_request(m), ipaddress.ip_address(me).packed,
                              ipaddress.ip_address(eid).packed, 4342), ms)
            try:
                data = s.recvfrom(4096)[0]
            except TimeoutError:
                continue
            msg = decode_control(data)
            if isinstance(msg, MapReply) and msg.nonce == nonce:
                return [str(loc.locator) for r in msg.records for loc in r.locators]
    finally:
        s.close()
    return []


def test_our_etr_registers_with_oor_map_server(testbed, tmp_path):
    """``corecast etr --profile oor`` (Key ID bytes 00 01, 20-byte HMAC-SHA-1) is acknowledged by
    OOR's map-server, which then answers Map-Requests for our prefix with our RLOC."""
    tb = testbed
    m, b = tb.host("m"), tb.host("b")
    tb.link(m, b, "10.202.0.1/24", "10.202.0.2/24", ifname_a="vM", ifname_b="vB")
    tb.address(b, "vB", "10.202.0.3/24")  # the ITR asking OOR's map-resolver (our ETR has .2:4342)
    (tmp_path / "ms.conf").write_text(MS_CONF)
    oor = tb.popen(m, [OOR_BIN, "-f", str(tmp_path / "ms.conf")], cwd=tmp_path,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(1.0)
        etr = tb.popen(b, [PY, "-m", "corecast", "etr", "--rloc", "10.202.0.2",
                           "--prefix", "198.51.100.0/24", "--map-server", "10.202.0.1",
                           "--profile", "oor", "--psk", "testkey",
                           "--cc-range", "232.0.0.0/8", "--trust-rloc", "10.202.0.1/32",
                           "--register-retries", "5", "--duration", "8"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(3.0)
        rlocs = tb.run(b, _ecm_map_request, B_EID, "10.202.0.3", ("10.202.0.1", 4342), timeout=30)
        out, err = _final_json(etr)
    finally:
        _stop(oor)
    assert out["registered"] is True, err[-1500:]
    assert out["registrar"]["notified"] >= 1
    assert rlocs == ["10.202.0.2"], f"OOR's map-server answered {rlocs}"


def test_rfc9301_default_is_refused_by_oor_map_server(testbed, tmp_path):
    """Without the profile (12-byte HMAC-SHA-1-96 with Key ID 1 / Algorithm 1) OOR's map-server
    never acknowledges: the profile is what makes it work (etr-to-oor-alg1.pcap)."""
    tb = testbed
    m, b = tb.host("m"), tb.host("b")
    tb.link(m, b, "10.202.0.1/24", "10.202.0.2/24", ifname_a="vM", ifname_b="vB")
    (tmp_path / "ms.conf").write_text(MS_CONF)
    oor = tb.popen(m, [OOR_BIN, "-f", str(tmp_path / "ms.conf")], cwd=tmp_path,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(1.0)
        etr = tb.popen(b, [PY, "-m", "corecast", "etr", "--rloc", "10.202.0.2",
                           "--prefix", "198.51.100.0/24", "--map-server", "10.202.0.1",
                           "--key-id", "1", "--algorithm-id", "1",
                           "--psk", "testkey", "--cc-range", "232.0.0.0/8",
                           "--trust-rloc", "10.202.0.1/32", "--register-retries", "2"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        _out, err = etr.communicate(timeout=60)
    finally:
        _stop(oor)
    assert etr.returncode == 1, f"registered without the profile? {err[-800:]}"
    assert Path(tmp_path / "ms.conf").exists()
