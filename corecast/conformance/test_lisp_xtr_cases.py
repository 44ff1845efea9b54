"""LISP data-plane cases beyond plain encapsulation (RFC 9300): echo-nonce between
xTRs (sec. 10.1), instance IDs in the data plane (sec. 5.3, 8) and in the mapping
system (RFC 8060 sec. 4.1 LCAF Instance ID in Map-Register/Map-Request), and an
xTR under test running in its own network namespace (root).

The cases play the remote xTR / the map-server clients with UDP sockets and
:mod:`corecast.wire.codec`, as in ``test_lisp_cases``.
"""

from __future__ import annotations

import ipaddress
import socket
import time

import pytest

from corecast.conformance.caps import LispCaps, caps_of
from corecast.conformance.test_lisp_cases import (
    KEY_ID,
    LOCAL_EID_PREFIX,
    PSK,
    EtrRig,
    ItrRig,
    _free_udp_port,
    _recv_map_request,
    net,  # noqa: F401 (a fixture: pytest finds it by name in this module)
)
from corecast.wire.codec import (
    FLAG_E,
    FLAG_I,
    FLAG_N,
    FLAG_V,
    DecodeError,
    EidRecord,
    LispDataHeader,
    LocatorRecord,
    MapRegister,
    MapReply,
    MapRequest,
    build_ip,
    build_udp,
    decode_control,
    decode_lisp_data,
    ecm_wrap,
    encode_lisp_data,
    encode_map_reply,
    encode_map_request,
    make_lisp_data,
)
from corecast.wire.constants import LispType

PEER_NONCE = 0x5A5A5A
A = ipaddress.ip_address


def _recv(sock: socket.socket, timeout: float) -> bytes | None:
    sock.settimeout(max(0.01, timeout))
    try:
        return sock.recvfrom(65536)[0]
    except TimeoutError:
        return None


def echo_exchange(xtr_rloc: str, inside: tuple[str, int], data_port: int, peer_rloc: str,
                  eid: str, wait: float = 3.0) -> dict:
    """Play the remote xTR at ``peer_rloc``:4341 (``eid`` maps to it in the xTR under
    test).  Returns what was seen; the cases judge.  Runs in any namespace (the
    netns case forks it into the peer's)."""
    etr = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    client = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    seen: dict = {"forwarded": False, "echo_of_ours": None, "their_request": None,
                  "request_nonces": [], "e_after_echo": None, "headers": 0}
    try:
        etr.bind((peer_rloc, 4341))
        client.bind((peer_rloc, 0))
        cport = client.getsockname()[1]

        def inner_to_client(payload: bytes) -> bytes:
            return build_ip(A("10.5.0.9").packed, A(peer_rloc).packed, 17,
                            build_udp(40000, cport, payload))

        def into_xtr(payload: bytes) -> LispDataHeader | None:
            tx.sendto(build_ip(A("10.9.0.1").packed, A(eid).packed, 17,
                               build_udp(40000, 9999, payload)), inside)
            got = _recv(etr, 1.0)
            if got is None:
                return None
            seen["headers"] += 1
            return decode_lisp_data(got)[0]

        # 1. we ask for an echo (N+E); the packet itself must be forwarded as normal
        hdr = encode_lisp_data(make_lisp_data(nonce=PEER_NONCE, echo=True))
        etr.sendto(hdr + inner_to_client(b"echo-request"), (xtr_rloc, data_port))
        seen["forwarded"] = _recv(client, wait) == b"echo-request"
        # 2. its next packet to us carries our nonce back: N set, E clear
        h = into_xtr(b"first")
        if h is not None:
            seen["echo_of_ours"] = (bool(h.flags & FLAG_N), bool(h.flags & FLAG_E), h.nonce)
        # 3. it asks us (N+E, one nonce for the request state) ...
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and seen["their_request"] is None:
            h = into_xtr(b"more")
            if h is not None and h.flags & FLAG_N and h.flags & FLAG_E:
                seen["their_request"] = h.nonce
            time.sleep(0.05)
        if seen["their_request"] is not None:
            for _ in range(3):
                h = into_xtr(b"still")
                if h is not None and h.flags & FLAG_E:
                    seen["request_nonces"].append(h.nonce)
            # ... we echo it (N set, E clear) and its request state ends
            back = encode_lisp_data(make_lisp_data(nonce=seen["their_request"]))
            etr.sendto(back + inner_to_client(b"echo"), (xtr_rloc, data_port))
            # its inner packet delivered: the xTR has read the echo (no sleep needed)
            _recv(client, wait)
            flags = []
            for _ in range(5):
                h = into_xtr(b"after")
                if h is not None:
                    flags.append(bool(h.flags & FLAG_E))
            seen["e_after_echo"] = any(flags) if flags else None
    finally:
        for s in (etr, client, tx):
            s.close()
    return seen


