"""LISP conformance cases: map-server/map-resolver and ETR control plane (RFC 9301), ETR data plane
(RFC 9300) and CoreCast's ETR (Algorithm 2), black box.

The cases play the xTR (against a map-server) or the map-server (against an
ETR) with raw UDP sockets on 127.0.0.1 and :mod:`corecast.wire.codec`.
"""

from __future__ import annotations

import ipaddress
import random
import socket
import time

import pytest

from corecast.conformance.caps import LispCaps, LispNet, caps_of, lisp_net
from corecast.wire.codec import (
    DecodeError,
    Ecm,
    EidRecord,
    LocatorRecord,
    MapRegister,
    MapReply,
    MapRequest,
    build_ip,
    build_udp,
    decode_control,
    decode_lisp_data,
    digest,
    ecm_unwrap,
    ecm_wrap,
    encode_cc_header,
    encode_cc_payload,
    encode_lisp_data,
    encode_map_register,
    encode_map_reply,
    encode_map_request,
    make_lisp_data,
    verify_auth,
)
from corecast.wire.constants import IPPROTO_CORECAST, AlgorithmId, HashId, LispType

SITE_PREFIX = "10.0.0.0/8"
KEY_ID, PSK = 7, "conformance-psk"
RLOC = ipaddress.ip_address("127.0.0.2")


def _free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def net(impl):
    """The host's loopback, or a namespace pair for a LISP_NETNS=required implementation."""
    with lisp_net(caps_of(impl)) as n:
        yield n


@pytest.fixture
def mapserver(impl, net: LispNet):
    caps = caps_of(impl)
    port = 4342 if caps.fixed_ports else _free_udp_port()
    cm = impl.start(
        "mapserver",
        "--addr",
        net.impl_addr,
        "--port",
        port,
        "--site",
        f"site1:{SITE_PREFIX}:{KEY_ID}:{PSK}",
        netns=net.netns,
        ready_line="READY",
    )
    cm.__enter__()  # exit 127 here: the plugin reports the case unsupported
    try:
        yield (net.impl_addr, port)
    finally:
        cm.__exit__(None, None, None)


class Xtr:
    """Our side: a UDP socket that registers (as the implementation declares it authenticates,
    see :mod:`corecast.conformance.caps`) and sends Map-Requests the way an ITR sends them to a
    Map-Resolver: in an Encapsulated Control Message (RFC 9301 sec. 5.8; sec. 3: "A Map-Resolver
    receives Encapsulated Map-Requests from its client ITRs")."""

    def __init__(self, caps: LispCaps, addr: str = "127.0.0.1") -> None:
        self.caps = caps
        self.addr = addr
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((addr, 0))
        self.rng = random.Random(9301)

    def close(self) -> None:
        self.sock.close()

    def register(self, ms, prefix: str, psk: str = PSK, key_id: int = KEY_ID, tamper: bool = False,
                 nonce: int | None = None, algorithm: int | None = None) -> int:
        nonce = nonce if nonce is not None else self.rng.getrandbits(64)
        rec = EidRecord(
            ipaddress.ip_network(prefix),
            (LocatorRecord(RLOC, 1, 100, 255, 0, True, False, True),),
            3,
        )
        alg = self.caps.algorithm if algorithm is None else algorithm
        m = MapRegister(nonce, (rec,), key_id, alg, b"", LispType.MAP_REGISTER, proxy_reply=True,
                        want_map_notify=False)
        data = bytearray(self.caps.sign(m, psk.encode(), KEY_ID))
        if tamper:
            data[16] ^= 0x01  # first octet of the authentication data (after 16 header octets)
        self.sock.sendto(bytes(data), ms)
        return nonce

    def request(
        self, ms, eid: str, timeout: float = 2.0, plain: bool = False
    ) -> tuple[int, MapReply | None]:
        nonce = self.rng.getrandbits(64)
        me = ipaddress.ip_address(self.addr)
        m = MapRequest(nonce, (me,), (ipaddress.ip_network(f"{eid}/32"),),
                       source_eid=ipaddress.ip_address("10.255.0.1"))
        body = encode_map_request(m)
        if not plain:  # inner IP: ITR-RLOC -> the EID asked for, inner UDP from our port to 4342
            body = ecm_wrap(
                body, me.packed, ipaddress.ip_address(eid).packed, self.sock.getsockname()[1]
            )
        self.sock.sendto(body, ms)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.sock.settimeout(max(0.05, deadline - time.monotonic()))
            try:
                data, _ = self.sock.recvfrom(65536)
            except TimeoutError:
                break
            try:
                msg = decode_control(data)
            except DecodeError:
                continue
            if isinstance(msg, MapReply) and msg.nonce == nonce:
                return nonce, msg
        return nonce, None


