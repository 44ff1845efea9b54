"""The paper's analytical model (section 3.3 eqs. 1-2, section 4 eqs. 3-9) and the
memory model of section 3.5, computed from the header sizes our format really
produces and from the paper's sizes, beside the paper's published figures.

Symbols (paper section 4):

* ``H_L``  LISP encapsulation overhead.  Paper: 20 B.  Ours: outer IP (20/40)
  + UDP 8 + LISP 8 = 36 B over IPv4.
* ``H_CC`` size of a header packet before encapsulation.  Paper: 60 B.  Ours:
  inner IP 20 + (UDP 8 in the no-root transport) + header PDU 36 B (SHA-1,
  IPv4 EID) = 64 B (UDP) or 56 B (raw IP, protocol 253).
* ``P_CC`` size of a payload packet before encapsulation.  Paper: 1200 B (the
  chunk itself, its headers left out).  Ours: inner IP 20 + (UDP 8) + payload
  PDU overhead 32 + D.
* ``H_I``  header of the packet an ETR delivers (eq. 5): paper says "an IP
  header"; ours is IPv4 20 + UDP 8 = 28 B.
* ``D``    chunk size; ``T`` time between payloads = 8 D / BW.

Our reading of eq. 1 (garbled in the text extraction):
``MaxClients_CC ~= C*T / (8*H) = (C/BW) * (P/H)`` with ``P = H_L + P_CC`` and
``H = H_L + H_CC`` (section 5.3: "P = H_L + P_CC = 20 + 1200, H = H_L + H_CC =
20 + 60 = 80 ... 397,135 clients").  The two forms are equal only when
``T = 8 P / BW``, i.e. when BW is the rate of whole payload packets; with the
paper's own T = 25 ms (1,200-byte chunks at 384 kb/s) the first form gives
390,625.  Both are approximations that ignore the payload packet's own share
of the link; the exact bound is ``(C*T/8 - P) / H``.  We print all three.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from corecast.wire.codec import cc_header_len, cc_payload_overhead
from corecast.wire.constants import (
    IPV4_HEADER_LEN,
    IPV6_HEADER_LEN,
    LISP_DATA_HEADER_LEN,
    UDP_HEADER_LEN,
    HashId,
)

#: Figures the paper publishes (section 4 and 5.3), with where they come from.
PAPER_FIGURES = {
    "max_clients_cc": (397_135, "sec. 5.3: C=10 Gb/s, BW=384 kb/s, P=1220, H=80"),
    "max_clients_uc": (26_041, "sec. 5.3"),
    "alpha_1200": (0.0656, "sec. 4: H_L=20, H_CC=60, P_CC=1200"),
    "alpha_400": (0.16, "sec. 4: 'decrease the payload size to 400 bytes'"),
    "etr_memory_1000ch": (1_000_000, "sec. 3.5: 'just over 1 MB' for 1,000 channels x 1,200 B"),
    "itr_served_1000x1000_v6": (16_000_000, "sec. 3.5: '16 MB' for 1,000 ch x 1,000 ASes, IPv6"),
}


#: the parameters the paper's figures were computed with (section 5.3 and 3.5)
PAPER_PARAMS = {"C": 10e9, "BW": 384e3, "D": 1200, "channels": 1000, "ases": 1000}


def paper_text(c: float, bw: float, d: int, channels: int = 1000,
               ases: int = 1000) -> dict[str, str | None]:
    """The paper's published figure for each quantity `corecast plan` prints, or None
    where this run's parameters are not the ones the figure was computed with (a
    figure for 10 Gb/s says nothing about 1 Gb/s)."""
    same_d = d == PAPER_PARAMS["D"]
    same_cbw = c == PAPER_PARAMS["C"] and bw == PAPER_PARAMS["BW"]
    f = PAPER_FIGURES
    return {
        "h_l": "20", "h_cc": "60",
        "p_cc": "1200" if same_d else None,
        "P": "1220" if same_d else None,
        "H": "80",
        "eq1": f"{f['max_clients_cc'][0]:,}" if same_cbw and same_d else None,
        "eq2": f"{f['max_clients_uc'][0]:,}" if same_cbw else None,
        "alpha": f"{f['alpha_1200'][0]}" if same_d else None,
        "alpha_400": f"{f['alpha_400'][0]}",
        "etr_memory": "just over 1 MB" if channels == PAPER_PARAMS["channels"] else None,
        "itr_served_v6": ("16 MB" if (channels, ases) == (PAPER_PARAMS["channels"],
                                                         PAPER_PARAMS["ases"]) else None),
    }


@dataclass(frozen=True)
class Sizes:
    """Per-packet sizes in bytes; ``p_over`` is P_CC - D."""

    name: str
    h_l: int
    h_cc: int
    p_over: int
    h_i: int

    def p_cc(self, d: int) -> int:
        return self.p_over + d


PAPER = Sizes("paper", h_l=20, h_cc=60, p_over=0, h_i=20)


def our_sizes(transport: str = "udp", ipv6_rloc: bool = False, ipv6_eid: bool = False,
              hash_id: int = HashId.SHA1) -> Sizes:
    """Sizes from our codec (nothing hard-coded beyond the IP/UDP header lengths)."""
    outer = (IPV6_HEADER_LEN if ipv6_rloc else IPV4_HEADER_LEN) + UDP_HEADER_LEN + \
        LISP_DATA_HEADER_LEN
    inner = (IPV6_HEADER_LEN if ipv6_eid else IPV4_HEADER_LEN) + (
        UDP_HEADER_LEN if transport == "udp" else 0)
    return Sizes(
        f"ours-{transport}{'-v6' if ipv6_eid else ''}",
        h_l=outer,
        h_cc=inner + cc_header_len(hash_id, 16 if ipv6_eid else 4),
        p_over=inner + cc_payload_overhead(hash_id),
        h_i=(IPV6_HEADER_LEN if ipv6_eid else IPV4_HEADER_LEN) + UDP_HEADER_LEN,
    )


# --------------------------------------------------------------------- equations


def period(d: int, bw: float) -> float:
    """T: seconds between payloads for chunk size ``d`` at ``bw`` b/s."""
    return 8.0 * d / bw


def eq1_max_clients_cc(c: float, bw: float, p: float, h: float) -> float:
    """Eq. 1 as the paper evaluates it: (C / BW) * (P / H)."""
    return c / bw * p / h


def eq1_time_form(c: float, t: float, h: float) -> float:
    """Eq. 1, left form: C * T / (8 H)."""
    return c * t / (8.0 * h)


def eq1_exact(c: float, t: float, p: float, h: float) -> float:
    """Headers that fit after the payload packet in one period: (C T / 8 - P) / H."""
    return (c * t / 8.0 - p) / h


def eq2_max_clients_uc(c: float, bw: float) -> float:
    return c / bw


def eq3_transit(s: Sizes, d: int, j: int, k: int) -> int:
    """TT_CC = (H_L + P_CC) j + (H_L + H_CC) k, bytes per payload."""
    return (s.h_l + s.p_cc(d)) * j + (s.h_l + s.h_cc) * k


def eq4_bw_transit(tt: float, t: float) -> float:
    """BW_transit = TT_CC / T (returned in bits/s)."""
    return 8.0 * tt / t


def eq5_local(s: Sizes, d: int, k: int) -> int:
    """LT_CC = (H_I + D) k, bytes per payload."""
    return (s.h_i + d) * k


def eq6_bw_local(lt: float, t: float) -> float:
    return 8.0 * lt / t


def eq7_transit_p2p(s: Sizes, d: int, i: int) -> int:
    """TT_P2P = (H_L + P_CC) i for i inter-domain arcs."""
    return (s.h_l + s.p_cc(d)) * i


def eq8_holds(s: Sizes, d: int, i: int, j: int, k: int) -> bool:
    """CoreCast transit <= P2P transit  <=>  (H_L + H_CC)/(H_L + P_CC) <= (i - j)/k."""
    return (s.h_l + s.h_cc) / (s.h_l + s.p_cc(d)) <= (i - j) / k


def eq9_alpha(s: Sizes, d: int) -> float:
    """The alpha threshold: CoreCast wins when alpha > (H_L + H_CC) / (H_L + P_CC)."""
    return (s.h_l + s.h_cc) / (s.h_l + s.p_cc(d))


# --------------------------------------------------------------------- memory model


def etr_memory(channels: int, payload_packet: int, hash_len: int = 20) -> int:
    """ETR payloadBuffer: one payload (and its hash) per channel (section 3.5)."""
    return channels * (payload_packet + hash_len)


def itr_memory(channels: int, ases: int, payload_packet: int, rloc_len: int = 4,
               hash_len: int = 20) -> dict[str, int]:
    """ITR: the ETR's payloadBuffer plus a servedRLOC set of up to ``ases`` RLOCs
    per channel (section 3.5)."""
    pb = etr_memory(channels, payload_packet, hash_len)
    served = channels * ases * rloc_len
    return {"payload_buffer": pb, "served_rloc": served, "total": pb + served}


def _rss_bytes() -> int:
    """Resident set size of this process (Linux /proc; 0 elsewhere)."""
    import os

    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _populated_itr(channels: int, ases: int, d: int, on_ready: Callable[[], None],
                   on_done: Callable[[], None]) -> Any:
    """Our Itr core with ``channels`` channels, each with one payload in its
    payloadBuffer and ``ases`` RLOCs in its servedRLOC set: per channel, one client in
    each of ``ases`` ASes (each AS one /24 EID prefix and one RLOC in the map-cache) and
    one chunk through Algorithm 1.  ``on_ready()`` runs once the map-cache, the
    channels and the source exist, ``on_done()`` once the state is in place; what the
    ITR sends is drained as it goes (output, not state)."""
    import ipaddress

    from corecast.core.itr import Itr
    from corecast.core.mapcache import MapCache
    from corecast.core.maptrie import parse_prefix
    from corecast.core.source import Source

    mc = MapCache(max_entries=ases + 10)
    for a in range(ases):
        net = ipaddress.ip_network((0x0A000000 + (a << 8), 24))
        mc.add(net.network_address.packed, 24, [((0xC0000000 + a).to_bytes(4, "big"), 1, 1)],
               float("inf"))
    itr = Itr("192.0.2.254", [parse_prefix("10.255.0.0/16")], mc, max_channels=channels,
              max_served=ases)
    src = Source("10.254.0.1", itr=itr)
    src.keep_digests = 0  # the source's own record, not the ITR's state
    for ch in range(channels):
        src.add_channel(str(ipaddress.ip_address(0x0AFF0000 + ch + 1)), chunk_size=d)
    eids = [str(ipaddress.ip_address(0x0A000000 + (a << 8) + 1)) for a in range(ases)]
    on_ready()
    for chan in src.channels.values():
        for eid in eids:
            src.join(chan.eid, eid, 5000, True, 0)
        src.emit_chunk(chan, 0.0)
        chan.dst.clear()
        itr.datagrams_to_send(0.0)
        src.datagrams_to_send(0.0)
        while itr.next_event() is not None or src.next_event() is not None:
            pass
        src.events.clear()  # the source's record of the joins
    on_done()
    return itr


def measure_itr_state(channels: int, ases: int, d: int = 1200, seed: int = 1) -> dict:
    """Run our ITR core with ``channels`` channels and ``ases`` ETRs (one header
    each) and report its state size as counted by the model (``total_bytes``), the
    Python heap it took (tracemalloc: ``python_heap_bytes``: what is still allocated
    once the source's join records and the sent datagrams are gone, i.e. the
    payloadBuffer's packets and the servedRLOC dicts) and the process's resident set growth
    (``rss_bytes``, from a second population without tracemalloc, whose bookkeeping
    would inflate it)."""
    import gc
    import tracemalloc

    snaps: list[Any] = []
    rss: list[int] = []

    def mark_rss() -> None:
        gc.collect()
        rss.append(_rss_bytes())

    def snap() -> None:
        gc.collect()
        snaps.append(tracemalloc.take_snapshot())

    itr = _populated_itr(channels, ases, d, mark_rss, mark_rss)
    del itr
    gc.collect()
    tracemalloc.start()
    try:
        itr = _populated_itr(channels, ases, d, snap, snap)
    finally:
        tracemalloc.stop()
    heap = sum(s.size_diff for s in snaps[1].compare_to(snaps[0], "filename"))
    st = itr.state_size()
    st["python_heap_bytes"] = heap
    st["rss_bytes"] = rss[1] - rss[0]
    return st


# --------------------------------------------------------------------- report


def plan(c: float = 10e9, bw: float = 384e3, d: int = 1200, j: int = 3, k: int = 7,
         i: int | None = None, transport: str = "udp", ipv6_eid: bool = False,
         ipv6_rloc: bool = False, channels: int = 1000, ases: int = 1000) -> dict:
    """Every equation for the paper's sizes and ours, with the paper's figures."""
    t = period(d, bw)
    rows = []
    for s in (PAPER, our_sizes(transport, ipv6_rloc, ipv6_eid)):
        p = s.h_l + s.p_cc(d)
        h = s.h_l + s.h_cc
        tt = eq3_transit(s, d, j, k)
        lt = eq5_local(s, d, k)
        ii = i if i is not None else k  # default: one inter-domain arc per peer
        rows.append({
            "sizes": asdict(s),
            "P": p, "H": h, "P_CC": s.p_cc(d), "T_s": t,
            "eq1_max_clients_cc": math.floor(eq1_max_clients_cc(c, bw, p, h)),
            "eq1_time_form": math.floor(eq1_time_form(c, t, h)),
            "eq1_exact": math.floor(eq1_exact(c, t, p, h)),
            "eq2_max_clients_uc": math.floor(eq2_max_clients_uc(c, bw)),
            "eq3_transit_bytes": tt,
            "eq4_bw_transit_bps": eq4_bw_transit(tt, t),
            "eq5_local_bytes": lt,
            "eq6_bw_local_bps": eq6_bw_local(lt, t),
            "eq7_transit_p2p_bytes": eq7_transit_p2p(s, d, ii),
            "eq8_corecast_wins": eq8_holds(s, d, ii, j, k),
            "eq9_alpha": eq9_alpha(s, d),
            "eq9_alpha_400": eq9_alpha(s, 400),
            "payload_overhead_pct": 100.0 * (p - d) / d,
        })
    pay = PAPER.h_l + PAPER.p_cc(d)
    ours = our_sizes(transport, ipv6_rloc, ipv6_eid)
    mem = {
        "paper_etr": etr_memory(channels, 1200, 0),
        "paper_itr": itr_memory(channels, ases, 1200, 16, 0),
        "ours_etr": etr_memory(channels, ours.p_cc(d)),
        "ours_itr_v4": itr_memory(channels, ases, ours.p_cc(d), 4),
        "ours_itr_v6": itr_memory(channels, ases, ours.p_cc(d), 16),
    }
    return {"inputs": {"C": c, "BW": bw, "D": d, "j": j, "k": k, "i": i,
                       "transport": transport, "channels": channels, "ases": ases},
            "rows": rows, "paper_figures": PAPER_FIGURES, "memory": mem, "paper_P": pay,
            "paper_text": paper_text(c, bw, d, channels, ases)}


def table1_corecast_row(k: int = 1853, j: int = 202, duration_s: float = 2 * 3600 + 45 * 60,
                        bw: float = 384e3, d: int = 1200, ours: Sizes | None = None) -> dict:
    """Table 1's CoreCast row recomputed from the paper's own counts (1,853 IPs in
    202 ASes, 2:45 h traces, 384 kb/s in 1,200-byte payloads) with eqs. 3 and 5."""
    n = duration_s / period(d, bw)
    out: dict[str, Any] = {"payloads": n}
    for s in (PAPER, ours or our_sizes("udp")):
        out[s.name] = {"TT_GB": n * eq3_transit(s, d, j, k) / 1e9,
                       "LT_GB": n * eq5_local(s, d, k) / 1e9}
    out["paper_text"] = {"TT_GB": 131, "LT_GB": 895}
    return out


def explain() -> list[str]:
    """Where the paper's text and its own formulas disagree (printed by `corecast plan`)."""
    a400 = eq9_alpha(PAPER, 400)
    t1 = table1_corecast_row()
    return [
        "eq. 1: the paper's 397,135 is (C/BW)(P/H) with P = 1220 B; its left form C*T/(8H) "
        f"with its own T = 25 ms gives {math.floor(eq1_time_form(10e9, 0.025, 80)):,}: the two "
        "agree only if T = 8P/BW (BW counting whole payload packets). Neither subtracts the "
        "payload packet's own share of the link: the exact bound is (C*T/8 - P)/H.",
        f"eq. 9 at P_CC = 400 B: the formula gives alpha > 80/420 = {a400:.4f}; the text says "
        "0.16 (that would need H_L + P_CC = 500). We print the formula's value.",
        "H_L: the paper counts 20 B for 'a LISP header'; a LISP-encapsulated packet really "
        "carries outer IP + UDP + LISP = 36 B (IPv4 underlay), which we use for ours.",
        "P_CC: the paper puts the bare 1,200 B chunk in P_CC; ours adds the inner IP (+UDP) "
        "header and the payload PDU's hash, length and sequence fields.",
        "Table 1, CoreCast row: eqs. 3 and 5 with the paper's sizes and its own counts "
        "(k = 1,853, j = 202, 2:45 h at 384 kb/s: N = 396,000 payloads) give LT = "
        f"{t1['paper']['LT_GB']:.0f} GB (text: 895) but TT = {t1['paper']['TT_GB']:.0f} GB "
        "(text: 131); the text's TT fits neither H = 80 nor H = 60 with j = 202.",
        "Per-AS savings (sec. 5.3, '300-fold'): with N payloads per client, a domain's CoreCast "
        "transit is at least N (H_L + H_CC) per client, so the saving over a P2P peer that "
        "downloads the stream once is at most D / (H_L + H_CC) = 15x with the paper's sizes.",
    ]
