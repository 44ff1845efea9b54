"""Review fixes for certified PEX (RFC 7574 8.13, 12.2): robust checking,
re-issue before expiry, a bounded certificate cache, replay cost and
unsolicited PEX_RES.  Each test failed before its fix."""

import datetime as dt
import os

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.x509.oid import NameOID
from hypothesis import given, settings, strategies as st
from swift_support import leecher, pump, seeder

from swift.core.channel import Channel
from swift.core.peer import PeerConfig
from swift.core.pexcert import CertError, ca_public_bytes, check, issue, new_ca_key
from swift.wire import codec as C

SEED, LEECH, TRK = ("10.3.0.1", 6778), ("10.3.0.2", 6778), ("10.3.0.9", 6778)
SWARM = bytes(range(32))
CA = new_ca_key()
CA_PUB = ca_public_bytes(CA)
NOW = 1_700_000_000.0
VALID = issue(CA, SWARM, "192.0.2.7", 6778, NOW, 600)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(VALID) - 1), st.integers(0, 255)),
                min_size=1, max_size=4),
       st.integers(0, 40))
def test_mutated_valid_certificate_only_cert_error(edits, cut) -> None:
    """8.13: a mutated valid certificate is either still valid or CertError,
    never cryptography's UnsupportedAlgorithm, InvalidVersion, ..."""
    der = bytearray(VALID)
    for i, v in edits:
        der[i] = v
    der = bytes(der[:len(der) - cut])
    try:
        assert check(der, CA_PUB, SWARM, NOW + 1) == ("192.0.2.7", 6778)
    except CertError:
        pass


def test_version_byte_mutation_is_cert_error() -> None:
    der = bytearray(VALID)
    i = der.find(b"\xa0\x03\x02\x01\x02")  # [0] EXPLICIT INTEGER 2 (v3)
    assert i > 0
    der[i + 4] = 7  # an unknown X.509 version: x509.InvalidVersion before the fix
    with pytest.raises(CertError):
        check(bytes(der), CA_PUB, SWARM, NOW)


def test_only_ecdsa_with_sha256_accepted() -> None:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "x")])
    t = dt.datetime.fromtimestamp(NOW, dt.timezone.utc)
    der = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
           .public_key(CA.public_key())
           .serial_number(1).not_valid_before(t).not_valid_after(t + dt.timedelta(hours=1))
           .add_extension(x509.SubjectAlternativeName([x509.UniformResourceIdentifier(
               f"file://192.0.2.7:6778/{SWARM.hex()}")]), critical=True)
           .sign(CA, hashes.SHA384()).public_bytes(serialization.Encoding.DER))
    with pytest.raises(CertError, match="ECDSA-with-SHA256"):
        check(der, CA_PUB, SWARM, NOW)


def test_clock_skew_on_not_before() -> None:
    """A tracker clock a minute ahead of ours: the certificate is usable;
    ten minutes ahead is not."""
    assert check(VALID, CA_PUB, SWARM, NOW - 60) == ("192.0.2.7", 6778)
    with pytest.raises(CertError):
        check(VALID, CA_PUB, SWARM, NOW - 600)


def _pump(nodes: dict, steps: int, until=None, t0: float = 0.0, dt_: float = 0.01) -> float:
    return pump(nodes, steps, until, t0=t0, dt=dt_)


def _asker(now: float) -> Channel:
    """A channel (not in any peer) that sent PEX_REQ, for calling _pex_msgs."""
    ch = Channel(99, ("10.3.0.50", 1), False, now, 1088, 64, True)
    ch.pex.requested = True
    return ch


def test_tracker_reissues_short_lived_certificates() -> None:
    """8.13/12.2.2: a certificate is valid for its lifetime only; the tracker
    re-issues it when < 10 % is left, so a leecher arriving long after the
    seeder registered still gets a valid one (before: bad_cert, tracker
    ignored for good)."""
    data = os.urandom(16 * 1024)
    s = seeder(data, PeerConfig(seed=1, pex_ca=CA_PUB))
    trk = leecher(s.swarm_id,
                  PeerConfig(seed=5, tracker=True, pex_ca_key=CA, pex_cert_lifetime=5.0))
    s.connect(TRK, NOW)
    t = _pump({SEED: s, TRK: trk}, 20, t0=NOW)
    # a peer asks early: the tracker issues the seeder's certificate now
    first = trk._pex_msgs(_asker(t), t)
    assert len(first) == 1 and check(first[0].cert, CA_PUB, s.swarm_id, t) == SEED
    t = _pump({SEED: s, TRK: trk}, 200, t0=t, dt_=0.1)  # 20 s later
    leech = leecher(s.swarm_id, PeerConfig(seed=2, pex_connect=True, pex_ca=CA_PUB))
    leech.connect(TRK, t)
    _pump({SEED: s, TRK: trk, LEECH: leech}, 3000, until=lambda: leech.content.complete, t0=t)
    assert leech.stats.get("bad_cert", 0) == 0 and leech.stats.get("good_cert", 0) >= 1
    assert leech.content.complete


