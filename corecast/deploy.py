"""One-command local deployment of the paper's Fig. 2 on loopback, no root.

Source S, ITR_S, a map-server/map-resolver, three ETRs (one per AS) and seven
clients (2 + 3 + 2), every node on its own 127.B.x.y address (B picked at
random so parallel runs do not collide):

    S        127.B.0.1   (HTTP subscription service on an ephemeral port)
    ITR      127.B.0.2   inside port 9341, LISP control 4342
    MS/MR    127.B.0.3   4342
    ETR_i    127.B.1.i   4341 (data), 4342 (Map-Notify)   EID prefix 127.B.(10+i).0/24
    D_ij     127.B.(10+i).j, ports 5000+
    channels 127.B.255.0/24 (the reserved CoreCast EID range)

Sequence: ETRs register with authenticated Map-Registers and wait for their
Map-Notify; clients join over HTTP (h11); one plain LISP packet per client
warms the ITR's map-cache through Map-Request/Map-Reply (and checks plain
forwarding); then the source streams ``chunks`` chunks.  Afterwards every
client's chunks are compared with what the source sent (SHA-1 of each chunk),
and the bytes counted on the ITR->ETR links and on the ETR->client links are
compared with the paper's equations 3 and 5 computed from our sizes.
"""

from __future__ import annotations

import asyncio
import hashlib
import ipaddress
import random
import time

from corecast import plan
from corecast.aio.nodes import ClientNode, EtrNode, ItrNode, MapServerNode, SourceNode, bind
from corecast.core.client import Client
from corecast.core.etr import Etr
from corecast.core.itr import Itr
from corecast.core.mapcache import MapCache
from corecast.core.mapserver import MapServer, Site
from corecast.core.maptrie import parse_prefix
from corecast.core.register import Registrar, RegistrarConfig
from corecast.core.source import Source
from corecast.wire.codec import build_ip, build_udp
from deliverykit.deadline import within

FIG2_CLIENTS = (2, 3, 2)  # clients per AS in the paper's Fig. 2
ITR_INSIDE_PORT = 9341


def layout(base: int) -> dict:
    b = f"127.{base}"
    return {
        "source": f"{b}.0.1", "itr": f"{b}.0.2", "ms": f"{b}.0.3",
        "etrs": [f"{b}.1.{i + 1}" for i in range(len(FIG2_CLIENTS))],
        "prefixes": [f"{b}.{11 + i}.0/24" for i in range(len(FIG2_CLIENTS))],
        "clients": [[f"{b}.{11 + i}.{j + 1}" for j in range(n)]
                    for i, n in enumerate(FIG2_CLIENTS)],
        "channel": f"{b}.255.1", "cc_range": f"{b}.255.0/24",
    }