@pytest.fixture
def xtr(impl, net: LispNet):
    x = Xtr(caps_of(impl), net.harness_addr)
    yield x
    x.close()


def _maps_to_rloc(reply: MapReply | None, eid: str) -> bool:
    if reply is None:
        return False
    a = ipaddress.ip_address(eid)
    return any(
        a in r.prefix and any(loc.locator == RLOC for loc in r.locators) for r in reply.records
    )


def _wait_registered(xtr: Xtr, ms, eid: str, tries: int = 10) -> MapReply | None:
    for _ in range(tries):
        _, rep = xtr.request(ms, eid, timeout=0.5)
        if _maps_to_rloc(rep, eid):
            return rep
    return None


@pytest.mark.conformance(
    protocol="lisp", section="RFC 9301 sec. 5.6, 8.2, 5.2, 5.4", role="mapserver"
)
def test_authenticated_register_then_map_reply(impl, mapserver, xtr):
    """A Map-Register signed with the site key (P-bit set) is accepted: a Map-Request for an EID
    inside gets a Map-Reply with the same nonce and a record covering the EID with our RLOC."""
    xtr.register(mapserver, "10.1.0.0/16")
    rep = _wait_registered(xtr, mapserver, "10.1.2.3")
    assert rep is not None, "no Map-Reply mapping 10.1.2.3 to the registered RLOC"
    rec = next(r for r in rep.records if ipaddress.ip_address("10.1.2.3") in r.prefix)
    assert rec.prefix == ipaddress.ip_network("10.1.0.0/16")
    assert rec.ttl > 0


@pytest.mark.conformance(protocol="lisp", section="RFC 9301 sec. 5.6, 8.2", role="mapserver")
@pytest.mark.parametrize(
    "how", ["bad-hmac", "wrong-psk", "unknown-key-id", "outside-site", "no-auth"]
)
def test_unauthenticated_register_is_refused(impl, mapserver, xtr, how):
    """A Map-Register whose MAC does not verify with the site key, or claims a prefix outside the
    site, or is unauthenticated (algorithm 0), registers nothing: the EID never maps to its RLOC."""
    prefix, eid = (
        ("192.168.0.0/16", "192.168.1.1") if how == "outside-site" else ("10.2.0.0/16", "10.2.3.4")
    )
    kw = {"bad-hmac": dict(tamper=True), "wrong-psk": dict(psk="not-the-key"),
          "unknown-key-id": dict(key_id=KEY_ID + 1), "outside-site": {},
          "no-auth": dict(algorithm=AlgorithmId.NONE)}[how]
    for _ in range(3):
        xtr.register(mapserver, prefix, **kw)
    time.sleep(0.3)
    _, rep = xtr.request(mapserver, eid)
    why = {
        "unknown-key-id": " (signed with the site's key but naming a Key ID the site does not "
        "have; RFC 9301 sec. 5.6: the secret is \"PSK[Key ID], that is, the pre-shared secret "
        "identified by the Key ID\")"
    }.get(how, "")
    assert not _maps_to_rloc(rep, eid), f"{how}: the refused registration is served{why}"
    # and a good registration right after still works (the map-server did not stop)
    xtr.register(mapserver, "10.3.0.0/16")
    assert _wait_registered(xtr, mapserver, "10.3.0.1") is not None


