"""Swarm-membership certificates for PEX_REScert (RFC 7574 sections 8.13, 12.2).

A certificate states that peer P at (address, port) is a member of swarm S at
time T.  It is an X.509v3 certificate in DER with a critical Subject
Alternative Name of type URI ``file://HOST:PORT/SWARMID-HEX`` (8.13),
notBefore = T and notAfter = T + the issuer's lifetime.  Who signs is a
deployment choice (12.2.1); we implement the RFC's example (12.2.2): the
tracker is the certification authority and its public key is part of the
swarm metadata.  The tracker issues a certificate for the address it
completed a handshake with (the three-way handshake is the return
routability check) and hands certificates out instead of plain addresses;
peers check each one (signature, swarm, validity time, SAN) before they
contact the address, and gossip only certificates that passed.

X.509 needs a subject public key; PPSPP does not use it, so it is the
issuer's own key (no per-peer keys to manage).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from typing import Any
from urllib.parse import urlsplit

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID, SignatureAlgorithmOID

from swift.core.certcache import CLOCK_SKEW


class CertError(ValueError):
    """A membership certificate that must not be used (why in the message)."""


class CertExpired(CertError):
    """A genuine certificate past its notAfter (or not yet valid): unusable,
    but no sign of a defective sender -- clocks and relays lag (12.2.2)."""


def _utc(t: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(int(t), dt.timezone.utc)


def _url(host: str, port: int, swarm_id: bytes) -> str:
    h = f"[{host}]" if ":" in host else host
    return f"file://{h}:{port}/{swarm_id.hex()}"


def new_ca_key() -> ec.EllipticCurvePrivateKey:
    """A tracker (CA) key: ECDSA P-256."""
    return ec.generate_private_key(ec.SECP256R1())


def ca_public_bytes(key: Any) -> bytes:
    """The CA public key as DER SubjectPublicKeyInfo (swarm metadata)."""
    pub = key.public_key() if hasattr(key, "public_key") else key
    der: bytes = pub.public_bytes(serialization.Encoding.DER,
                                  serialization.PublicFormat.SubjectPublicKeyInfo)
    return der


def issue(ca_key: Any, swarm_id: bytes, host: str, port: int, now: float,
          lifetime: float = 3600.0) -> bytes:
    """DER membership certificate for ``host:port`` in ``swarm_id`` at ``now``."""
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "PPSPP swarm tracker")])
    subj = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{host}:{port}")])
    b = (x509.CertificateBuilder()
         .subject_name(subj).issuer_name(name)
         .public_key(ca_key.public_key())
         .serial_number(x509.random_serial_number())
         .not_valid_before(_utc(now))
         .not_valid_after(_utc(now + lifetime))
         .add_extension(x509.SubjectAlternativeName(
             [x509.UniformResourceIdentifier(_url(host, port, swarm_id))]), critical=True))
    cert = b.sign(ca_key, hashes.SHA256())
    return cert.public_bytes(serialization.Encoding.DER)


def check(der: bytes, ca_public: bytes, swarm_id: bytes, now: float,
          skew: float = CLOCK_SKEW) -> tuple[str, int]:
    """Verify a PEX_REScert certificate; returns the peer's (host, port).

    Raises :class:`CertError` (and nothing else, whatever the bytes) if it
    does not parse, is not ECDSA-with-SHA256 signed by the CA, is outside
    its validity time (notBefore may be up to ``skew`` seconds ahead of our
    clock), lacks the critical SAN URI, or names another swarm or a
    malformed address (8.13, 12.2).
    """
    host, port, _, _ = check_cert(der, ca_public, swarm_id, now, skew)
    return host, port


def check_cert(der: bytes, ca_public: bytes, swarm_id: bytes, now: float,
               skew: float = CLOCK_SKEW) -> tuple[str, int, float, float]:
    """:func:`check`, also returning notBefore and notAfter (Unix seconds)."""
    try:
        return _check(der, ca_public, swarm_id, now, skew)
    except CertError:
        raise
    except Exception as e:  # cryptography raises many types on odd DER
        raise CertError(f"unusable certificate: {type(e).__name__}") from None


def _check(der: bytes, ca_public: bytes, swarm_id: bytes, now: float,
           skew: float) -> tuple[str, int, float, float]:
    try:
        cert = x509.load_der_x509_certificate(der)
    except ValueError as e:
        raise CertError(f"not a DER certificate: {e}") from None
    try:
        pub = serialization.load_der_public_key(ca_public)
    except ValueError as e:
        raise CertError(f"bad CA key: {e}") from None
    if not isinstance(pub, ec.EllipticCurvePublicKey):
        raise CertError("CA key must be ECDSA")
    if cert.signature_algorithm_oid != SignatureAlgorithmOID.ECDSA_WITH_SHA256:
        raise CertError("certificate must be signed with ECDSA-with-SHA256")
    try:
        pub.verify(cert.signature, cert.tbs_certificate_bytes, ec.ECDSA(hashes.SHA256()))
    except (InvalidSignature, ValueError, TypeError):
        raise CertError("signature does not verify with the swarm's CA key") from None
    nb = cert.not_valid_before_utc.timestamp()
    na = cert.not_valid_after_utc.timestamp()
    if not (nb - skew <= now <= na):
        raise CertExpired("outside its validity time")
    try:
        ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    except (x509.ExtensionNotFound, ValueError):
        raise CertError("no Subject Alternative Name") from None
    if not ext.critical:
        raise CertError("Subject Alternative Name not marked critical")
    uris = ext.value.get_values_for_type(x509.UniformResourceIdentifier)
    if len(uris) != 1:
        raise CertError("need exactly one URI")
    u = urlsplit(uris[0])
    try:
        host, port = u.hostname, u.port
    except ValueError:
        raise CertError("bad port") from None
    if u.scheme != "file" or not host or not port:
        raise CertError("URI must be file://HOST:PORT/SWARMID")
    if u.path.lstrip("/").lower() != swarm_id.hex():
        raise CertError("certificate is for another swarm")
    try:
        ipaddress.ip_address(host)
    except ValueError:
        raise CertError("host must be an IP address here") from None
    return host, port, nb, na


def load_or_create_ca(path: str) -> Any:
    """The tracker's CA key from PEM ``path``, created if missing; also writes
    ``path.pub`` (DER public key, to hand out with the swarm metadata)."""
    import os
    if os.path.exists(path):
        with open(path, "rb") as f:
            key = serialization.load_pem_private_key(f.read(), None)
    else:
        key = new_ca_key()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption()))
    with open(path + ".pub", "wb") as f:
        f.write(ca_public_bytes(key))
    return key


def load_ca_public(path: str) -> bytes:
    """A CA public key file (DER or PEM) -> DER SubjectPublicKeyInfo."""
    with open(path, "rb") as f:
        raw = f.read()
    pub = (serialization.load_pem_public_key(raw) if raw.startswith(b"-----")
           else serialization.load_der_public_key(raw))
    return ca_public_bytes(pub)