async def _wait(pred, timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > end:
            raise TimeoutError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


async def fig2(chunks: int = 40, bitrate: float = 384_000, chunk_size: int = 1200,
               transport: str = "udp", base: int | None = None, algorithm_id: int = 2,
               extra_payload_every: int = 0, proxy_reply: bool = True) -> dict:
    """Run the deployment; returns measurements and checks (see module doc)."""
    base = base if base is not None else random.randint(100, 250)
    lay = layout(base)
    cc = [parse_prefix(lay["cc_range"])]
    keys = [f"as{i + 1}-secret".encode() for i in range(len(FIG2_CLIENTS))]
    ms = MapServer([Site(f"AS{i + 1}", {1: keys[i]}, (ipaddress.ip_network(p),))
                    for i, p in enumerate(lay["prefixes"])])
    nodes: list = []
    try:
        msn = MapServerNode(ms, lay["ms"])
        await msn.start()
        nodes.append(msn)
        etr_nodes = []
        registrars: list[Registrar] = []
        for i, rloc in enumerate(lay["etrs"]):
            reg = Registrar(RegistrarConfig((lay["prefixes"][i],), (rloc,), (lay["ms"], 4342),
                                            keys[i], key_id=1, algorithm_id=algorithm_id,
                                            proxy_reply=proxy_reply))
            # an ETR decapsulates for its own site's EIDs, and only from the ITR's RLOC
            n = EtrNode(Etr(cc, eids=[parse_prefix(lay["prefixes"][i])],
                            trusted_rlocs=[parse_prefix(lay["itr"])]), rloc, reg)
            await n.start()
            nodes.append(n)
            etr_nodes.append(n)
            registrars.append(reg)
        await _wait(lambda: all(r.registered for r in registrars), 5, "Map-Notify")

        itr = Itr(lay["itr"], cc, MapCache(), map_resolver=(lay["ms"], 4342),
                  extra_payload_every=extra_payload_every)
        itrn = ItrNode(itr, (lay["itr"], ITR_INSIDE_PORT))
        await itrn.start()
        nodes.append(itrn)

        src = Source(lay["source"], (lay["itr"], ITR_INSIDE_PORT), transport=transport)
        count = {"left": chunks}

        def media(seq: int, n: int) -> bytes | None:
            if seq >= count["left"]:
                return None
            return hashlib.shake_128(f"fig2:{seq}".encode()).digest(n)

        src.add_channel(lay["channel"], bitrate, chunk_size, media)
        srcn = SourceNode(src, lay["source"])
        await srcn.start(stream=False)
        nodes.append(srcn)

        clients: list[ClientNode] = []
        for i, eids in enumerate(lay["clients"]):
            for j, eid in enumerate(eids):
                cn = ClientNode(eid, 5000 + j, Client(), accept=(lay["etrs"][i],))
                await cn.start()
                await cn.join((lay["source"], srcn.http_port), lay["channel"], True)
                clients.append(cn)
                nodes.append(cn)
        assert len(src.channels[ipaddress.ip_address(lay["channel"]).packed].dst) == len(clients)

        # warm-up: one plain (non-CoreCast) packet per client through the ITR
        warm = await bind(lay["source"], 0, lambda d, a: None)
        try:
            for cn in clients:
                pkt = build_ip(ipaddress.ip_address(lay["source"]).packed,
                               ipaddress.ip_address(cn.eid).packed, 17,
                               build_udp(40000, cn.port, b"warm-up"))
                warm.sendto(pkt, (lay["itr"], ITR_INSIDE_PORT))
            await _wait(lambda: all(cn.client.malformed >= 1 for cn in clients), 5,
                        "plain LISP warm-up delivery")
        finally:
            warm.close()
        warm_up = {cn.eid: cn.client.malformed for cn in clients}  # not CoreCast PDUs: by design
        transit0 = {h: itrn.links.bytes[h] for h in lay["etrs"]}
        local0 = sum(sum(n.links.bytes.values()) for n in etr_nodes)

        t0 = time.monotonic()
        srcn.start_streaming()
        await within(srcn.running.wait(), chunks * 8 * chunk_size / bitrate + 10)
        await _wait(lambda: all(cn.client.received >= chunks for cn in clients), 5,
                    "every chunk at every client")
        elapsed = time.monotonic() - t0
    finally:
        for n in reversed(nodes):
            await n.close()

    ch = next(iter(src.channels.values()))
    sent = {seq: d for seq, d in ch.sent_digests.items()}
    intact = all(cn.client.digests == sent for cn in clients)
    transit = {h: itrn.links.bytes[h] - transit0[h] for h in lay["etrs"]}
    local = sum(sum(n.links.bytes.values()) for n in etr_nodes) - local0
    sizes = plan.our_sizes(transport)
    j, k = len(FIG2_CLIENTS), len(clients)
    eq3 = plan.eq3_transit(sizes, chunk_size, j, k) * chunks
    eq5 = plan.eq5_local(sizes, chunk_size, k) * chunks
    per_link_eq3 = {h: plan.eq3_transit(sizes, chunk_size, 1, n) * chunks
                    for h, n in zip(lay["etrs"], FIG2_CLIENTS)}
    payloads_per_etr = {n.rloc: n.etr.counters["cc_payloads"] for n in etr_nodes}
    return {
        "layout": lay, "chunks": chunks, "clients": k, "ases": j, "elapsed_s": elapsed,
        "client_stats": {cn.eid: {**cn.client.stats(), "warm_up": warm_up[cn.eid],
                                  "malformed": cn.client.malformed - warm_up[cn.eid]}
                         for cn in clients},
        "intact": intact,
        "transit_bytes": sum(transit.values()), "eq3_bytes": eq3,
        "transit_per_link": transit, "eq3_per_link": per_link_eq3,
        "local_bytes": local, "eq5_bytes": eq5,
        "payloads_per_etr": payloads_per_etr,
        "itr_counters": dict(itr.counters), "itr_drops": itr.drops(),
        "etr_drops": {n.rloc: n.etr.drops() for n in etr_nodes},
        "ms_counters": dict(ms.counters), "itr_state": itr.state_size(),
        "sizes": sizes,
    }


def check(r: dict) -> list[str]:
    """Failed checks (empty when the run reproduces Fig. 2 and eqs. 3 and 5)."""
    bad = []
    if not r["intact"]:
        bad.append("some client did not get every chunk intact")
    for eid, s in r["client_stats"].items():
        if s["received"] != r["chunks"] or s["lost"] or s["duplicates"] or s["malformed"]:
            bad.append(f"client {eid}: {s}")
    if r["transit_bytes"] != r["eq3_bytes"]:
        bad.append(f"transit {r['transit_bytes']} != eq.3 {r['eq3_bytes']}")
    if r["transit_per_link"] != r["eq3_per_link"]:
        bad.append(f"per-link transit {r['transit_per_link']} != {r['eq3_per_link']}")
    if r["local_bytes"] != r["eq5_bytes"]:
        bad.append(f"local {r['local_bytes']} != eq.5 {r['eq5_bytes']}")
    if any(v != r["chunks"] for v in r["payloads_per_etr"].values()):
        bad.append(f"payload copies per ETR {r['payloads_per_etr']} != {r['chunks']}")
    if any(r["itr_drops"].values()):
        bad.append(f"ITR drops {r['itr_drops']}")
    return bad


def run_fig2(chunks: int = 40, **kw) -> dict:
    return asyncio.run(fig2(chunks, **kw))