@pytest.mark.conformance(protocol="lisp", section="RFC 9301 sec. 8.3, 8.4, 5.4", role="mapserver")
def test_negative_map_reply_for_unregistered_eids(impl, mapserver, xtr):
    """A Map-Request for an EID with no registration gets a Negative Map-Reply: same nonce, a record
    covering the EID with no locators."""
    for eid in ("10.77.0.1", "198.51.100.9"):
        nonce, rep = xtr.request(mapserver, eid)
        assert rep is not None, f"no Map-Reply for unregistered {eid}"
        assert rep.nonce == nonce
        recs = [r for r in rep.records if ipaddress.ip_address(eid) in r.prefix]
        assert recs and all(not r.locators for r in recs), f"{eid}: {rep.records}"


@pytest.mark.conformance(protocol="lisp", section="RFC 9301 sec. 5.8, 3", role="mapserver")
def test_plain_map_request_is_a_finding(impl, mapserver, xtr, record_property):
    """RFC 9301 has ITRs send Map-Requests to a Map-Resolver inside an ECM (sec. 3, 5.8); whether a
    plain one (no ECM) is answered too is recorded (finding ``plain_map_request``), never judged:
    the RFC requires neither. The same request in an ECM right after must be answered."""
    _, plain = xtr.request(mapserver, "10.78.0.1", timeout=1.0, plain=True)
    record_property("plain_map_request", "answered" if plain is not None else "ignored")
    _, rep = xtr.request(mapserver, "10.78.0.1")
    assert rep is not None, "no Map-Reply to an Encapsulated Map-Request"


@pytest.mark.conformance(protocol="lisp", section="RFC 9301 sec. 1, 5.6, 12.5", role="mapserver")
def test_register_with_an_rfc9301_algorithm(impl, mapserver, xtr, record_property):
    """RFC 9301 sec. 1: implementations "SHOULD use 'HMAC-SHA256-128+HKDF-SHA256' as the Algorithm
    ID ... in the Map-Register message ... and MUST NOT use 'None' or 'HMAC-SHA-1-96-None'". A
    map-server must therefore accept a Map-Register authenticated with HMAC-SHA-256-128 (2) or
    HMAC-SHA256-128+HKDF-SHA256 (3), whatever the implementation declares in LISP_AUTH_ALGORITHMS
    (the other cases sign with what it declares). Which ones it accepts is recorded (``sha256``)."""
    accepted = []
    for k, alg in enumerate(
        (AlgorithmId.HMAC_SHA_256_128, AlgorithmId.HMAC_SHA_256_128_HKDF_SHA256)
    ):
        prefix, eid = f"10.{90 + k}.0.0/16", f"10.{90 + k}.0.1"
        xtr.register(mapserver, prefix, algorithm=alg)
        if _wait_registered(xtr, mapserver, eid, tries=4) is not None:
            accepted.append(int(alg))
    record_property("sha256", ",".join(map(str, accepted)) or "none")
    assert accepted, (
        "accepts neither HMAC-SHA-256-128 (2) nor HMAC-SHA256-128+HKDF-SHA256 (3); "
        "RFC 9301 sec. 1: Map-Registers \"MUST NOT use 'None' or 'HMAC-SHA-1-96-None'\""
    )


# ------------------------------------------------------------------ ETR role: our side is the
# map-server


