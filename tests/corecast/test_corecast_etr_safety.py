"""The ETR is no open relay (issue 13 items 1 and 15): it decapsulates only for its own site's
EIDs, only from trusted RLOCs, answers Map-Requests only towards trusted RLOCs, and says so
in one line when its registration keeps failing."""

from __future__ import annotations

import ipaddress
import json
import random
import signal
import socket
import subprocess
import sys

import pytest

from corecast.core.etr import Etr
from corecast.core.maptrie import parse_prefix
from corecast.core.register import Registrar, RegistrarConfig
from corecast.wire import codec as c

PY = [sys.executable, "-m", "corecast"]
A = ipaddress.ip_address
CC = [parse_prefix("10.255.0.0/16")]
SITE = [parse_prefix("10.2.0.0/16")]
ITR = A("192.0.2.100").packed
LISP = b"\x00" * 8


def plain(dst: str, port: int = 7777, body: bytes = b"relay me") -> bytes:
    return LISP + c.build_ip(A("10.0.0.1").packed, A(dst).packed, 17, c.build_udp(1, port, body))


def cc_pair(eid: str, media: bytes = b"media") -> tuple[bytes, bytes]:
    chan = A("10.255.0.1").packed
    h = c.digest(1, media)
    pay = c.build_ip(A("10.0.0.1").packed, chan, 253, c.encode_cc_payload(0, media))
    hdr = c.build_ip(A("10.0.0.1").packed, chan, 253, c.encode_cc_header(0, h, A(eid).packed, 5000))
    return LISP + pay, LISP + hdr


def test_plain_packets_only_to_this_sites_eids():
    e = Etr(CC, eids=SITE, trusted_rlocs=[(ITR, 32)])
    assert e.handle_data(plain("10.2.0.9"), 0, ITR) == [(b"relay me", ("10.2.0.9", 7777))]
    for outside in ("127.0.0.1", "8.8.8.8", "10.3.0.1", "224.0.0.1", "255.255.255.255"):
        assert e.handle_data(plain(outside), 0, ITR) == []
    assert e.drops()["not_our_eid"] == 5 and e.counters["plain_delivered"] == 1


def test_corecast_headers_only_to_this_sites_eids():
    e = Etr(CC, eids=SITE, trusted_rlocs=[(ITR, 32)])
    pay, hdr = cc_pair("10.2.0.3")
    assert e.handle_data(pay, 0, ITR) == []
    assert e.handle_data(hdr, 0, ITR) == [(b"media", ("10.2.0.3", 5000))]
    _, evil = cc_pair("198.51.100.7")
    assert e.handle_data(evil, 0, ITR) == [] and e.drops()["not_our_eid"] == 1


def test_only_trusted_rlocs_are_decapsulated():
    e = Etr(CC, eids=SITE, trusted_rlocs=[(ITR, 32)])
    for src in (A("192.0.2.101").packed, None):
        assert e.handle_data(plain("10.2.0.9"), 0, src) == []
    assert e.drops()["untrusted_rloc"] == 2 and e.counters["plain_delivered"] == 0
    # the safe default: an ETR told nothing trusts no RLOC and serves no EID
    bare = Etr(CC)
    assert bare.handle_data(plain("10.2.0.9"), 0, ITR) == [] and bare.drops()["untrusted_rloc"] == 1
    assert Etr(CC, trusted_rlocs=None).handle_data(plain("10.2.0.9"), 0, ITR) == []


def test_map_replies_go_only_to_trusted_itr_rlocs():
    reg = Registrar(RegistrarConfig(("10.2.0.0/16",), ("192.0.2.2",), ("192.0.2.200", 4342), b"k"))
    trusted = {"192.0.2.100"}
    for itr_rloc, answered in (("192.0.2.100", True), ("203.0.113.66", False)):
        req = c.encode_map_request(c.MapRequest(
            7, (A(itr_rloc),), (ipaddress.ip_network("10.2.0.5/32"),), source_eid=None))
        out = reg.answer(req, 0.0, 4342, allow=lambda h: h in trusted)
        assert bool(out) is answered and all(dst[0] in trusted for _, dst in out)
    assert reg.counters["requests_refused"] == 1 and reg.counters["map_replies"] == 1


def _stderr_line(p: subprocess.Popen) -> str:
    line = p.stderr.readline()
    assert line, p.stderr.read()
    return line


def _recv_socket(host: str) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((host, 0))
    s.settimeout(10)
    return s


