"""M2C analyser for ``deliverykit analyse CAPTURE`` (entry point ``m2c``).

Decodes every ALC/LCT datagram that carries our EXT_M2C and a valid
EXT_M2C_CRC (:func:`m2c.wire.codec.decode`, RFC 5651/5775 with the M2C
header extensions of docs/wire-m2c.md), and the IGMP membership reports in
the capture (IP protocol 2: IGMPv1/v2 reports and leaves, RFC 2236; IGMPv3
group records, RFC 3376 section 4.2; and for IPv6 MLDv1/MLDv2, RFC 2710 and
RFC 3810 section 5.2).  Tables:

* ``m2c_groups``: per session (LCT TSI) and group (EXT_M2C group index, with
  its destination address and port): packets, data-less packets, IP bytes,
  first/last time, mean rate, M2C time slots seen, PSN gaps (packets missing
  from the group's sequence as captured);
* ``m2c_rates``: per group and interval (``--opt interval=SECONDS``, default
  0.5), IP bytes and kbit/s: the dynamic layers of the sender's schedule;
* ``m2c_receivers``: per receiver (the source address of its IGMP reports,
  or the unicast destination of M2C packets), joins and leaves (membership
  changes, so a report the kernel repeats for robustness counts once),
  distinct groups, the most groups held at once, and the M2C packets/bytes
  sent to its groups while it was a member (what it could receive);
* ``m2c_joins``: every membership change: time, receiver, group, join/leave;
* ``m2c_errors``: undecodable datagrams, IGMP messages by type, caps hit.

Plots: rate per group over time (stacked), and each receiver's number of
joined groups over time.

Options: ``m2c-port=PORT[,PORT]`` (only those UDP destination ports; else
a UDP datagram is claimed only if it decodes entirely as ALC/LCT with EXT_M2C
and a valid EXT_M2C_CRC, or, cut short by the capture, has the LCT v1 shape;
never on a port another protocol owns),
``interval``, ``max-groups``, ``max-rows``.  Malformed packets are counted,
never raised.

Frames the capture cut short (snap length) are counted per destination; the
rows they feed (that group's rows and rates, the receivers' packets while
member, a receiver's membership for a cut IGMP/MLD report) are marked in the
``unreliable`` column.
"""

from __future__ import annotations

import ipaddress
import struct
from collections import Counter
from pathlib import Path

from deliverykit.analyse import UNRELIABLE, cut_reason, foreign_port, time_slots
from m2c.wire.codec import AlcPacket, DecodeError, decode

IPPROTO_IGMP = 2
IPPROTO_ICMPV6 = 58
_MLD = {130: "mld query", 131: "mldv1 report", 132: "mldv1 done", 143: "mldv2 report"}
_IGMP_NAMES = {0x11: "query", 0x12: "v1 report", 0x16: "v2 report", 0x17: "v2 leave",
               0x22: "v3 report"}
# RFC 3376 4.2.12 record types
_MODE_IS_INCLUDE, _MODE_IS_EXCLUDE, _TO_INCLUDE, _TO_EXCLUDE, _ALLOW, _BLOCK = 1, 2, 3, 4, 5, 6


def _is_multicast(ip: str) -> bool:
    try:
        return ipaddress.ip_address(ip).is_multicast
    except ValueError:
        return False


class _Group:
    __slots__ = ("session", "group", "dst", "packets", "dataless", "bytes", "first", "last",
                 "slot_min", "slot_max", "psn_next", "psn_gaps", "slots", "rows_dropped")

    def __init__(self, session: int, group: int, dst: str) -> None:
        self.session, self.group, self.dst = session, group, dst
        self.packets = self.dataless = self.bytes = self.psn_gaps = 0
        self.first = self.last = 0.0
        self.slot_min: int | None = None
        self.slot_max: int | None = None
        self.psn_next: int | None = None
        self.slots: dict[int, int] = {}
        self.rows_dropped = 0  #: packets in no rate row (max-rows slots already held)


class _Receiver:
    __slots__ = ("joins", "leaves", "groups", "member", "peak", "packets", "bytes", "timeline")

    def __init__(self) -> None:
        self.joins = self.leaves = self.peak = self.packets = self.bytes = 0
        self.groups: set[str] = set()
        self.member: set[str] = set()
        self.timeline: list[tuple[float, int]] = []