@pytest.mark.conformance(protocol="lisp", section="RFC 9301 sec. 5.6, 8.2", role="etr")
def test_etr_map_register_is_authenticated(impl, net, record_property):
    """The ETR's Map-Registers verify with the PSK (HMAC over the message with zeroed auth data) and
    with no other key, carry the configured key ID, its EID prefix and RLOC. Whether an
    unacknowledged Map-Register is retransmitted with the same nonce is recorded (finding
    ``retransmit_nonce``)."""
    caps = caps_of(impl)
    ms = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    ms.bind((net.harness_addr, 4342 if caps.fixed_ports else 0))
    try:
        cport, dport = (4342, 4341) if caps.fixed_ports else (_free_udp_port(), _free_udp_port())
        with impl.start(
            "etr",
            "--rloc",
            net.impl_addr,
            "--prefix",
            "10.5.0.0/16",
            "--map-server",
            f"{net.harness_addr}:{ms.getsockname()[1]}",
            "--key-id",
            KEY_ID,
            "--psk",
            PSK,
            "--control-port",
            cport,
            "--data-port",
            dport,
            *_algorithm_args(caps),
            netns=net.netns,
            ready_line="READY",
        ):
            regs = []
            deadline = time.monotonic() + 6
            while len(regs) < 2 and time.monotonic() < deadline:
                ms.settimeout(max(0.05, deadline - time.monotonic()))
                try:
                    data, _src = ms.recvfrom(65536)
                except TimeoutError:
                    break
                try:
                    msg = decode_control(data)
                except DecodeError:
                    continue
                if isinstance(msg, MapRegister) and msg.msg_type == LispType.MAP_REGISTER:
                    regs.append((msg, data))
        assert regs, "no Map-Register within 6 s"
        for msg, data in regs:
            assert verify_auth(msg, PSK.encode()), (
                "authentication data does not verify with the PSK"
            )
            assert not verify_auth(msg, b"other"), "verifies with any key?"
            assert (msg.key_id, msg.algorithm_id) == caps.wire_key_id(KEY_ID), (
                "Key ID / Algorithm ID"
            )
            assert encode_map_register(msg) == data, "re-encoding differs (field layout)"
            assert any(
                r.prefix == ipaddress.ip_network("10.5.0.0/16")
                and any(str(loc.locator) == net.impl_addr for loc in r.locators)
                for r in msg.records
            )
        record_property("want_map_notify", str(regs[0][0].want_map_notify))
        if len(regs) >= 2:
            record_property(
                "retransmit_nonce", "same" if regs[0][0].nonce == regs[1][0].nonce else "fresh"
            )
    finally:
        ms.close()


def _algorithm_args(caps: LispCaps) -> tuple:
    """``--algorithm-id A`` when the implementation does not sign with HMAC-SHA-256-128 (the
    default)."""
    return (
        ()
        if caps.algorithm == AlgorithmId.HMAC_SHA_256_128
        else ("--algorithm-id", int(caps.algorithm))
    )


# ------------------------------------------------------------------ ETR data plane (RFC 9300) and
# Algorithm 2

CC_RANGE = "232.0.0.0/8"


class EtrRig:
    """The implementation's ETR with a silent map-server socket, a sender and a client socket."""

    def __init__(self, impl, cc: bool, extra: tuple = (), net: LispNet | None = None) -> None:
        caps = caps_of(impl)
        if net is None:  # cases that run on the host's loopback only
            caps.need_host_loopback("this ETR data-plane case")
            net = LispNet("127.0.0.1", "127.0.0.1")
        self.impl = impl
        self.net = net
        self.ms = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.ms.bind((net.harness_addr, 4342 if caps.fixed_ports else 0))
        self.tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.tx.bind((net.harness_addr, 0))
        # the client: a host of the ETR's site, in the ETR's namespace
        self.client = net.impl_socket()
        self.client.bind((net.site_host, 0))
        self.client_port = self.client.getsockname()[1]
        self.data_port = 4341 if caps.fixed_ports else _free_udp_port()
        # the site's EIDs include the client socket's address: an ETR delivers only there
        site = ["--prefix", "10.5.0.0/16"] + ([] if net.netns else ["--prefix", "127.0.0.1/32"])
        args = ["--rloc", net.impl_addr, *site, "--map-server",
                f"{net.harness_addr}:{self.ms.getsockname()[1]}", "--key-id", KEY_ID, "--psk", PSK,
                "--control-port", 4342 if caps.fixed_ports else _free_udp_port(),
                "--data-port", self.data_port, *_algorithm_args(caps)]
        if cc:
            args += ["--cc-range", CC_RANGE]
        self.cm = impl.start("etr", *args, *extra, netns=net.netns, ready_line="READY")

    def __enter__(self) -> EtrRig:
        self.cm.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.cm.__exit__(*exc)
        for s in (self.ms, self.tx, self.client):
            s.close()

    def send(self, lisp_header: bytes, inner: bytes) -> None:
        self.tx.sendto(lisp_header + inner, (self.net.impl_addr, self.data_port))

    def received(self, timeout: float = 1.0, want: int = 1) -> list[bytes]:
        out: list[bytes] = []
        deadline = time.monotonic() + timeout
        while len(out) < want:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            self.client.settimeout(left)
            try:
                out.append(self.client.recvfrom(65536)[0])
            except TimeoutError:
                break
        return out

    def plain(self, payload: bytes) -> bytes:
        """An inner IPv4/UDP packet from an EID to our client socket."""
        return build_ip(
            ipaddress.ip_address("10.9.0.1").packed,
            ipaddress.ip_address(self.net.site_host).packed,
            17,
            build_udp(40000, self.client_port, payload),
        )