def _judge_echo(seen: dict) -> None:
    assert seen["forwarded"], "a packet with N+E was not decapsulated and delivered as normal"
    assert seen["echo_of_ours"] is not None, "nothing encapsulated to the peer RLOC"
    n, e, nonce = seen["echo_of_ours"]
    assert n and not e and nonce == PEER_NONCE, (
        f"our nonce not echoed with N set and E clear (N={n} E={e} nonce={nonce:#x})")
    assert seen["their_request"] is not None, "the xTR never asked for an echo (N+E)"
    assert all(x == seen["their_request"] for x in seen["request_nonces"]), (
        "the nonce changed within one Echo-Nonce-request state")
    assert seen["e_after_echo"] is False, "still requesting after its nonce was echoed"


class XtrRig(ItrRig):
    """ItrRig whose implementation is also an ETR on ``--data-port`` (an xTR)."""

    def __init__(self, impl, tmp_path, extra: tuple = (), resolver: bool = False) -> None:
        self.data_port = _free_udp_port()
        super().__init__(impl, tmp_path, resolver=resolver,
                         extra=("--data-port", self.data_port, *extra))


@pytest.mark.conformance(protocol="lisp", section="RFC 9300 sec. 10.1, 5.3", role="itr")
def test_xtr_echo_nonce(impl, tmp_path):
    """An xTR with echo-nonce on: it echoes a peer's requested nonce on its next packet
    to that peer (N set, E clear); it requests echoes itself (N+E, one nonce per
    request state) and stops once the nonce comes back."""
    rig = XtrRig(impl, tmp_path, extra=("--echo-nonce",))
    with rig:
        for s in rig.etrs:  # the exchange binds the peer's port 4341 itself
            s.close()
        seen = echo_exchange("127.0.0.1", rig.inside, rig.data_port, rig.rlocs[0], "10.5.1.1")
        rig.etrs = []
    _judge_echo(seen)


