"""CoreCast/LISP analyser for ``deliverykit analyse CAPTURE`` (entry-point group
``deliverykit.analysers``, name ``corecast``).

From any capture (e.g. tcpdump on an ITR's outside link) it reports:

* ``corecast_links``: per destination RLOC, the LISP data packets that carry a
  CoreCast payload, a CoreCast header, or plain traffic, with IP bytes; and
  the bytes per payload, which equation 3 predicts per link as
  (H_L + P_CC) + (H_L + H_CC) k_link;
* ``corecast_channels``: per channel EID, payload packets, distinct payload
  hashes, header packets and the sequence range seen (direct or encapsulated);
* ``lisp_control``: LISP control messages by type (RFC 9301 section 5.1).

Options: none.  Decoding errors are counted, never raised.
"""

from __future__ import annotations

import ipaddress
from collections import defaultdict

from corecast.wire.codec import CCHeader, DecodeError, decode_cc, decode_ip, decode_udp
from corecast.wire.constants import (
    CORECAST_UDP_PORT,
    IPPROTO_CORECAST,
    LISP_CONTROL_PORT,
    LISP_DATA_PORT,
    LispType,
)

_TYPE_NAMES = {t.value: t.name.replace("_", "-").title() for t in LispType}


def _cc_body(ip) -> memoryview | None:
    """The CoreCast PDU inside an inner IP packet, or None."""
    if ip.proto == IPPROTO_CORECAST:
        return ip.payload
    if ip.proto == 17:
        try:
            _s, dport, body = decode_udp(ip.payload)
        except DecodeError:
            return None
        if dport == CORECAST_UDP_PORT:
            return body
    return None


class Analyser:
    name = "corecast"

    def __init__(self, options: dict | None = None) -> None:
        self.links: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
        self.channels: dict[str, dict] = {}
        self.control: dict[str, int] = defaultdict(int)
        self.errors = 0

    def accepts(self, frame) -> bool:
        if frame.proto == IPPROTO_CORECAST:
            return True
        return frame.proto == 17 and (
            LISP_DATA_PORT in (frame.sport, frame.dport)
            or LISP_CONTROL_PORT in (frame.sport, frame.dport)
            or frame.dport == CORECAST_UDP_PORT)

    def _channel(self, chan: bytes, pdu) -> None:
        key = str(ipaddress.ip_address(chan))
        st = self.channels.setdefault(key, {"payloads": 0, "headers": 0, "hashes": set(),
                                            "seq_min": None, "seq_max": None})
        if isinstance(pdu, CCHeader):
            st["headers"] += 1
            return
        st["payloads"] += 1
        st["hashes"].add(pdu.hash)
        st["seq_min"] = pdu.seq if st["seq_min"] is None else min(st["seq_min"], pdu.seq)
        st["seq_max"] = pdu.seq if st["seq_max"] is None else max(st["seq_max"], pdu.seq)

    def feed(self, f) -> None:
        try:
            if f.proto == 17 and LISP_DATA_PORT in (f.sport, f.dport):
                link = self.links[f.dst]
                link[3] += f.length
                inner = decode_ip(memoryview(f.payload)[8:])
                body = _cc_body(inner)
                pdu = decode_cc(body) if body is not None else None
                if pdu is None:
                    link[2] += 1
                    return
                link[1 if isinstance(pdu, CCHeader) else 0] += 1
                self._channel(inner.dst, pdu)
            elif f.proto == 17 and LISP_CONTROL_PORT in (f.sport, f.dport):
                t = f.payload[0] >> 4 if f.payload else -1
                self.control[_TYPE_NAMES.get(t, f"type-{t}")] += 1
            else:  # CoreCast straight from a source (raw IP 253 or UDP 54341)
                body = f.payload
                self._channel(ipaddress.ip_address(f.dst).packed, decode_cc(body))
        except (DecodeError, ValueError, IndexError):
            self.errors += 1

    def tables(self) -> dict[str, list[dict]]:
        links = []
        for rloc, (p, h, plain, b) in sorted(self.links.items()):
            links.append({"rloc": rloc, "payload_packets": p, "header_packets": h,
                          "plain_packets": plain, "ip_bytes": b,
                          "bytes_per_payload": round(b / p, 1) if p else None})
        chans = [{"channel": c, "payload_packets": s["payloads"],
                  "distinct_payloads": len(s["hashes"]), "header_packets": s["headers"],
                  "seq_first": s["seq_min"], "seq_last": s["seq_max"]}
                 for c, s in sorted(self.channels.items())]
        ctl = [{"message": k, "packets": v} for k, v in sorted(self.control.items())]
        if self.errors:
            ctl.append({"message": "undecodable", "packets": self.errors})
        return {"corecast_links": links, "corecast_channels": chans, "lisp_control": ctl}

    def plots(self, outdir) -> list:
        return []