HEADERS = {
    "nonce": dict(nonce=0xABCDEF),
    "nonce-echo": dict(nonce=0x123456, echo=True),
    "lsb": dict(lsb=0x00000001),
    "instance-id-0": dict(instance_id=0, lsb=1),
    "map-versions": dict(map_versions=(5, 7)),
    "no-flags": {},
}


@pytest.mark.conformance(protocol="lisp", section="RFC 9300 sec. 5.3", role="etr")
def test_etr_decapsulates_every_header_variant(impl, net):
    """LISP data packets with each flag combination (N, N+E, L, I with IID 0, V, none) are
    decapsulated and the inner UDP payload delivered intact, once each."""
    with EtrRig(impl, cc=False, net=net) as rig:
        for name, kw in HEADERS.items():
            payload = f"inner payload via {name}".encode() * 3
            rig.send(encode_lisp_data(make_lisp_data(**kw)), rig.plain(payload))
            got = rig.received(2.0)
            assert got == [payload], f"{name}: delivered {got!r}"


@pytest.mark.conformance(protocol="lisp", section="RFC 9300 sec. 5.3", role="etr")
def test_etr_survives_malformed_packets(impl, net):
    """Truncated headers, inner packets that are not IP, and garbage are dropped without delivering
    anything; a good packet afterwards is still delivered."""
    with EtrRig(impl, cc=False, net=net) as rig:
        hdr = encode_lisp_data(make_lisp_data(nonce=1))
        for junk in (b"", b"\x80\x00", hdr, hdr + b"\x00" * 10, hdr + b"\x45" + b"\xff" * 40,
                     hdr + rig.plain(b"x")[:25], bytes(random.Random(5).randbytes(200))):
            rig.tx.sendto(junk, (rig.net.impl_addr, rig.data_port))
        assert rig.received(0.5) == [], "something was delivered from malformed input"
        rig.send(hdr, rig.plain(b"still alive"))
        assert rig.received(2.0) == [b"still alive"]


@pytest.mark.conformance(protocol="lisp", section="RFC 9300 sec. 4, 6", role="etr")
def test_etr_is_not_an_open_relay(impl):
    """An ETR decapsulates only for its own site's EIDs: an inner packet to an address outside
    every --prefix (127.0.0.2, on the same host) is dropped; a packet to the site that follows
    it is delivered, so the first one was handled, not merely slow."""
    outside = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    outside.bind(("127.0.0.2", 0))
    outside.settimeout(0.3)
    try:
        with EtrRig(impl, cc=False) as rig:
            hdr = encode_lisp_data(make_lisp_data(nonce=7))
            relay = build_ip(
                ipaddress.ip_address("10.9.0.1").packed,
                ipaddress.ip_address("127.0.0.2").packed,
                17,
                build_udp(40000, outside.getsockname()[1], b"relay me"),
            )
            rig.send(hdr, relay)
            rig.send(hdr, rig.plain(b"to the site"))
            assert rig.received(2.0) == [b"to the site"]
            try:
                leaked = outside.recvfrom(65536)[0]
            except TimeoutError:
                leaked = None
            assert leaked is None, "the ETR delivered to an address outside its EID prefixes"
    finally:
        outside.close()


def _cc(rig: EtrRig, chan: str, pdu: bytes) -> None:
    inner = build_ip(ipaddress.ip_address("10.9.0.1").packed, ipaddress.ip_address(chan).packed,
                     IPPROTO_CORECAST, pdu)
    rig.send(encode_lisp_data(make_lisp_data(nonce=0x42)), inner)