@pytest.mark.conformance(protocol="lisp", section="RFC 9302 sec. 4, 6, 7.1", role="itr")
def test_xtr_map_versioning(impl, tmp_path):
    """An xTR with Map-Version 10 learns a mapping with Map-Version 9 from a Map-Reply:
    its packets there carry V with Source 10 and Dest 9.  Packets to it with a Dest
    Map-Version newer than 10 are dropped; with 10 delivered; with an older one
    delivered and the sender's RLOC gets a Solicit-Map-Request."""
    rig = XtrRig(impl, tmp_path, extra=("--map-version", 10), resolver=True)
    peer = rig.rlocs[2]
    smr_sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    client = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        smr_sock.bind((peer, 4342))
        client.bind((peer, 0))
        with rig:
            rig.send(rig.inner("10.8.1.1", b"first"))
            got = _recv_map_request(rig.mr, 3.0)
            assert got is not None, "no Map-Request for an unmapped EID"
            req, sport, _src = got
            rec = EidRecord(ipaddress.ip_network("10.8.0.0/16"),
                            (LocatorRecord(A(peer), 1, 100, 255, 0, False, False, True),), 5, 0,
                            False, 9)
            rig.mr.sendto(
                encode_map_reply(MapReply(req.nonce, (rec,))), (str(req.itr_rlocs[0]), sport)
            )
            heads = []
            for k in range(10):
                rig.send(rig.inner("10.8.1.1", b"v%d" % k))
                heads += [decode_lisp_data(d)[0] for d in rig.at(2, 0.3)]
                if heads:
                    break
            assert heads, "no traffic to the mapped RLOC after the Map-Reply"
            h = heads[-1]
            assert h.flags & FLAG_V and not h.flags & FLAG_N, f"flags {h.flags:#x}"
            assert h.map_versions == (10, 9), h.map_versions

            cport = client.getsockname()[1]

            def send(dst_v: int, tag: bytes) -> None:
                inner = build_ip(
                    A("10.8.1.1").packed, A(peer).packed, 17, build_udp(40000, cport, tag)
                )
                hdr = encode_lisp_data(make_lisp_data(map_versions=(9, dst_v)))
                rig.etrs[2].sendto(hdr + inner, ("127.0.0.1", rig.data_port))

            def until(marker: bytes, timeout: float = 3.0) -> list[bytes]:
                got: list[bytes] = []
                deadline = time.monotonic() + timeout
                while marker not in got and time.monotonic() < deadline:
                    d = _recv(client, deadline - time.monotonic())
                    if d is None:
                        break
                    got.append(d)
                return got

            # the dropped packet, then a marker that must arrive: no waiting for nothing
            send(11, b"newer")
            send(10, b"same")
            got = until(b"same")
            assert b"same" in got, "a packet with our own Dest Map-Version was not delivered"
            assert b"newer" not in got, "a Dest Map-Version newer than ours was delivered"
            send(9, b"older")
            assert until(b"older") == [b"older"], "a stale Dest Map-Version must still be delivered"
            smr = None
            deadline = time.monotonic() + 2.0
            while smr is None and time.monotonic() < deadline:
                data = _recv(smr_sock, deadline - time.monotonic())
                if data is None:
                    break
                try:
                    m = decode_control(data)
                except DecodeError:
                    continue
                if isinstance(m, MapRequest) and m.smr:
                    smr = m
            assert smr is not None, "no Solicit-Map-Request to the ITR with the stale version"
    finally:
        smr_sock.close()
        client.close()


@pytest.mark.conformance(protocol="lisp", section="RFC 9300 sec. 5.3, 8", role="itr")
def test_itr_encapsulates_with_instance_id(impl, tmp_path):
    """An ITR configured for instance 0xABCDE sets the I-bit and that 24-bit Instance ID
    in every LISP header; the inner packet is unchanged."""
    with ItrRig(impl, tmp_path, extra=("--instance-id", 0xABCDE)) as rig:
        for k in range(4):
            pkt = rig.inner("10.5.1.1", b"instance %d" % k)
            rig.send(pkt)
            got = rig.at(0, 2.0)
            assert got, "nothing arrived at the mapped RLOC"
            h, inner = decode_lisp_data(got[0])
            assert bytes(inner) == pkt
            assert h.flags & FLAG_I and h.instance_id == 0xABCDE, f"header {h}"


@pytest.mark.conformance(protocol="lisp", section="RFC 9300 sec. 5.3, 8", role="etr")
def test_etr_decapsulates_only_its_instance(impl, net) -> None:  # noqa: F811 (the fixture)
    """An ETR configured for instance 7 delivers packets whose header carries I-bit
    and IID 7, and not those of instance 8 or without an Instance ID (RFC 9300 sec. 8:
    "the Instance ID from the LISP header is used as a table identifier to locate the
    forwarding table to use for the inner destination EID lookup")."""
    with EtrRig(impl, cc=False, extra=("--instance-id", 7), net=net) as rig:
        # each packet is followed by a marker of instance 7 that must arrive: what
        # arrives before the marker says whether the packet itself was delivered
        for k, (iid, deliver) in enumerate(((7, True), (8, False), (None, False), (7, True))):
            tag = f"iid {iid}".encode()
            marker = b"marker %d" % k
            rig.send(encode_lisp_data(make_lisp_data(instance_id=iid)), rig.plain(tag))
            rig.send(encode_lisp_data(make_lisp_data(instance_id=7)), rig.plain(marker))
            got: list[bytes] = []
            deadline = time.monotonic() + 3.0
            while marker not in got and time.monotonic() < deadline:
                got += rig.received(max(0.01, deadline - time.monotonic()))
            assert marker in got, f"IID 7 marker not delivered: {got}"
            assert (tag in got) is deliver, (
                f"IID {iid}: delivered {got} by an ETR of instance 7; RFC 9300 sec. 8: \"the "
                "Instance ID "
                f"from the LISP header is used as a table identifier to locate the forwarding "
                "table\""
            )


