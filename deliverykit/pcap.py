"""Streaming pcap / pcapng reader with link, IP and UDP decoding.

Built for captures of gigabytes: reads in large blocks, never holds the file
in memory, and decodes only the headers it needs with ``struct`` (scapy's
``rdpcap`` builds a Python object per layer and is ~100x slower). Analysers
that want the full scapy view decode ``Frame.payload`` with their layers.

Link types: Ethernet (with 802.1Q tags), BSD loopback/NULL, raw IP (12, 101,
228, 229), Linux cooked SLL (113) and SLL2 (276) as written by ``tcpdump -i any``.
IPv4 fragments after the first carry no UDP header and are reported with
``sport = dport = None``. A malformed record is counted in ``reader.stats``
and skipped; a corrupt file header raises :class:`PcapError`.

Snap length: a frame captured shorter than it was on the wire (``tcpdump -s
65535`` on loopback, whose frames reach 65,549 bytes; the pcap record's or
pcapng EPB's captured length below its original length, or an IP/UDP length
field beyond the bytes captured) is counted in ``stats["truncated"]`` and
still delivered, with ``Frame.truncated`` set, so each analyser can mark the
figures it feeds as unreliable. One cut inside its IP or UDP header cannot be
delivered: it is counted in ``truncated`` and in ``truncated_headers``.
``file_truncated`` is 1 when the file itself ends inside a record.
``dropped_by_capture`` (pcapng with an Interface Statistics Block, as dumpcap
and tshark write: isb_ifdrop + isb_osdrop) counts packets that never reached
the file; a classic pcap does not record them.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

PCAP_MAGIC = {0xA1B2C3D4: 1e-6, 0xA1B23C4D: 1e-9}
PCAPNG_SHB = 0x0A0D0D0A

LINKTYPE_NULL, LINKTYPE_ETHERNET, LINKTYPE_RAW12, LINKTYPE_RAW = 0, 1, 12, 101
LINKTYPE_SLL, LINKTYPE_IPV4, LINKTYPE_IPV6, LINKTYPE_SLL2 = 113, 228, 229, 276

IPPROTO_UDP = 17
_V6_EXT = {0, 43, 60}  # hop-by-hop, routing, destination options (fragment 44 handled apart)


class PcapError(ValueError):
    """The file is not a pcap/pcapng capture, or its header is corrupt."""


@dataclass(frozen=True, slots=True)
class Frame:
    """One IP packet from a capture."""

    ts: float          #: capture time, seconds since the epoch
    src: str           #: IP source address
    dst: str           #: IP destination address
    proto: int         #: IP protocol number (17 = UDP)
    sport: int | None  #: UDP source port (None if not UDP or a non-first fragment)
    dport: int | None  #: UDP destination port
    payload: bytes     #: UDP payload, or the IP payload for other protocols (as captured)
    length: int        #: original IP packet length in bytes (as on the wire)
    #: fewer bytes were captured than were on the wire (snap length): ``payload`` is cut short
    truncated: bool = False


_ADDR_CACHE: dict[bytes, str] = {}


def _ip(raw: bytes) -> str:
    """Address bytes to text, cached: a capture has few distinct addresses."""
    text = _ADDR_CACHE.get(raw)
    if text is None:
        if len(_ADDR_CACHE) >= 65536:  # bounded on hostile captures
            _ADDR_CACHE.clear()
        text = _ADDR_CACHE[raw] = socket.inet_ntop(
            socket.AF_INET if len(raw) == 4 else socket.AF_INET6, raw
        )
    return text


class Reader:
    """Iterate the IP frames of a pcap or pcapng file: ``for f in Reader(path): ...``."""

    BLOCK = 1 << 20

    def __init__(self, path: str | Path, *, progress=None) -> None:
        self.path = Path(path)
        self.size = self.path.stat().st_size
        self.progress = progress  #: callable(bytes_read) or None
        self.stats = {"records": 0, "frames": 0, "non_ip": 0, "truncated": 0,
                      "truncated_headers": 0, "malformed": 0, "fragments": 0, "file_truncated": 0}

    # --- record layer ----------------------------------------------------
    def records(self) -> Iterator[tuple[float, int, bytes, int]]:
        """(timestamp, linktype, link-layer bytes as captured, length on the wire) per record."""
        with self.path.open("rb") as fh:
            head = fh.read(4)
            if len(head) < 4:
                raise PcapError(f"{self.path}: empty or not a capture")
            (magic_le,) = struct.unpack("<I", head)
            fh.seek(0)
            if magic_le == PCAPNG_SHB:
                yield from self._pcapng(fh)
            else:
                yield from self._pcap(fh)

    def _pcap(self, fh: BinaryIO) -> Iterator[tuple[float, int, bytes, int]]:
        hdr = fh.read(24)
        for endian in "<>":
            magic = struct.unpack(endian + "I", hdr[:4])[0]
            if magic in PCAP_MAGIC:
                break
        else:
            raise PcapError(f"{self.path}: not a pcap or pcapng file (magic {hdr[:4].hex()})")
        if len(hdr) < 24:
            raise PcapError(f"{self.path}: truncated pcap header")
        scale = PCAP_MAGIC[magic]
        linktype = struct.unpack(endian + "I", hdr[20:24])[0] & 0x0FFFFFFF
        rec = struct.Struct(endian + "IIII")
        buf, pos, done = b"", 0, 24
        while True:
            if len(buf) - pos < 16:
                more = fh.read(self.BLOCK)
                if not more:
                    if len(buf) - pos:
                        self.stats["file_truncated"] = 1
                    return
                buf, pos = buf[pos:] + more, 0
                continue
            sec, frac, incl, orig = rec.unpack_from(buf, pos)
            if incl > 262144 * 4:
                self.stats["malformed"] += 1
                return  # a corrupt length: nothing after it can be trusted
            while len(buf) - pos < 16 + incl:
                more = fh.read(max(self.BLOCK, incl))
                if not more:
                    self.stats["file_truncated"] = 1
                    return
                buf, pos = buf[pos:] + more, 0
            data = buf[pos + 16:pos + 16 + incl]
            pos += 16 + incl
            done += 16 + incl
            self.stats["records"] += 1
            if self.progress and self.stats["records"] % 4096 == 0:
                self.progress(done)
            yield sec + frac * scale, linktype, data, orig

    def _pcapng(self, fh: BinaryIO) -> Iterator[tuple[float, int, bytes, int]]:
        endian = "<"
        ifaces: list[tuple[int, float]] = []
        drops: dict[int, int] = {}  # interface -> packets dropped, as its last ISB says
        done = 0
        while True:
            head = fh.read(8)
            if len(head) < 8:
                if head:
                    self.stats["file_truncated"] = 1
                return
            btype, blen = struct.unpack(endian + "II", head)
            if btype == PCAPNG_SHB:
                bom = fh.read(4)
                endian = "<" if bom == b"\x4d\x3c\x2b\x1a" else ">"
                if bom not in (b"\x4d\x3c\x2b\x1a", b"\x1a\x2b\x3c\x4d"):
                    raise PcapError(f"{self.path}: corrupt pcapng section header")
                blen = struct.unpack(endian + "I", head[4:])[0]
                body = bom + fh.read(blen - 12)
                ifaces = []
            else:
                body = fh.read(blen - 8) if blen >= 12 else b""
            if blen < 12:
                self.stats["malformed"] += 1
                return  # a corrupt length: nothing after it can be trusted
            if len(body) < blen - 8:
                self.stats["file_truncated"] = 1
                return
            done += blen
            body = body[:-4]  # trailing block length
            if btype == 1 and len(body) >= 8:  # interface description
                linktype = struct.unpack_from(endian + "H", body, 0)[0]
                ifaces.append((linktype, self._tsresol(body[8:], endian)))
            elif btype == 6 and len(body) >= 20:  # enhanced packet
                ifid, hi, lo, cap, orig = struct.unpack_from(endian + "IIIII", body, 0)
                if ifid >= len(ifaces) or 20 + cap > len(body):
                    self.stats["malformed"] += 1
                    continue
                linktype, res = ifaces[ifid]
                self.stats["records"] += 1
                if self.progress and self.stats["records"] % 4096 == 0:
                    self.progress(done)
                yield ((hi << 32) | lo) * res, linktype, body[20:20 + cap], orig
            elif btype == 5 and len(body) >= 12:  # interface statistics (dumpcap, tshark)
                ifid = struct.unpack_from(endian + "I", body, 0)[0]
                drops[ifid] = self._isb_drops(body[12:], endian)
                self.stats["dropped_by_capture"] = sum(drops.values())
            elif btype == 3 and len(body) >= 4 and ifaces:  # simple packet: original length,
                linktype, _ = ifaces[0]                   # then min(it, snaplen) bytes + padding
                (orig,) = struct.unpack_from(endian + "I", body, 0)
                self.stats["records"] += 1
                yield 0.0, linktype, body[4:4 + orig], orig

    @staticmethod
    def _isb_drops(opts: bytes, endian: str) -> int:
        """isb_ifdrop (5) + isb_osdrop (7): packets the interface or the OS dropped."""
        pos, total = 0, 0
        while pos + 4 <= len(opts):
            code, length = struct.unpack_from(endian + "HH", opts, pos)
            if code == 0:
                break
            if code in (5, 7) and length == 8 and pos + 12 <= len(opts):
                total += struct.unpack_from(endian + "Q", opts, pos + 4)[0]
            pos += 4 + ((length + 3) & ~3)
        return total

    @staticmethod
    def _tsresol(opts: bytes, endian: str) -> float:
        pos = 0
        while pos + 4 <= len(opts):
            code, length = struct.unpack_from(endian + "HH", opts, pos)
            if code == 0:
                break
            if code == 9 and length >= 1:
                v = opts[pos + 4]
                return 2.0 ** -(v & 0x7F) if v & 0x80 else 10.0 ** -v
            pos += 4 + ((length + 3) & ~3)
        return 1e-6

    # --- frame layer -----------------------------------------------------
    def __iter__(self) -> Iterator[Frame]:
        for ts, linktype, data, orig in self.records():
            snapped = orig > len(data)
            ip = self._link(linktype, data)
            if ip is None:
                if snapped:
                    self.stats["truncated"] += 1
                self.stats["non_ip"] += 1
                continue
            frame = self._ip(ts, ip, snapped)
            if frame is not None:
                self.stats["frames"] += 1
                yield frame
        if self.progress:
            self.progress(self.size)

    @staticmethod
    def _link(linktype: int, d: bytes) -> bytes | None:
        if linktype == LINKTYPE_ETHERNET:
            off, etype = 14, int.from_bytes(d[12:14], "big") if len(d) >= 14 else 0
            while etype in (0x8100, 0x88A8) and len(d) >= off + 4:
                etype, off = int.from_bytes(d[off + 2:off + 4], "big"), off + 4
            return d[off:] if etype in (0x0800, 0x86DD) else None
        if linktype in (LINKTYPE_RAW, LINKTYPE_RAW12, LINKTYPE_IPV4, LINKTYPE_IPV6):
            return d
        if linktype == LINKTYPE_NULL:
            return d[4:] if len(d) >= 4 else None
        if linktype == LINKTYPE_SLL:
            return d[16:] if len(d) >= 16 and d[14:16] in (b"\x08\x00", b"\x86\xdd") else None
        if linktype == LINKTYPE_SLL2:
            return d[20:] if len(d) >= 20 and d[0:2] in (b"\x08\x00", b"\x86\xdd") else None
        return None

    def _cut(self) -> None:
        """A frame cut inside its IP/UDP header: counted, cannot be delivered."""
        self.stats["truncated"] += 1
        self.stats["truncated_headers"] += 1

    def _ip(self, ts: float, p: bytes, snapped: bool = False) -> Frame | None:
        if not p:
            if snapped:
                self._cut()
            else:
                self.stats["malformed"] += 1
            return None
        version = p[0] >> 4
        if version == 4:
            if len(p) < 20:
                self._cut()
                return None
            ihl = (p[0] & 0x0F) * 4
            total = int.from_bytes(p[2:4], "big")
            if ihl < 20 or total < ihl:
                self.stats["malformed"] += 1
                return None
            if len(p) < ihl:
                self._cut()
                return None
            frag = int.from_bytes(p[6:8], "big")
            proto, src, dst = p[9], _ip(p[12:16]), _ip(p[16:20])
            body = p[ihl:total]
            first = (frag & 0x1FFF) == 0
            if frag & 0x3FFF:
                self.stats["fragments"] += 1
            length = total
        elif version == 6:
            if len(p) < 40:
                self._cut()
                return None
            proto, src, dst = p[6], _ip(p[8:24]), _ip(p[24:40])
            length = 40 + int.from_bytes(p[4:6], "big")
            body, first = p[40:length], True
            while proto in _V6_EXT or proto == 44:
                if len(body) < 8:
                    if snapped or len(p) < length:
                        self._cut()
                    else:
                        self.stats["malformed"] += 1
                    return None
                if proto == 44:
                    self.stats["fragments"] += 1
                    first = (int.from_bytes(body[2:4], "big") >> 3) == 0
                    proto, body = body[0], body[8:]
                else:
                    proto, body = body[0], body[(body[1] + 1) * 8:]
        else:
            self.stats["malformed"] += 1
            return None
        snapped = snapped or len(p) < length  # the IP length field says more was sent
        if proto == IPPROTO_UDP and first:
            if len(body) < 8:
                if snapped:
                    self._cut()
                else:
                    self.stats["malformed"] += 1
                return None
            sport, dport, ulen = struct.unpack_from("!HHH", body, 0)
            if snapped:
                self.stats["truncated"] += 1
            payload = body[8:ulen] if ulen >= 8 else body[8:]
            return Frame(ts, src, dst, proto, sport, dport, payload, length, snapped)
        if snapped:
            self.stats["truncated"] += 1
        return Frame(ts, src, dst, proto, None, None, body, length, snapped)