@pytest.mark.conformance(
    protocol="lisp", section="CoreCast paper sec. 3.5, Algorithm 2", role="corecast-etr"
)
def test_corecast_etr_algorithm_2(impl):
    """Payload PDU then header PDUs: one unicast copy per header to the named client EID and port; a
    header for an unknown hash, and a payload whose hash does not match, deliver nothing."""
    with EtrRig(impl, cc=True) as rig:
        eid = ipaddress.ip_address("127.0.0.1").packed
        data = b"chunk-1 " * 50
        h = digest(HashId.SHA1, data)
        _cc(rig, "232.1.1.1", encode_cc_payload(1, data))
        time.sleep(0.1)
        _cc(rig, "232.1.1.1", encode_cc_header(1, h, eid, rig.client_port))
        _cc(rig, "232.1.1.1", encode_cc_header(1, h, eid, rig.client_port))
        assert rig.received(2.0, want=2) == [data, data], (
            "a stored payload must go out once per header"
        )
        _cc(
            rig,
            "232.1.1.1",
            encode_cc_header(2, digest(HashId.SHA1, b"never sent"), eid, rig.client_port),
        )
        bad = b"chunk-2 " * 50
        _cc(
            rig,
            "232.1.1.2",
            encode_cc_payload(2, bad, hash_=digest(HashId.SHA1, b"something else")),
        )
        time.sleep(0.1)
        _cc(
            rig,
            "232.1.1.2",
            encode_cc_header(2, digest(HashId.SHA1, b"something else"), eid, rig.client_port),
        )
        _cc(rig, "232.1.1.2", encode_cc_header(2, digest(HashId.SHA1, bad), eid, rig.client_port))
        assert rig.received(0.7) == [], "delivered for an unknown hash or an unverified payload"
        # a newer payload replaces the channel's stored one (one payload per channel)
        newer = b"chunk-3 " * 50
        _cc(rig, "232.1.1.1", encode_cc_payload(3, newer))
        time.sleep(0.1)
        _cc(rig, "232.1.1.1", encode_cc_header(3, digest(HashId.SHA1, newer), eid, rig.client_port))
        assert rig.received(2.0) == [newer]


# ------------------------------------------------------------------ ITR (RFC 9300 encapsulation,
# RFC 9301 resolution)

LOCAL_EID_PREFIX = "10.9.0.0/16"  #: the ITR's own site (the inner packets' sources)
FLAG_N, FLAG_L, FLAG_E, FLAG_V, FLAG_I, FLAG_R, FLAG_KK = 0x80, 0x40, 0x20, 0x10, 0x08, 0x04, 0x03


class ItrRig:
    """The implementation's ITR, with two ETR RLOCs (127.77.x.1/2 port 4341) and a map-resolver
    socket."""

    def __init__(self, impl, tmp_path, cc: bool = False, resolver: bool = False,
                 extra: tuple = ()) -> None:
        caps = caps_of(impl)
        caps.need_host_loopback("the ITR cases")
        x = random.Random().randrange(1, 250)
        self.rlocs = [f"127.77.{x}.1", f"127.77.{x}.2", f"127.77.{x}.3"]
        self.etrs = []
        for r in self.rlocs:
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.bind((r, 4341))
            self.etrs.append(s)
        self.mr = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.mr.bind(("127.0.0.1", 0))
        self.tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.inside = ("127.0.0.1", _free_udp_port())
        mc = tmp_path / "map-cache.txt"
        mc.write_text(f"10.5.0.0/16 {self.rlocs[0]}\n10.6.0.0/16 {self.rlocs[1]}\n")
        # the inner packets come from LOCAL_EID (10.9.0.1): the xTR's own EID prefix (an ITR
        # encapsulates
        # packets from its site's EIDs; RFC 9300 sec. 4 step 2, and e.g. OOR drops all others)
        args = [
            "--rloc",
            "127.0.0.1",
            "--inside",
            f"{self.inside[0]}:{self.inside[1]}",
            "--map-cache",
            mc,
            "--prefix",
            LOCAL_EID_PREFIX,
        ]
        if resolver:
            args += ["--map-resolver", f"127.0.0.1:{self.mr.getsockname()[1]}"]
        if cc:
            args += ["--cc-range", CC_RANGE]
        self.cm = impl.start("itr", *args, *extra, ready_line="READY")

    def __enter__(self) -> ItrRig:
        self.cm.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.cm.__exit__(*exc)
        for s in (*self.etrs, self.mr, self.tx):
            s.close()

    def inner(self, dst: str, payload: bytes, proto: int = 17) -> bytes:
        body = build_udp(40000, 9999, payload) if proto == 17 else payload
        return build_ip(
            ipaddress.ip_address("10.9.0.1").packed, ipaddress.ip_address(dst).packed, proto, body
        )

    def send(self, pkt: bytes) -> None:
        self.tx.sendto(pkt, self.inside)

    def at(self, i: int, timeout: float = 1.0, want: int = 1) -> list[bytes]:
        s = self.etrs[i]
        out: list[bytes] = []
        deadline = time.monotonic() + timeout
        while len(out) < want:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            s.settimeout(left)
            try:
                out.append(s.recvfrom(65536)[0])
            except TimeoutError:
                break
        return out


