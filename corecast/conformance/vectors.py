"""LISP and CoreCast wire vectors (RFC 9300 sec. 5, RFC 9301 sec. 5; CoreCast PDUs).

``tests/vectors/lisp/lisp.vec`` is text: ``#`` comments naming the source,
a ``psk`` line (the key every signed Map-Register/Map-Notify in the file is
authenticated with) and ``vector KIND NAME HEX`` lines, KIND being
``control`` (a UDP/4342 payload), ``data`` (a LISP data header, UDP/4341) or
``corecast`` (a CoreCast PDU). Written by ``python -m corecast.conformance.vectors
export DIR``.
"""

from __future__ import annotations

import ipaddress
import subprocess
import sys
from pathlib import Path

from corecast.wire.codec import (
    EidRecord,
    LocatorRecord,
    MapRegister,
    MapReply,
    MapRequest,
    ecm_wrap,
    encode_cc_header,
    encode_cc_payload,
    encode_lisp_data,
    encode_map_reply,
    encode_map_request,
    make_lisp_data,
    sign,
)
from corecast.wire.constants import Action, AlgorithmId, HashId, LispType
from deliverykit.conformance import vectors_dir as shared_vectors_dir

PSK = b"vector-psk"


def vectors() -> list[tuple[str, str, bytes]]:
    """(kind, name, bytes) for every vector."""
    ip = ipaddress.ip_address
    loc = LocatorRecord(ip("192.0.2.1"), 1, 100, 255, 0, True, False, True)
    loc6 = LocatorRecord(ip("2001:db8::1"), 2, 50, 255, 0, False, False, True)
    rec = EidRecord(ipaddress.ip_network("10.1.0.0/16"), (loc, loc6), 1440, 0, True, 7)
    neg = EidRecord(ipaddress.ip_network("198.51.100.0/24"), (), 15, Action.NATIVELY_FORWARD)
    req = MapRequest(0x0123456789ABCDEF, (ip("192.0.2.9"),), (ipaddress.ip_network("10.1.2.3/32"),),
                     source_eid=ip("10.9.0.1"))
    out: list[tuple[str, str, bytes]] = [
        ("control", "map-request", encode_map_request(req)),
        ("control", "map-request-v6", encode_map_request(MapRequest(
            7, (ip("2001:db8::9"), ip("192.0.2.9")), (ipaddress.ip_network("2001:db8:1::/48"),)))),
        ("control", "map-reply", encode_map_reply(MapReply(0x0123456789ABCDEF, (rec,)))),
        ("control", "map-reply-negative", encode_map_reply(MapReply(42, (neg,)))),
        ("control", "ecm-map-request", ecm_wrap(encode_map_request(req), ip("192.0.2.9").packed,
                                                ip("10.1.2.3").packed, 4342)),
    ]
    for alg, name in (
        (AlgorithmId.HMAC_SHA_1_96, "sha1-96"),
        (AlgorithmId.HMAC_SHA_256_128, "sha256-128"),
        (AlgorithmId.HMAC_SHA_256_128_HKDF_SHA256, "sha256-128-hkdf"),
    ):
        m = MapRegister(
            0x1122334455667788,
            (rec,),
            7,
            alg,
            b"",
            LispType.MAP_REGISTER,
            proxy_reply=True,
            want_map_notify=True,
        )
        out.append(("control", f"map-register-{name}", sign(m, PSK)))
    n = MapRegister(
        0x1122334455667788, (rec,), 7, AlgorithmId.HMAC_SHA_256_128, b"", LispType.MAP_NOTIFY
    )
    out.append(("control", "map-notify-sha256-128", sign(n, PSK)))
    x = MapRegister(99, (rec,), 7, AlgorithmId.HMAC_SHA_256_128, b"", LispType.MAP_REGISTER,
                    xtr_id=bytes(range(16)), site_id=bytes(range(8)))
    out.append(("control", "map-register-xtr-id", sign(x, PSK)))
    # RFC 8060 sec. 4.1: EIDs of instance 0xABCDE as LCAF Instance ID addresses
    rec_iid = EidRecord(ipaddress.ip_network("10.1.0.0/16"), (loc,), 3, iid=0xABCDE)
    out.append(("control", "map-register-lcaf-iid", sign(MapRegister(
        0x1122334455667789, (rec_iid,), 7, AlgorithmId.HMAC_SHA_256_128, b"", LispType.MAP_REGISTER,
        proxy_reply=True), PSK)))
    out.append(("control", "map-request-lcaf-iid", encode_map_request(MapRequest(
        8, (ip("192.0.2.9"),), (ipaddress.ip_network("10.1.2.3/32"),), eid_iids=(0xABCDE,)))))
    for name, kw in (
        ("nonce", dict(nonce=0xABCDEF)),
        ("nonce-echo", dict(nonce=0x123456, echo=True)),
        ("lsb", dict(lsb=0x80000001)),
        ("instance-id", dict(instance_id=0xABCDE, lsb=3)),
        ("map-versions", dict(map_versions=(5, 7))),
        ("no-flags", {}),
        ("echo-nonce-iid-lsb", dict(nonce=0x5A5A5A, echo=True, instance_id=7, lsb=1)),
    ):
        out.append(("data", name, encode_lisp_data(make_lisp_data(**kw))))
    payload = bytes(range(256)) * 2
    out += [
        ("corecast", "payload-sha1", encode_cc_payload(1, payload, HashId.SHA1)),
        ("corecast", "payload-sha256", encode_cc_payload(2, payload, HashId.SHA256)),
        ("corecast", "header-v4", encode_cc_header(1, bytes(20), ip("10.1.2.3").packed, 5000)),
        (
            "corecast",
            "header-v6",
            encode_cc_header(3, bytes(32), ip("2001:db8::3").packed, 5001, HashId.SHA256),
        ),
    ]
    return out


def export(directory: str | Path) -> list[Path]:
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    try:
        commit = (
            subprocess.run(
                ["git", "rev-parse", "--short", "HEAD"],
                capture_output=True,
                text=True,
                cwd=Path(__file__).parent,
                timeout=5,
            ).stdout.strip()
            or "unknown"
        )
    except (OSError, subprocess.SubprocessError):
        commit = "unknown"
    lines = [
        "# LISP control (RFC 9301 sec. 5), data header (RFC 9300 sec. 5.3) and CoreCast PDU "
        "vectors",
        f"# source: corecast.wire.codec (this toolkit, commit {commit}), "
        "`python -m corecast.conformance.vectors export`",
        f"psk {PSK.decode()}",
    ]
    lines += [f"vector {k} {n} {b.hex()}" for k, n, b in vectors()]
    p = d / "lisp.vec"
    p.write_text("\n".join(lines) + "\n")
    return [p]


def parse(text: str) -> dict:
    v: dict = {"comments": [], "vectors": []}
    for line in text.splitlines():
        if line.startswith("#"):
            v["comments"].append(line[1:].strip())
        elif line.startswith("vector "):
            _, kind, name, hexs = line.split()
            v["vectors"].append((kind, name, bytes.fromhex(hexs)))
        elif line.startswith("psk "):
            v["psk"] = line[4:].strip().encode()
    return v


def vectors_dir() -> Path | None:
    """The lisp vector folder (see deliverykit.conformance.vectors_dir)."""
    return shared_vectors_dir("lisp")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "export":
        for p in export(sys.argv[2]):
            print(p)
        sys.exit(0)
    print("usage: python -m corecast.conformance.vectors export DIR", file=sys.stderr)
    sys.exit(2)
