"""CoreCast/LISP analyser for ``deliverykit analyse CAPTURE`` (entry-point group
``deliverykit.analysers``, name ``corecast``).

From any capture (e.g. tcpdump on an ITR's outside link, or on loopback
under ``corecast deploy``) it reports:

* ``corecast_links``: per destination RLOC, the LISP data packets that carry a
  CoreCast payload, a CoreCast header, or plain traffic, with IP bytes; and
  the bytes per payload, which equation 3 predicts per link as
  (H_L + P_CC) + (H_L + H_CC) k_link;
* ``corecast_channels``: per channel EID, payload packets, distinct payload
  hashes, header packets and the sequence range seen (direct, source->ITR or
  encapsulated), the CoreCast bytes that carried them and the *equivalent
  unicast volume*: one native unicast packet (H_I + D, paper eq. 5's unit)
  per header PDU, D being the length of the payload its hash names;
* ``corecast_as`` (with ``--opt as-table=FILE``: ``prefix,asn`` or
  ``prefix asn`` lines, longest-prefix match with corecast's own
  :class:`~corecast.core.maptrie.PrefixTrie`): every IP byte of the capture
  attributed to ASes: transit in/out (source and destination in different
  ASes) and local (both in the same AS), and of those the CoreCast share:
  LISP data carrying CoreCast PDUs into the AS (eq. 3), the local deliveries
  of CoreCast payloads (a UDP payload whose hash is a payload PDU's hash:
  eq. 5), and the unicast equivalent of the header PDUs into the AS
  (H_L + H_I + D each: what unicast through the same tunnels would cost);
* ``lisp_control``: LISP control messages by type (RFC 9301 section 5.1).

Options: ``as-table=FILE``; ``inside-port=9341[,PORT]`` (UDP ports on which
an ITR receives inner IP packets from a source, as ``corecast deploy`` and
``corecast source --itr`` send them); ``max-hashes`` (payload hashes
remembered per channel and globally, oldest forgotten first),
``max-channels``, ``max-links``.  Decoding errors are counted, never raised;
state beyond a cap is counted in ``corecast_errors``.

Strict: a packet on the LISP data port without a plausible inner IP header
(version 4 or 6, header and length fields that fit the packet) is counted as
undecodable, not as plain LISP data; a LISP control message of no known type
likewise.  Frames the capture cut short (snap length) mark the rows they feed
in the ``unreliable`` column: their destination's link (a cut CoreCast PDU is
neither a payload nor a header), every channel (the PDU's channel may be in
the cut part), and with an AS table the ASes at both ends.
"""

from __future__ import annotations

import ipaddress
from collections import defaultdict
from pathlib import Path

from corecast.core.maptrie import PrefixTrie, parse_prefix
from corecast.wire.codec import CCHeader, DecodeError, decode_cc, decode_ip, decode_udp, digest
from corecast.wire.constants import (
    CORECAST_UDP_PORT,
    IPPROTO_CORECAST,
    LISP_CONTROL_PORT,
    LISP_DATA_PORT,
    LispType,
)
from deliverykit.analyse import UNRELIABLE, cut_reason

_TYPE_NAMES = {t.value: t.name.replace("_", "-").title() for t in LispType}
ITR_INSIDE_PORT = 9341  # corecast.deploy's ITR inside port (kept here: deploy imports asyncio)


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


def load_as_table(path: str | Path) -> PrefixTrie:
    """``prefix,asn`` (CSV) or ``prefix asn`` lines; '#' comments and a header row skipped."""
    table: PrefixTrie[int] = PrefixTrie()
    for line in Path(path).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.replace(",", " ").split()
        if len(parts) < 2:
            continue
        try:
            addr, plen = parse_prefix(parts[0])
            asn = int(parts[1].upper().removeprefix("AS"))
        except ValueError:
            continue  # header row or junk
        table.insert(addr, plen, asn)
    return table


def _as_row() -> dict:
    return {"transit_in_bytes": 0, "transit_out_bytes": 0, "local_bytes": 0,
            "transit_in_corecast_bytes": 0, "cc_payload_packets_in": 0, "cc_header_packets_in": 0,
            "local_corecast_deliveries": 0, "local_corecast_delivery_bytes": 0,
            "unicast_equivalent_transit_in_bytes": 0}


def _plausible_ip(b: bytes | memoryview, cut: bool) -> bool:
    """An inner IP header whose length fields fit the packet (or exceed it, if cut)."""
    if len(b) < 20:
        return cut and len(b) >= 1 and b[0] >> 4 in (4, 6)
    v = b[0] >> 4
    if v == 4:
        ihl, total = (b[0] & 0x0F) * 4, (b[2] << 8) | b[3]
        return ihl >= 20 and total >= ihl and (total == len(b) or (cut and total > len(b)))
    if v == 6:
        if len(b) < 40:
            return cut
        total = 40 + ((b[4] << 8) | b[5])
        return total == len(b) or (cut and total > len(b))
    return False