@pytest.mark.conformance(protocol="lisp", section="RFC 9300 sec. 5.1, 5.3", role="itr")
def test_itr_encapsulates_to_the_mapped_rloc(impl, tmp_path, record_property):
    """Inner packets to two mapped prefixes arrive at the right RLOC's UDP 4341, behind an 8-byte
    LISP header, byte for byte; the header's reserved bit and key bits are 0 and N and V are not
    both set."""
    with ItrRig(impl, tmp_path) as rig:
        pkts = [
            (0, rig.inner("10.5.1.1", b"to site five " * 4)),
            (1, rig.inner("10.6.7.7", b"to site six " * 4)),
        ]
        headers = []
        for _ in range(5):
            for i, pkt in pkts:
                rig.send(pkt)
                got = rig.at(i, 2.0)
                assert got, f"nothing arrived at RLOC {rig.rlocs[i]}:4341"
                h, inner = decode_lisp_data(got[0])
                assert bytes(inner) == pkt, "inner packet changed"
                headers.append(h)
        assert rig.at(2, 0.2) == [], "sent to an RLOC no mapping names"
    for h in headers:
        assert not h.flags & FLAG_R, "reserved flag bit set"
        assert not h.flags & FLAG_KK, "key bits set without a configured key (RFC 8061)"
        assert not (h.flags & FLAG_N and h.flags & FLAG_V), "N and V both set"
    nonces = {h.nonce for h in headers if h.flags & FLAG_N}
    record_property("lisp_header", f"flags {sorted({h.flags for h in headers})}, "
                                   f"{len(nonces)} distinct nonces in {len(headers)} packets")


def _recv_map_request(mr: socket.socket, timeout: float) -> tuple[MapRequest, int, tuple] | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        mr.settimeout(max(0.05, deadline - time.monotonic()))
        try:
            data, src = mr.recvfrom(65536)
        except TimeoutError:
            return None
        try:
            msg = decode_control(data)
            sport = src[1]
            if isinstance(msg, Ecm):
                _ip, sport, _dport, inner = ecm_unwrap(msg)
                msg = decode_control(inner)
        except DecodeError:
            continue
        if isinstance(msg, MapRequest):
            return msg, sport, src
    return None