class Analyser:
    """Per-group rates, per-receiver joins and reception of M2C sessions."""

    name = "m2c"
    handles_truncation = True

    def __init__(self, options: dict | None = None) -> None:
        o = options or {}
        self.ports = {int(p) for p in str(o.get("m2c-port", "")).split(",") if p}
        self.interval = float(o.get("interval", 0.5))
        self.max_groups = int(o.get("max-groups", 4096))
        self.max_rows = int(o.get("max-rows", 200_000))
        self.groups: dict[tuple, _Group] = {}
        self.receivers: dict[str, _Receiver] = {}
        self.members: dict[str, set[str]] = {}  # group address -> receivers
        self.joins: list[dict] = []
        self.t0: float | None = None
        self.c = {"undecodable": 0, "igmp_malformed": 0, "dropped_groups": 0, "dropped_rows": 0,
                  "dropped_receivers": 0}
        self.igmp: Counter[str] = Counter()
        self._decoded: tuple[object, AlcPacket] | None = None  # accepts() -> feed() hand-over
        self.foreign = 0
        #: "dst:port" of cut ALC datagrams, and senders of cut IGMP/MLD reports -> count
        self.cut_dsts: Counter[str] = Counter()
        self.cut_receivers: Counter[str] = Counter()

    def accepts(self, f) -> bool:
        if f.proto == IPPROTO_IGMP:
            return True
        if f.proto == IPPROTO_ICMPV6:
            return bool(f.payload) and f.payload[0] in _MLD
        if f.proto != 17 or f.dport is None:
            return False
        if self.ports:
            return f.dport in self.ports
        p = f.payload
        if not (len(p) >= 24 and (p[0] >> 4) == 1 and (p[1] & 0x90) == 0x80):
            return False
        if foreign_port(f, self.name):
            self.foreign += 1
            return False
        try:  # strict: only what decodes as ours, EXT_M2C and its CRC included
            self._decoded = (f, decode(p))
        except (DecodeError, ValueError, IndexError, struct.error):
            # a frame the capture cut short cannot decode whole: LCT-shaped is enough to
            # count it (as undecodable, and its destination's figures as unreliable)
            return bool(f.truncated)
        return True

    # ------------------------------------------------------------------
    def feed(self, f) -> None:
        if f.truncated and f.proto != 17 and len(self.cut_receivers) < self.max_groups:
            self.cut_receivers[f.src] += 1
        try:
            if f.proto == IPPROTO_IGMP:
                self._igmp(f)
            elif f.proto == IPPROTO_ICMPV6:
                self._mld(f)
            else:
                self._alc(f)
        except (DecodeError, ValueError, IndexError):
            self.c["undecodable" if f.proto == 17 else "igmp_malformed"] += 1

    def _alc(self, f) -> None:
        if f.truncated and len(self.cut_dsts) < self.max_groups:
            key = f"{f.dst}:{f.dport}"
            self.cut_dsts[key] += 1
        held, self._decoded = self._decoded, None
        try:
            p = held[1] if held is not None and held[0] is f else decode(f.payload)
        except (DecodeError, ValueError, IndexError, struct.error):  # not ours, or damaged
            self.c["undecodable"] += 1
            return
        if self.t0 is None:
            self.t0 = f.ts
        dst = f"{f.dst}:{f.dport}"
        g = self.groups.get((p.session, p.group, dst))
        if g is None:
            if len(self.groups) >= self.max_groups:
                self.c["dropped_groups"] += 1
                return
            g = self.groups[(p.session, p.group, dst)] = _Group(p.session, p.group, dst)
            g.first = f.ts
        g.packets += 1
        g.bytes += f.length
        g.last = f.ts
        if p.data_less:
            g.dataless += 1
        g.slot_min = p.slot if g.slot_min is None else min(g.slot_min, p.slot)
        g.slot_max = p.slot if g.slot_max is None else max(g.slot_max, p.slot)
        if g.psn_next is not None and p.psn > g.psn_next:
            g.psn_gaps += p.psn - g.psn_next
        if g.psn_next is None or p.psn >= g.psn_next:
            g.psn_next = p.psn + 1
        slot = int((f.ts - self.t0) / self.interval)
        if slot in g.slots or len(g.slots) < self.max_rows:
            g.slots[slot] = g.slots.get(slot, 0) + f.length
        else:
            self.c["dropped_rows"] += 1
            g.rows_dropped += 1
        if _is_multicast(f.dst):
            for r in self.members.get(f.dst, ()):
                rec = self.receivers[r]
                rec.packets += 1
                rec.bytes += f.length
        else:
            unicast = self._receiver(f.dst)
            if unicast is not None:
                unicast.packets += 1
                unicast.bytes += f.length
                unicast.groups.add(dst)

    def _receiver(self, who: str) -> _Receiver | None:
        r = self.receivers.get(who)
        if r is None:
            if len(self.receivers) >= self.max_groups:
                self.c["dropped_receivers"] += 1
                return None
            r = self.receivers[who] = _Receiver()
        return r

    def _igmp(self, f) -> None:
        d = f.payload
        if len(d) < 8:
            self.c["igmp_malformed"] += 1
            return
        t = d[0]
        name = _IGMP_NAMES.get(t, f"type 0x{t:02x}")
        self.igmp[name] += 1
        if t in (0x12, 0x16):
            self._member(f.ts, f.src, str(ipaddress.IPv4Address(d[4:8])), True)
        elif t == 0x17:
            self._member(f.ts, f.src, str(ipaddress.IPv4Address(d[4:8])), False)
        elif t == 0x22:
            self._records(f, d, int.from_bytes(d[6:8], "big"), 4)

    def _mld(self, f) -> None:
        """MLDv1 (RFC 2710) report/done and MLDv2 (RFC 3810 5.2) records: IPv6 joins."""
        d = f.payload
        t = d[0]
        self.igmp[_MLD[t]] += 1
        if t in (131, 132):
            if len(d) < 24:
                self.c["igmp_malformed"] += 1
                return
            self._member(f.ts, f.src, str(ipaddress.IPv6Address(d[8:24])), t == 131)
        elif t == 143:
            if len(d) < 8:
                self.c["igmp_malformed"] += 1
                return
            self._records(f, d, int.from_bytes(d[6:8], "big"), 16)

    def _records(self, f, d: bytes, n: int, alen: int) -> None:
        """IGMPv3 / MLDv2 group records from offset 8 (same layout, address length apart)."""
        pos = 8
        for _ in range(n):
            if pos + 4 + alen > len(d):
                self.c["igmp_malformed"] += 1
                return
            rtype, aux, nsrc = d[pos], d[pos + 1], int.from_bytes(d[pos + 2:pos + 4], "big")
            raw = d[pos + 4:pos + 4 + alen]
            group = str(ipaddress.IPv4Address(raw) if alen == 4 else ipaddress.IPv6Address(raw))
            pos += 4 + alen + alen * nsrc + 4 * aux
            if pos > len(d):
                self.c["igmp_malformed"] += 1
                return
            if rtype in (_MODE_IS_EXCLUDE, _TO_EXCLUDE) or (rtype in (_ALLOW, _MODE_IS_INCLUDE)
                                                            and nsrc):
                self._member(f.ts, f.src, group, True)
            elif rtype == _TO_INCLUDE and nsrc == 0:
                self._member(f.ts, f.src, group, False)
            # BLOCK_OLD_SOURCES / TO_INCLUDE with sources: source filters, membership stays

    def _member(self, ts: float, who: str, group: str, join: bool) -> None:
        r = self._receiver(who)
        if r is None:
            return
        if join == (group in r.member):
            return  # a robustness repetition, or a report of the state already known
        if join:
            r.member.add(group)
            r.groups.add(group)
            r.joins += 1
            r.peak = max(r.peak, len(r.member))
            self.members.setdefault(group, set()).add(who)
        else:
            r.member.discard(group)
            r.leaves += 1
            self.members.get(group, set()).discard(who)
        if len(r.timeline) < self.max_rows:
            r.timeline.append((ts, len(r.member)))
        if len(self.joins) < self.max_rows:
            self.joins.append({"t": ts, "receiver": who, "group": group,
                               "change": "join" if join else "leave"})
        else:
            self.c["dropped_rows"] += 1

    # ------------------------------------------------------------------
    def tables(self) -> dict[str, list[dict]]:
        groups, rates = [], []
        for g in sorted(self.groups.values(), key=lambda g: (g.session, g.group, g.dst)):
            dur = g.last - g.first
            groups.append({"session": f"{g.session:08x}", "group": g.group, "destination": g.dst,
                           "packets": g.packets, "data_less": g.dataless, "ip_bytes": g.bytes,
                           "first": g.first, "seconds": round(dur, 6),
                           "kbit/s": round(8 * g.bytes / dur / 1e3, 3) if dur > 0 else None,
                           "slot_first": g.slot_min, "slot_last": g.slot_max,
                           "psn_gaps": g.psn_gaps})
            if g.slots:
                for s in time_slots(g.slots):
                    by = g.slots.get(s, 0)
                    rates.append({"session": f"{g.session:08x}", "group": g.group,
                                  "t": round(s * self.interval, 3), "ip_bytes": by,
                                  "kbit/s": round(8 * by / self.interval / 1e3, 3)})
        recv = [{"receiver": who, "joins": r.joins, "leaves": r.leaves,
                 "groups": len(r.groups), "peak_groups": r.peak,
                 "member_at_end": len(r.member), "packets_while_member": r.packets,
                 "ip_bytes_while_member": r.bytes}
                for who, r in sorted(self.receivers.items())]
        if self.cut_dsts or self.cut_receivers:
            self._mark_cut(groups, rates, recv)
        capped = {f"{g.session:08x}/{g.group}": g.rows_dropped for g in self.groups.values()
                  if g.rows_dropped}
        for r in rates if capped else ():
            n = capped.get(f"{r['session']}/{r['group']}")
            if n and not r.get(UNRELIABLE):
                r[UNRELIABLE] = f"{n} packets of this group in no row (max-rows)"
        errs = [{"what": k, "count": v} for k, v in self.c.items()]
        if self.foreign:
            errs.append({"what": "ALC-shaped datagrams refused: on a port another protocol owns",
                         "count": self.foreign})
        errs.append({"what": "frames cut by the snap length",
                     "count": sum(self.cut_dsts.values()) + sum(self.cut_receivers.values())})
        errs += [{"what": f"igmp {k}", "count": v} for k, v in sorted(self.igmp.items())]
        return {"m2c_groups": groups, "m2c_rates": rates, "m2c_receivers": recv,
                "m2c_joins": self.joins, "m2c_errors": errs}

    def _mark_cut(self, groups: list[dict], rates: list[dict], recv: list[dict]) -> None:
        """A cut ALC datagram may have failed its CRC (lost to its group) or been counted:
        its destination's group rows and rates are unreliable, and so is what members of
        that destination received; a cut report makes its receiver's joins unreliable."""
        cut_groups = set()
        for r in groups:
            n = self.cut_dsts.get(r["destination"], 0)
            r[UNRELIABLE] = cut_reason(n) if n else None
            if n:
                cut_groups.add((r["session"], r["group"]))
        for r in rates:
            r[UNRELIABLE] = (cut_reason(1) + " in this group" if (r["session"], r["group"])
                             in cut_groups else None)
        cut_addrs = {d.rsplit(":", 1)[0] for d in self.cut_dsts}
        for r in recv:
            who = r["receiver"]
            n = self.cut_receivers.get(who, 0)
            hit = n or who in cut_addrs or any(
                who in self.members.get(a, ()) or a in self.receivers[who].groups
                for a in cut_addrs)
            r[UNRELIABLE] = (cut_reason(n) + " (its reports)" if n else
                             "datagrams to its groups were cut" if hit else None)

    def plots(self, outdir: Path) -> list[Path]:
        if not self.groups:
            return []
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        out = []
        outdir = Path(outdir)
        gs = sorted(self.groups.values(), key=lambda g: (g.session, g.group))[:64]
        every = time_slots({s for g in gs for s in g.slots})
        xs = [s * self.interval for s in every]
        ys = [[8 * g.slots.get(s, 0) / self.interval / 1e3 for s in every] for g in gs]
        fig, ax = plt.subplots(figsize=(9, 4.5))
        colours = [plt.cm.viridis(i / max(1, len(gs) - 1)) for i in range(len(gs))]
        ax.stackplot(xs, ys, labels=[f"g{g.group}" for g in gs], colors=colours, step="post")
        ax.set_xlabel("time since first M2C packet (s)")
        ax.set_ylabel("rate (kbit/s), stacked by group")
        ax.set_title("M2C groups over time (the sender's dynamic layers)" + (
            " (UNRELIABLE: frames cut by the snap length)" if self.cut_dsts else ""))
        if len(gs) <= 16:
            ax.legend(fontsize="x-small", ncol=2)
        p = outdir / "m2c-group-rates.png"
        fig.savefig(p, dpi=100, bbox_inches="tight")
        plt.close(fig)
        out.append(p)
        if any(r.timeline for r in self.receivers.values()) and self.t0 is not None:
            fig, ax = plt.subplots(figsize=(9, 3.5))
            for who, r in sorted(self.receivers.items())[:20]:
                if r.timeline:
                    ax.step([t - self.t0 for t, _ in r.timeline], [n for _, n in r.timeline],
                            where="post", label=who)
            ax.set_xlabel("time since first M2C packet (s)")
            ax.set_ylabel("groups joined")
            ax.set_title("M2C receivers: membership (IGMP)")
            ax.legend(fontsize="small")
            p = outdir / "m2c-receiver-groups.png"
            fig.savefig(p, dpi=100, bbox_inches="tight")
            plt.close(fig)
            out.append(p)
        return out