def test_live_etr_is_not_an_open_relay():
    """The issue's reproduction: inner packets to 127.0.0.1 or from an untrusted RLOC go nowhere."""
    b = random.randint(1, 250)
    rloc, itr, stranger = f"127.83.{b}.1", f"127.83.{b}.2", f"127.83.{b}.9"
    etr = subprocess.Popen(PY + ["etr", "--rloc", rloc, "--prefix", "127.83.11.0/24", "--cc-range",
                                 "127.83.255.0/24", "--trust-rloc", itr, "--duration", "30"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    outside, inside = _recv_socket("127.0.0.1"), _recv_socket("127.83.11.5")
    try:
        assert " ready " in _stderr_line(etr)
        for host, (dst, port) in ((itr, outside.getsockname()), (stranger, inside.getsockname()),
                                  (itr, inside.getsockname())):
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as tx:
                tx.bind((host, 0))
                tx.sendto(plain(dst, port, f"to {dst} from {host}".encode()), (rloc, 4341))
        # the last one (trusted, in-site) arrives; the ETR handles its socket in order, so
        # the two before it have been handled (and dropped) by now
        assert inside.recv(2048) == f"to 127.83.11.5 from {itr}".encode()
        outside.setblocking(False)
        inside.setblocking(False)
        for s in (outside, inside):
            with pytest.raises(BlockingIOError):
                s.recv(2048)
        etr.send_signal(signal.SIGTERM)
        out, err = etr.communicate(timeout=15)
        assert etr.returncode == 143, err
        counters = json.loads(out)["counters"]
        assert counters["drop_not_our_eid"] == 1 and counters["drop_untrusted_rloc"] == 1
        assert counters["plain_delivered"] == 1
    finally:
        if etr.poll() is None:
            etr.kill()
            etr.communicate(timeout=5)
        outside.close()
        inside.close()


def test_etr_requires_a_trust_choice():
    r = subprocess.run(PY + ["etr", "--rloc", "127.0.0.1", "--prefix", "10.1.0.0/16",
                             "--cc-range", "10.255.0.0/16", "--duration", "1"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "--trust-rloc" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("with_mapserver", [True, False], ids=["wrong-psk", "no-map-server"])
def test_failed_registration_is_one_error_line_and_exit_1(with_mapserver):
    b = random.randint(1, 250)
    ms_addr = f"127.84.{b}.3"
    procs = []
    try:
        if with_mapserver:
            ms = subprocess.Popen(PY + ["mapserver", "--addr", ms_addr,
                                        "--site", "as1:10.1.0.0/16:1:right", "--duration", "30"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            procs.append(ms)
            assert " ready " in _stderr_line(ms)
        r = subprocess.run(PY + ["etr", "--rloc", f"127.84.{b}.1", "--prefix", "10.1.0.0/16",
                                 "--cc-range", "10.255.0.0/16", "--trust-rloc", f"127.84.{b}.2",
                                 "--map-server", ms_addr, "--key-id", "1", "--psk", "wrong",
                                 "--register-retries", "1"],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 1, r.stderr
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1, lines
        assert lines[0].startswith("corecast: error: etr: no Map-Notify from " + ms_addr)
        assert "wrong --psk or --key-id" in lines[0] and "unreachable" in lines[0]
        final = json.loads(r.stdout)
        # the first try and its retry; a loaded machine may fit one more before the give-up
        assert final["registered"] is False and final["registrar"]["sent"] >= 2
    finally:
        for p in procs:
            p.terminate()
            p.communicate(timeout=15)


def test_map_resolver_answers_only_the_itr_rloc_that_asked():
    """The ITR-RLOC field names where the Map-Reply goes: the map-resolver answers only when it
    is the request's own source address, so nobody can aim replies at a third party."""
    from corecast.core.mapserver import MapServer, Site

    ms = MapServer([Site("s", {1: b"k"}, (ipaddress.ip_network("10.2.0.0/16"),))])
    eid = (ipaddress.ip_network("10.2.0.5/32"),)
    forged = c.encode_map_request(c.MapRequest(1, (A("198.51.100.9"),), eid))
    assert ms.handle(forged, ("192.0.2.100", 4342), 0.0) == []
    assert ms.counters["refused_itr_rloc"] == 1
    ecm = c.ecm_wrap(forged, A("198.51.100.9").packed, A("10.2.0.5").packed, 4342)
    assert ms.handle(ecm, ("192.0.2.100", 4342), 0.0) == [] and ms.counters["refused_itr_rloc"] == 2
    honest = c.encode_map_request(c.MapRequest(2, (A("198.51.100.9"), A("192.0.2.100")), eid))
    (reply, dst), = ms.handle(honest, ("192.0.2.100", 4342), 0.0)
    assert dst == ("192.0.2.100", 4342) and c.decode_control(reply).nonce == 2


def test_destination_port_zero_is_malformed_not_a_failed_send():
    """Found by the fuzzer (strace showed sendmmsg EINVAL): port 0 is counted, never sent."""
    e = Etr(CC, eids=SITE, trusted_rlocs=[(ITR, 32)])
    assert e.handle_data(plain("10.2.0.9", 0), 0, ITR) == []
    pay, _ = cc_pair("10.2.0.3")
    e.handle_data(pay, 0, ITR)
    chan, media = A("10.255.0.1").packed, b"media"
    zero = LISP + c.build_ip(A("10.0.0.1").packed, chan, 253,
                             c.encode_cc_header(0, c.digest(1, media), A("10.2.0.3").packed, 0))
    assert e.handle_data(zero, 0, ITR) == []
    assert e.drops()["malformed"] == 2


def test_itr_installs_only_reply_records_covering_the_eid_it_asked_for():
    """A Map-Reply may carry other records; one not covering the requested EID (here
    198.51.100.0/24 to a stranger's RLOC) would steer traffic nobody asked about: refused."""
    from corecast.core.itr import Itr
    from corecast.core.mapcache import MapCache

    itr = Itr("192.0.2.100", CC, MapCache(), map_resolver=("192.0.2.200", 4342), seed=1)
    inner = c.build_ip(A("10.0.0.1").packed, A("10.2.0.9").packed, 17, c.build_udp(1, 7, b"x"))
    (ecm, _), = itr.handle_inner(inner, 0.0)
    _ip, _sp, _dp, req = c.ecm_unwrap(c.decode_control(ecm))
    nonce = c.decode_control(req).nonce
    good = c.EidRecord(ipaddress.ip_network("10.2.0.0/16"), (c.LocatorRecord(A("192.0.2.2")),), 10)
    evil = c.EidRecord(ipaddress.ip_network("198.51.100.0/24"),
                       (c.LocatorRecord(A("203.0.113.66")),), 10)
    out = itr.handle_control(c.encode_map_reply(c.MapReply(nonce, (evil, good))), 0.1)
    assert [dst for _, dst in out] == [("192.0.2.2", 4341)]  # the queued packet, to the right RLOC
    assert itr.counters["reply_records_refused"] == 1
    other = c.build_ip(A("10.0.0.1").packed, A("198.51.100.1").packed, 17, c.build_udp(1, 7, b"y"))
    assert all(dst[0] != "203.0.113.66" for _, dst in itr.handle_inner(other, 0.2))


def test_itr_says_once_when_its_map_resolver_never_answers():
    b = random.randint(1, 250)
    pre = f"127.91.{b}"
    itr = subprocess.Popen(PY + ["itr", "--rloc", f"{pre}.2", "--inside", f"{pre}.2:9341",
                                 "--cc-range", "10.255.0.0/16", "--map-resolver", f"{pre}.3",
                                 "--duration", "30"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert " ready " in _stderr_line(itr)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as tx:
            tx.sendto(plain("10.2.0.9")[8:], (f"{pre}.2", 9341))
        warning = _stderr_line(itr)
        assert warning.startswith("corecast itr: warning: 3 Map-Requests to ")
        assert "no Map-Reply" in warning
        itr.send_signal(signal.SIGTERM)
        out, err = itr.communicate(timeout=15)
        assert itr.returncode == 143 and err == ""  # said once
        assert json.loads(out)["counters"]["map_replies"] == 0
    finally:
        if itr.poll() is None:
            itr.kill()
            itr.communicate(timeout=5)


def test_send_failures_show_in_the_role_counters():
    """A datagram the kernel refuses is counted in the role's JSON ("sockets"), not lost
    silently."""
    import asyncio

    from corecast.aio.nodes import Node, bind

    async def run() -> dict:
        node = Node()
        tr = await bind("127.0.0.1", 0, lambda d, a: None)
        node.transports.append(tr)
        node._sendto(tr, b"x", ("127.0.0.1", 0), False)  # port 0: EINVAL
        node._sendto(tr, b"x", tr.get_extra_info("sockname"), False)
        await node.close()
        return {**node.socket_stats(), "send_errors": node.send_errors}

    st = asyncio.run(run())
    assert st["socket_errors"] == 1 and st["tx_dropped"] == 1 and st["tx_packets"] == 1
    assert st["send_errors"] == 1


def test_a_lost_registration_is_said():
    """The map-server goes away after the ETR registered: one warning line, not silence."""
    b = random.randint(1, 250)
    ms_addr = f"127.95.{b}.3"
    ms = subprocess.Popen(PY + ["mapserver", "--addr", ms_addr, "--site", "as1:10.1.0.0/16:1:k",
                                "--duration", "30"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    etr = subprocess.Popen(PY + ["etr", "--rloc", f"127.95.{b}.1", "--prefix", "10.1.0.0/16",
                                 "--cc-range", "10.255.0.0/16", "--trust-rloc", f"127.95.{b}.2",
                                 "--map-server", ms_addr,
                                 "--key-id", "1", "--psk", "k", "--register-interval", "0.2",
                                 "--register-retries", "1", "--duration", "40"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert " ready " in _stderr_line(ms)
        assert " ready " in _stderr_line(etr)
        ms.terminate()
        ms.communicate(timeout=15)
        line = _stderr_line(etr)
        assert line.startswith("corecast etr: warning: registration lost: ") and ms_addr in line
        etr.send_signal(signal.SIGTERM)
        out, err = etr.communicate(timeout=15)
        assert etr.returncode == 143 and "warning" not in err  # said once
    finally:
        for p in (ms, etr):
            if p.poll() is None:
                p.kill()
                p.communicate(timeout=5)