class Analyser:
    name = "corecast"
    handles_truncation = True

    def __init__(self, options: dict | None = None) -> None:
        o = options or {}
        self.inside_ports = {int(p) for p in str(o.get("inside-port", ITR_INSIDE_PORT)).split(",")
                             if p}
        self.max_hashes = int(o.get("max-hashes", 65536))
        self.max_channels = int(o.get("max-channels", 10_000))
        self.max_links = int(o.get("max-links", 100_000))
        self.as_table = load_as_table(o["as-table"]) if o.get("as-table") else None
        self.links: dict[str, list[int]] = {}
        self.channels: dict[str, dict] = {}
        self.control: dict[str, int] = defaultdict(int)
        self.errors = 0
        self.dropped = {"channels": 0, "links": 0, "hashes_forgotten": 0, "as_cache": 0}
        # recent payload hashes of every channel: hash -> payload length (local deliveries)
        self.recent: dict[bytes, int] = {}
        self.recent_lens: dict[int, int] = {}
        self.hash_ids: set[int] = set()
        self.ases: dict = {}
        self._as_cache: dict[str, int | None] = {}
        self._names: dict[bytes, str] = {}  # channel EID bytes -> text
        self.not_lisp = 0  # on the LISP data port, but no plausible inner IP header
        self.cut_links: dict[str, int] = {}  # destination RLOC -> frames cut (snap length)
        self.cut_frames = 0
        self.cut_cc = 0  # of those, ones that may have carried a CoreCast PDU
        self.cut_as: set = set()

    def accepts(self, frame) -> bool:
        if self.as_table is not None:
            return True  # every byte is attributed to an AS
        if frame.proto == IPPROTO_CORECAST:
            return True
        return frame.proto == 17 and (
            LISP_DATA_PORT in (frame.sport, frame.dport)
            or LISP_CONTROL_PORT in (frame.sport, frame.dport)
            or frame.dport == CORECAST_UDP_PORT or frame.dport in self.inside_ports)

    # ------------------------------------------------------------------
    def _remember(self, h: bytes, n: int) -> None:
        if h in self.recent:
            return
        self.recent[h] = n
        self.recent_lens[n] = self.recent_lens.get(n, 0) + 1
        if len(self.recent) > self.max_hashes:
            old = next(iter(self.recent))
            ln = self.recent.pop(old)
            self.recent_lens[ln] -= 1
            if not self.recent_lens[ln]:
                del self.recent_lens[ln]
            self.dropped["hashes_forgotten"] += 1

    def _channel(self, chan: bytes, pdu, pkt_bytes: int, outer: int) -> int:
        """Account one PDU; returns its unicast-equivalent bytes through the same tunnel."""
        key = self._names.get(chan)
        if key is None:
            key = str(ipaddress.ip_address(chan))
            if len(self._names) < self.max_channels:
                self._names[chan] = key
        st = self.channels.get(key)
        if st is None:
            if len(self.channels) >= self.max_channels:
                self.dropped["channels"] += 1
                return 0
            st = self.channels[key] = {"payloads": 0, "headers": 0, "hashes": {},
                                       "distinct": 0, "seq_min": None, "seq_max": None,
                                       "cc_bytes": 0, "unicast": 0, "unmatched": 0}
        st["cc_bytes"] += pkt_bytes
        if isinstance(pdu, CCHeader):
            st["headers"] += 1
            d = st["hashes"].get(pdu.hash)
            if d is None:
                d = self.recent.get(pdu.hash)
            if d is None:
                st["unmatched"] += 1
                return 0
            h_i = (20 if len(pdu.eid) == 4 else 40) + 8
            st["unicast"] += h_i + d
            return outer + h_i + d
        st["payloads"] += 1
        n = len(pdu.payload)
        if pdu.hash not in st["hashes"]:
            st["distinct"] += 1
            st["hashes"][pdu.hash] = n
            if len(st["hashes"]) > self.max_hashes:
                st["hashes"].pop(next(iter(st["hashes"])))
                self.dropped["hashes_forgotten"] += 1
        self._remember(pdu.hash, n)
        self.hash_ids.add(pdu.hash_id)
        st["seq_min"] = pdu.seq if st["seq_min"] is None else min(st["seq_min"], pdu.seq)
        st["seq_max"] = pdu.seq if st["seq_max"] is None else max(st["seq_max"], pdu.seq)
        return 0

    def feed(self, f) -> None:
        kind, unicast = "other", 0
        if f.truncated:
            self.cut_frames += 1
            if f.proto == IPPROTO_CORECAST or (f.proto == 17 and (
                    LISP_DATA_PORT in (f.sport, f.dport) or f.dport == CORECAST_UDP_PORT
                    or f.dport in self.inside_ports)):
                self.cut_cc += 1
        try:
            if f.proto == 17 and LISP_DATA_PORT in (f.sport, f.dport):
                if len(f.payload) < 8 or not _plausible_ip(memoryview(f.payload)[8:], f.truncated):
                    self.not_lisp += 1  # not LISP data: not a link's packet
                    raise DecodeError("no plausible inner IP header")
                if f.truncated and (
                    f.dst in self.cut_links or len(self.cut_links) < self.max_links
                ):
                    self.cut_links[f.dst] = self.cut_links.get(f.dst, 0) + 1
                link = self.links.get(f.dst)
                if link is None:
                    if len(self.links) >= self.max_links:
                        self.dropped["links"] += 1
                        link = [0, 0, 0, 0]
                    else:
                        link = self.links[f.dst] = [0, 0, 0, 0]
                link[3] += f.length
                kind = "lisp_data"
                inner = decode_ip(memoryview(f.payload)[8:])
                body = _cc_body(inner)
                pdu = decode_cc(body) if body is not None else None
                if pdu is None:
                    link[2] += 1
                else:
                    header = isinstance(pdu, CCHeader)
                    link[1 if header else 0] += 1
                    kind = "cc_header" if header else "cc_payload"
                    outer = f.length - (inner.header_len + len(inner.payload))
                    unicast = self._channel(inner.dst, pdu, f.length, outer)
            elif f.proto == 17 and LISP_CONTROL_PORT in (f.sport, f.dport):
                t = f.payload[0] >> 4 if f.payload else -1
                if t not in _TYPE_NAMES:
                    raise DecodeError(f"LISP control type {t}")
                self.control[_TYPE_NAMES[t]] += 1
            elif f.proto == IPPROTO_CORECAST or (f.proto == 17 and f.dport == CORECAST_UDP_PORT):
                # CoreCast straight from a source (raw IP 253 or UDP 54341)
                self._channel(ipaddress.ip_address(f.dst).packed, decode_cc(f.payload), f.length, 0)
            elif f.proto == 17 and f.dport in self.inside_ports:
                # source -> ITR: an inner IP packet in UDP (corecast deploy, source --itr)
                inner = decode_ip(f.payload)
                body = _cc_body(inner)
                if body is not None:
                    self._channel(inner.dst, decode_cc(body), f.length, 0)
            elif f.proto == 17 and self.recent_lens and len(f.payload) in self.recent_lens:
                for hid in self.hash_ids:  # an ETR's local delivery of a payload?
                    if digest(hid, f.payload) in self.recent:
                        kind = "cc_delivery"
                        break
        except (DecodeError, ValueError, IndexError):
            self.errors += 1
        if self.as_table is not None:
            self._by_as(f, kind, unicast)
            if f.truncated and len(self.cut_as) < self.max_links:
                for ip in (f.src, f.dst):
                    asn = self._asn(ip)
                    self.cut_as.add("unmapped" if asn is None else asn)

    def _asn(self, ip: str) -> int | None:
        a = self._as_cache.get(ip, -1)
        if a == -1:
            assert self.as_table is not None  # only called with an AS table
            hit = self.as_table.lookup(ipaddress.ip_address(ip).packed)
            a = hit[1] if hit else None
            if len(self._as_cache) < 1_000_000:
                self._as_cache[ip] = a
            else:
                self.dropped["as_cache"] += 1
        return a

    def _row(self, asn) -> dict:
        r = self.ases.get(asn)
        if r is None:
            r = self.ases[asn] = _as_row()
        return r

    def _by_as(self, f, kind: str, unicast: int) -> None:
        sa, da = self._asn(f.src), self._asn(f.dst)
        n = f.length
        if sa is not None and sa == da:
            r = self._row(sa)
            r["local_bytes"] += n
            if kind == "cc_delivery":
                r["local_corecast_deliveries"] += 1
                r["local_corecast_delivery_bytes"] += n
            return
        self._row(sa if sa is not None else "unmapped")["transit_out_bytes"] += n
        r = self._row(da if da is not None else "unmapped")
        r["transit_in_bytes"] += n
        if kind in ("cc_payload", "cc_header"):
            r["transit_in_corecast_bytes"] += n
            r["cc_" + kind[3:] + "_packets_in"] += 1
            r["unicast_equivalent_transit_in_bytes"] += unicast

    # ------------------------------------------------------------------
    def tables(self) -> dict[str, list[dict]]:
        links = []
        for rloc, (p, h, plain, b) in sorted(self.links.items()):
            links.append({"rloc": rloc, "payload_packets": p, "header_packets": h,
                          "plain_packets": plain, "ip_bytes": b,
                          "bytes_per_payload": round(b / p, 1) if p else None})
        chans = [{"channel": c, "payload_packets": s["payloads"],
                  "distinct_payloads": s["distinct"], "header_packets": s["headers"],
                  "seq_first": s["seq_min"], "seq_last": s["seq_max"],
                  "corecast_ip_bytes": s["cc_bytes"], "unicast_equivalent_bytes": s["unicast"],
                  "headers_without_known_payload": s["unmatched"],
                  "unicast_over_corecast": round(s["unicast"] / s["cc_bytes"], 3)
                  if s["cc_bytes"] else None}
                 for c, s in sorted(self.channels.items())]
        ctl = [{"message": k, "packets": v} for k, v in sorted(self.control.items())]
        if self.errors:
            ctl.append({"message": "undecodable", "packets": self.errors})
        out = {"corecast_links": links, "corecast_channels": chans, "lisp_control": ctl}
        if self.as_table is not None:
            out["corecast_as"] = [{"asn": a, **r} for a, r in
                                  sorted(self.ases.items(), key=lambda kv: str(kv[0]).zfill(12))]
        errs = [{"what": f"dropped: {k}", "count": v} for k, v in self.dropped.items() if v]
        errs.append({"what": "undecodable", "count": self.errors})
        if self.not_lisp:
            errs.append({"what": "of those, on the LISP data port without a plausible inner IP "
                                 "header (not counted on any link)", "count": self.not_lisp})
        if self.cut_frames:
            errs.append({"what": "frames cut by the snap length", "count": self.cut_frames})
            self._mark_cut(out)
        for r in chans:  # a header whose payload is unknown adds nothing to the equivalent
            if r["headers_without_known_payload"] and not r.get(UNRELIABLE):
                r[UNRELIABLE] = (f"{r['headers_without_known_payload']} header PDUs name a payload "
                                 "not in the capture (or forgotten at max-hashes): "
                                 "unicast_equivalent_bytes is a lower bound")
        out["corecast_errors"] = errs
        return out

    def _mark_cut(self, out: dict[str, list[dict]]) -> None:
        for r in out["corecast_links"]:
            n = self.cut_links.get(r["rloc"], 0)
            r[UNRELIABLE] = cut_reason(n) if n else None
        for r in out["corecast_channels"]:  # a cut PDU's channel may be in the cut part
            r[UNRELIABLE] = cut_reason(self.cut_cc) if self.cut_cc else None
        for r in out.get("corecast_as", []):
            r[UNRELIABLE] = cut_reason(self.cut_frames) if r["asn"] in self.cut_as else None

    def plots(self, outdir) -> list:
        """``corecast-as.png``: per AS, CoreCast transit vs its unicast equivalent (and local
        deliveries); without an AS table, ``corecast-channels.png`` per channel."""
        bars: tuple[tuple[str, str], ...]
        if self.as_table is not None:
            rows = [(str(a), r) for a, r in self.ases.items()
                    if r["transit_in_corecast_bytes"] or r["local_corecast_delivery_bytes"]]
            bars = (("transit_in_corecast_bytes", "CoreCast transit in (eq. 3)"),
                    ("unicast_equivalent_transit_in_bytes", "unicast equivalent transit in"),
                    ("local_corecast_delivery_bytes", "local deliveries (eq. 5)"))
            name, title = "corecast-as.png", "CoreCast vs unicast per AS"
        else:
            rows = [(c, {"cc": s["cc_bytes"], "uc": s["unicast"]})
                    for c, s in self.channels.items() if s["cc_bytes"]]
            bars = (("cc", "CoreCast IP bytes"), ("uc", "equivalent unicast bytes"))
            name, title = "corecast-channels.png", "CoreCast vs unicast per channel"
        if not rows:
            return []
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        rows = sorted(rows)[:40]
        fig, ax = plt.subplots(figsize=(max(6, 0.6 * len(rows) * len(bars)), 4))
        w = 0.8 / len(bars)
        for i, (key, label) in enumerate(bars):
            ax.bar([x + i * w for x in range(len(rows))], [r[key] / 1e3 for _, r in rows], w,
                   label=label)
        ax.set_xticks([x + 0.4 - w / 2 for x in range(len(rows))], [k for k, _ in rows],
                      rotation=30)
        ax.set_ylabel("kB in the capture")
        ax.set_title(title + (" (UNRELIABLE: frames cut by the snap length)"
                              if self.cut_frames else ""))
        ax.legend(fontsize="small")
        p = Path(outdir) / name
        fig.savefig(p, dpi=100, bbox_inches="tight")
        plt.close(fig)
        return [p]