@pytest.mark.conformance(protocol="lisp", section="RFC 9301 sec. 5.2, 5.4, 5.8, 8.3", role="itr")
def test_itr_resolves_unknown_eids_and_checks_nonces(impl, tmp_path):
    """An EID missing from the map-cache makes the ITR send a Map-Request (plain or ECM) for it with
    its ITR-RLOC. A Map-Reply with another nonce is ignored; the one with the request's nonce
    installs the mapping, and traffic then goes to that RLOC."""
    with ItrRig(impl, tmp_path, resolver=True) as rig:
        rig.send(rig.inner("10.7.1.1", b"first"))
        got = _recv_map_request(rig.mr, 3.0)
        assert got is not None, "no Map-Request within 3 s"
        req, sport, _src = got
        assert any(ipaddress.ip_address("10.7.1.1") in p for p in req.eid_prefixes), (
            req.eid_prefixes
        )
        assert req.itr_rlocs, "no ITR-RLOC"
        itr_rloc = str(req.itr_rlocs[0])

        def reply(nonce: int, rloc: str) -> None:
            rec = EidRecord(
                ipaddress.ip_network("10.7.0.0/16"),
                (LocatorRecord(ipaddress.ip_address(rloc), 1, 100, 255, 0, False, False, True),),
                5,
            )
            rig.mr.sendto(encode_map_reply(MapReply(nonce, (rec,))), (itr_rloc, sport))

        reply(req.nonce ^ 0x5555, rig.rlocs[2])  # forged: wrong nonce
        time.sleep(0.3)
        rig.send(rig.inner("10.7.1.1", b"after forged reply"))
        assert rig.at(2, 0.7) == [], "a Map-Reply with a nonce it never sent installed a mapping"
        later = _recv_map_request(rig.mr, 3.0)  # possibly a retransmission; answer the newest nonce
        nonce = later[0].nonce if later is not None else req.nonce
        reply(nonce, rig.rlocs[1])
        if later is not None and later[0].nonce != req.nonce:
            reply(req.nonce, rig.rlocs[1])
        time.sleep(0.3)
        rig.send(rig.inner("10.7.1.1", b"after the real reply"))
        got = [bytes(decode_lisp_data(d)[1]) for d in rig.at(1, 2.0, want=3)]
        assert rig.inner("10.7.1.1", b"after the real reply") in got, (
            "traffic did not follow the Map-Reply"
        )


@pytest.mark.conformance(
    protocol="lisp", section="CoreCast paper sec. 3.4, Algorithm 1", role="corecast-itr"
)
def test_corecast_itr_algorithm_1(impl, tmp_path):
    """Payload PDU then headers for clients behind two ETRs: each ETR gets the payload once, before
    its first header, then every header for its clients; a payload whose hash does not match is
    dropped and headers naming it are not forwarded."""
    with ItrRig(impl, tmp_path, cc=True) as rig:
        data = b"media chunk " * 60
        h = digest(HashId.SHA1, data)
        chan = "232.9.9.9"
        rig.send(rig.inner(chan, encode_cc_payload(1, data), IPPROTO_CORECAST))
        time.sleep(0.1)
        for eid in ("10.5.0.1", "10.5.0.2", "10.6.0.1"):
            rig.send(rig.inner(chan, encode_cc_header(1, h, ipaddress.ip_address(eid).packed, 5000),
                               IPPROTO_CORECAST))
        at0 = [bytes(decode_lisp_data(d)[1]) for d in rig.at(0, 2.0, want=3)]
        at1 = [bytes(decode_lisp_data(d)[1]) for d in rig.at(1, 2.0, want=2)]
        payload_pkt = rig.inner(chan, encode_cc_payload(1, data), IPPROTO_CORECAST)
        assert at0 and at0[0] == payload_pkt and at0.count(payload_pkt) == 1, (
            "ETR 1: payload not once, first"
        )
        assert len(at0) == 3 and all(p != payload_pkt for p in at0[1:]), (
            f"ETR 1 got {len(at0)} packets"
        )
        assert at1 and at1[0] == payload_pkt and len(at1) == 2, f"ETR 2 got {len(at1)} packets"
        bad = b"forged " * 60
        rig.send(rig.inner("232.9.9.8", encode_cc_payload(2, bad, hash_=digest(HashId.SHA1, b"x")),
                           IPPROTO_CORECAST))
        time.sleep(0.1)
        rig.send(
            rig.inner(
                "232.9.9.8",
                encode_cc_header(
                    2, digest(HashId.SHA1, b"x"), ipaddress.ip_address("10.5.0.1").packed, 5000
                ),
                IPPROTO_CORECAST,
            )
        )
        assert rig.at(0, 0.7) == [], "forwarded a header for a payload whose hash did not match"