def _register(caps: LispCaps, sock, ms, prefix: str, iid: int, rloc: str, nonce: int) -> None:
    rec = EidRecord(
        ipaddress.ip_network(prefix),
        (LocatorRecord(A(rloc), 1, 100, 255, 0, True, False, True),),
        3,
        iid=iid,
    )
    m = MapRegister(nonce, (rec,), KEY_ID, caps.algorithm, b"", LispType.MAP_REGISTER,
                    proxy_reply=True, want_map_notify=False)
    sock.sendto(caps.sign(m, PSK.encode(), KEY_ID), ms)


def _request(sock, ms, eid: str, iid: int, nonce: int) -> MapReply | None:
    """An Encapsulated Map-Request (RFC 9301 sec. 5.8), as ITRs send them to a Map-Resolver."""
    m = MapRequest(nonce, (A("127.0.0.1"),), (ipaddress.ip_network(f"{eid}/32"),),
                   eid_iids=(iid,) if iid else ())
    sock.sendto(ecm_wrap(encode_map_request(m), A("127.0.0.1").packed, A(eid).packed,
                         sock.getsockname()[1]), ms)
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        data = _recv(sock, deadline - time.monotonic())
        if data is None:
            return None
        try:
            msg = decode_control(data)
        except DecodeError:
            continue
        if isinstance(msg, MapReply) and msg.nonce == nonce:
            return msg
    return None


@pytest.mark.conformance(protocol="lisp", section="RFC 9301 sec. 5.2, 5.4, 5.6; RFC 8060 sec. 4.1",
                         role="mapserver")
def test_map_server_keeps_instances_apart(impl) -> None:
    """The same EID prefix registered in instance 0 and in instance 7 (LCAF Instance ID
    addresses) with different RLOCs: a Map-Request names the instance and gets that
    instance's RLOC back, in a record of that instance."""
    caps = caps_of(impl)
    caps.need_host_loopback("the map-server instance case")
    caps.need_free_ports("the map-server instance case")
    port = _free_udp_port()
    ms = ("127.0.0.1", port)
    with impl.start("mapserver", "--addr", "127.0.0.1", "--port", port,
                    "--site", f"site1:10.0.0.0/8:{KEY_ID}:{PSK}", "--instance-id", 7,
                    ready_line="READY"):
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.bind(("127.0.0.1", 0))
        try:
            want = {0: "127.0.0.10", 7: "127.0.0.17"}
            got: dict = {}
            for attempt in range(10):
                for iid, rloc in want.items():
                    _register(caps, sock, ms, "10.7.0.0/16", iid, rloc, 1000 + 10 * attempt + iid)
                time.sleep(0.1)
                for iid in want:
                    rep = _request(sock, ms, "10.7.1.1", iid, 77 + iid + 100 * attempt)
                    if rep is not None and rep.records and rep.records[0].locators:
                        got[iid] = (str(rep.records[0].locators[0].locator), rep.records[0].iid)
                if len(got) == 2:
                    break
        finally:
            sock.close()
    assert got == {iid: (r, iid) for iid, r in want.items()}, got


