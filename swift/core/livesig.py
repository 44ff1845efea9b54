"""Live signature algorithms (RFC 7574 sections 6.1, 7.7, 8.9).

The swarm ID of a live stream is the injector's public key encoded as a
DNSSEC DNSKEY without Base64: one algorithm octet, then the key (6.1).

* ECDSAP256SHA256 (13, the default): X||Y, 64 bytes (RFC 6605 section 4);
  signatures r||s, 64 bytes.
* RSASHA256 (8): RFC 3110 section 2: exponent length (one octet, or zero
  and two octets when the exponent is longer than 255 bytes), exponent,
  modulus; PKCS #1 v1.5 signatures with SHA-256 (RFC 5702), as long as the
  modulus (8.9: the receiver derives the length from the swarm ID).
"""

from __future__ import annotations

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import (
    decode_dss_signature,
    encode_dss_signature,
)

from swift.wire.constants import SigAlg

#: algorithms a live swarm can use here (7.7)
SUPPORTED = (SigAlg.ECDSAP256SHA256, SigAlg.RSASHA256)


def _int_bytes(v: int) -> bytes:
    return v.to_bytes(max(1, (v.bit_length() + 7) // 8), "big")


class LiveSigner:
    """One live signature algorithm and key; ``key`` only at the injector."""

    def __init__(self, alg: SigAlg, pub, key=None) -> None:
        self.alg = SigAlg(alg)
        if self.alg not in SUPPORTED:
            raise ValueError(f"live signature algorithm {self.alg.name} not supported")
        self.pub = pub
        self.key = key

    @classmethod
    def generate(cls, alg: SigAlg = SigAlg.ECDSAP256SHA256, rsa_bits: int = 2048) -> "LiveSigner":
        """A fresh injector key."""
        if SigAlg(alg) == SigAlg.RSASHA256:
            key = rsa.generate_private_key(public_exponent=65537, key_size=rsa_bits)
        else:
            key = ec.generate_private_key(ec.SECP256R1())
        return cls(alg, key.public_key(), key)

    @classmethod
    def from_key(cls, key) -> "LiveSigner":
        """An injector from an existing private key (EC P-256 or RSA)."""
        if isinstance(key, rsa.RSAPrivateKey):
            return cls(SigAlg.RSASHA256, key.public_key(), key)
        if isinstance(key, ec.EllipticCurvePrivateKey) and key.curve.name == "secp256r1":
            return cls(SigAlg.ECDSAP256SHA256, key.public_key(), key)
        raise ValueError("need an ECDSA P-256 or RSA private key")

    @classmethod
    def from_swarm_id(cls, sid: bytes) -> "LiveSigner":
        """Receiver side: the public key in a swarm ID (ValueError if malformed)."""
        if not sid:
            raise ValueError("empty swarm ID")
        alg = sid[0]
        if alg == SigAlg.ECDSAP256SHA256:
            if len(sid) != 65:
                raise ValueError("ECDSA P-256 swarm ID must be 65 bytes")
            x = int.from_bytes(sid[1:33], "big")
            y = int.from_bytes(sid[33:], "big")
            return cls(alg, ec.EllipticCurvePublicNumbers(x, y, ec.SECP256R1()).public_key())
        if alg == SigAlg.RSASHA256:
            body = sid[1:]
            if len(body) < 3:
                raise ValueError("RSA swarm ID too short")
            if body[0]:
                elen, p = body[0], 1
            else:
                elen, p = int.from_bytes(body[1:3], "big"), 3
            e = int.from_bytes(body[p:p + elen], "big")
            n = int.from_bytes(body[p + elen:], "big")
            if elen == 0 or p + elen >= len(body) or n.bit_length() < 1024 or e < 3:
                raise ValueError("malformed RSA swarm ID")
            return cls(alg, rsa.RSAPublicNumbers(e, n).public_key())
        raise ValueError(f"swarm ID algorithm {alg} not supported")

    @property
    def swarm_id(self) -> bytes:
        """DNSKEY-style swarm ID (6.1)."""
        if self.alg == SigAlg.RSASHA256:
            nums = self.pub.public_numbers()
            e = _int_bytes(nums.e)
            head = bytes([len(e)]) if len(e) <= 255 else b"\x00" + len(e).to_bytes(2, "big")
            return bytes([self.alg]) + head + e + nums.n.to_bytes(self.sig_size, "big")
        n = self.pub.public_numbers()
        return bytes([self.alg]) + n.x.to_bytes(32, "big") + n.y.to_bytes(32, "big")

    @property
    def sig_size(self) -> int:
        """Signature length on the wire (8.9)."""
        if self.alg == SigAlg.RSASHA256:
            return (self.pub.key_size + 7) // 8
        return 64

    def sign(self, text: bytes) -> bytes:
        if self.key is None:
            raise ValueError("only the injector signs")
        if self.alg == SigAlg.RSASHA256:
            return self.key.sign(text, padding.PKCS1v15(), hashes.SHA256())
        r, s = decode_dss_signature(self.key.sign(text, ec.ECDSA(hashes.SHA256())))
        return r.to_bytes(32, "big") + s.to_bytes(32, "big")

    def verify(self, sig: bytes, text: bytes) -> bool:
        if len(sig) != self.sig_size:
            return False
        try:
            if self.alg == SigAlg.RSASHA256:
                self.pub.verify(sig, text, padding.PKCS1v15(), hashes.SHA256())
            else:
                der = encode_dss_signature(int.from_bytes(sig[:32], "big"),
                                           int.from_bytes(sig[32:], "big"))
                self.pub.verify(der, text, ec.ECDSA(hashes.SHA256()))
        except InvalidSignature:
            return False
        return True