def test_cert_cache_bounded_purged_and_expired_not_relayed() -> None:
    data = os.urandom(8 * 1024)
    s = seeder(data, PeerConfig(seed=1, pex_ca=CA_PUB))
    leech = leecher(s.swarm_id, PeerConfig(seed=2, pex_ca=CA_PUB))
    leech.connect(SEED, NOW)
    t = _pump({SEED: s, LEECH: leech}, 20, t0=NOW)
    ch = next(iter(leech.channels.values()))
    assert ch.state == "est"
    ch.pex.asked = t
    for k in range(300):
        leech._on_cert(ch, issue(CA, s.swarm_id, f"10.9.{k // 200}.{k % 200 + 1}", 7000, t, 60), t)
    assert leech.stats["good_cert"] == 300 and len(leech.certs) == 256  # bounded
    # the seeder's own certificate, short-lived: relayed while valid only
    leech._on_cert(ch, issue(CA, s.swarm_id, SEED[0], SEED[1], t, 5), t)
    assert SEED in leech.certs
    assert [check(m.cert, CA_PUB, s.swarm_id, t) for m in leech._pex_msgs(_asker(t), t)] == [SEED]
    ch.liveness.last_recv = t + 10
    assert leech._pex_msgs(_asker(t + 10), t + 10) == []  # expired: not relayed
    # purged when the channel to that address closes
    leech.close(t)
    assert SEED not in leech.certs


def test_replayed_certificate_checked_once_and_unsolicited_res_dropped() -> None:
    """A replayed valid certificate costs a dictionary lookup, not a parse and
    ECDSA verification; PEX_RES* without our PEX_REQ is dropped (3.10.1)."""
    data = os.urandom(8 * 1024)
    s = seeder(data, PeerConfig(seed=1, pex_ca=CA_PUB))
    leech = leecher(s.swarm_id, PeerConfig(seed=2, pex_ca=CA_PUB, pex_connect=False))
    leech.connect(SEED, NOW)
    t = _pump({SEED: s, LEECH: leech}, 20, t0=NOW)
    sch = next(iter(s.channels.values()))
    cert = issue(CA, s.swarm_id, "10.3.0.77", 6778, t, 600)
    # unsolicited: nothing parsed, nothing discovered
    for d in s._pack(sch, sch.remote_id, [C.PexResCert(cert), C.PexResV4("10.3.0.78", 1)]):
        leech.datagram_received(d, SEED, t)
    assert leech.stats.get("pex_unsolicited", 0) == 2 and leech.stats.get("good_cert", 0) == 0
    assert ("10.3.0.77", 6778) not in leech.certs
    # after our PEX_REQ: accepted once, replays hit the cache
    next(iter(leech.channels.values())).pex.asked = t
    for _ in range(20):
        for d in s._pack(sch, sch.remote_id, [C.PexResCert(cert)]):
            leech.datagram_received(d, SEED, t + 0.5)
    assert leech.stats["good_cert"] == 1 and leech.stats["cert_cached"] == 19
    # the answer window closes a few seconds after the request
    for d in s._pack(sch, sch.remote_id, [C.PexResV4("10.3.0.79", 1)]):
        leech.datagram_received(d, SEED, t + 30)
    assert leech.stats["pex_unsolicited"] == 3


def test_expired_certificates_do_not_make_the_sender_ignored() -> None:
    """12.2.2: "check a few ... discard the rest if they are defective":
    an expired but genuine certificate (a relay's clock or a slow path) is
    dropped without counting against the channel, so valid ones that follow
    are still used; forged ones still count."""
    data = os.urandom(8 * 1024)
    s = seeder(data, PeerConfig(seed=1, pex_ca=CA_PUB))
    leech = leecher(s.swarm_id, PeerConfig(seed=2, pex_ca=CA_PUB))
    leech.connect(SEED, NOW)
    t = _pump({SEED: s, LEECH: leech}, 20, t0=NOW)
    ch = next(iter(leech.channels.values()))
    ch.pex.asked = t
    for k in range(3):
        leech._on_cert(ch, issue(CA, s.swarm_id, f"10.8.0.{k + 1}", 7000, t - 100, 10), t)
    assert leech.stats["expired_cert"] == 3 and ch.pex.bad_certs == 0
    leech._on_cert(ch, issue(CA, s.swarm_id, "10.8.0.9", 7000, t, 60), t)
    assert ("10.8.0.9", 7000) in leech.certs
    leech._on_cert(ch, issue(new_ca_key(), s.swarm_id, "10.8.0.10", 7000, t, 60), t)
    assert ch.pex.bad_certs == 1