def receive_one(addr: tuple[str, int], wait: float = 15.0) -> bytes | None:
    """Wait for one datagram at ``addr`` (run inside the xTR's namespace, at its local EID)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.bind(addr)
        return _recv(s, wait)
    finally:
        s.close()


def plain_exchange(xtr_rloc: str, inside: tuple[str, int], data_port: int, peer_rloc: str,
                   eid: str, deliver_to: tuple[str, int], wait: float = 5.0) -> dict:
    """Play the remote xTR at ``peer_rloc``:4341 without echo-nonce: one packet each way, the
    inbound one to ``deliver_to`` (an address of the xTR's own EID prefix: an ETR decapsulates
    only for its site, RFC 9300 sec. 4). Returns what was seen; the case judges."""
    etr = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    seen: dict = {"encapsulated": None, "inner_intact": False}
    try:
        etr.bind((peer_rloc, 4341))
        inner = build_ip(
            A("10.9.0.1").packed, A(eid).packed, 17, build_udp(40000, 9999, b"outbound")
        )
        deadline = time.monotonic() + wait
        while seen["encapsulated"] is None and time.monotonic() < deadline:
            tx.sendto(inner, inside)  # repeated: an xTR may still be starting its data plane
            got = _recv(etr, 0.5)
            if got is not None:
                h, body = decode_lisp_data(got)
                seen["encapsulated"] = h.flags
                seen["inner_intact"] = bytes(body) == inner
        back = build_ip(A("10.5.0.9").packed, A(deliver_to[0]).packed, 17,
                        build_udp(40000, deliver_to[1], b"inbound"))
        for _ in range(3):  # UDP: a few copies; one delivered is enough
            etr.sendto(encode_lisp_data(make_lisp_data(nonce=0x77)) + back, (xtr_rloc, data_port))
            time.sleep(0.1)
    finally:
        for s in (etr, tx):
            s.close()
    return seen


@pytest.mark.root
@pytest.mark.conformance(protocol="lisp", section="RFC 9300 sec. 5.1, 5.3", role="itr")
def test_xtr_in_a_network_namespace(impl, tmp_path):
    """The xTR under test started inside its own network namespace (the registry
    command run with ``ip netns exec``), the peer xTR in another, joined by a veth
    pair: a packet from its local EID prefix is encapsulated to the peer's RLOC across
    real interfaces, inner packet intact, and a LISP packet from the peer is
    decapsulated and delivered. No echo-nonce (that is ``test_xtr_echo_nonce``)."""
    from deliverykit.testing import require_root

    require_root()
    from deliverykit.testbed import Testbed

    with Testbed(prefix="cclisp") as tb:
        x, p = tb.host("x"), tb.host("p")
        tb.link(x, p, "192.168.77.1/24", "192.168.77.2/24")
        tb.address(x, "lo", "10.9.0.1/32")  # a host of the xTR's own site (LOCAL_EID_PREFIX)
        mc = tmp_path / "map-cache.txt"
        mc.write_text("10.5.0.0/16 192.168.77.2\n")
        # LISP_FIXED_PORTS=1 (e.g. OOR): its data port is 4341, whatever the contract says
        inside_port, data_port = 47001, 4341 if caps_of(impl).fixed_ports else 47002
        with impl.start("itr", "--rloc", "192.168.77.1", "--inside", f"192.168.77.1:{inside_port}",
                        "--map-cache", mc, "--data-port", data_port, "--prefix", LOCAL_EID_PREFIX,
                        netns=x.ns, ready_line="READY"):
            site = tb.spawn(x, receive_one, ("10.9.0.1", 47003))
            seen = tb.run(
                p,
                plain_exchange,
                "192.168.77.1",
                ("192.168.77.1", inside_port),
                data_port,
                "192.168.77.2",
                "10.5.1.1",
                ("10.9.0.1", 47003),
                timeout=60,
            )
            delivered = site.result(30)
    assert seen["encapsulated"] is not None, "no LISP packet reached the peer RLOC across the veth"
    assert seen["inner_intact"], "the inner packet changed on the way"
    assert delivered == b"inbound", "a LISP packet from the peer was not decapsulated and delivered"
