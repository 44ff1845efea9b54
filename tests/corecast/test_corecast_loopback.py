"""Real sockets on loopback: Fig. 2 deployment, subscription service over HTTP."""

from __future__ import annotations

import asyncio
import ipaddress
import json
import random
import subprocess

import pytest

from corecast.aio.http import request
from corecast.aio.nodes import ClientNode, SourceNode
from corecast.core.client import Client
from corecast.core.source import Source
from corecast.demo import run
from corecast.deploy import check, fig2


async def test_fig2_every_chunk_intact_and_bytes_equal_eq3_eq5():
    r = await fig2(chunks=20)
    assert check(r) == []
    assert r["transit_bytes"] == r["eq3_bytes"] and r["local_bytes"] == r["eq5_bytes"]
    assert r["ms_counters"]["accepted"] >= 3 and r["ms_counters"]["refused_auth"] == 0
    assert r["itr_counters"]["map_replies"] >= 3
    assert all(v == 20 for v in r["payloads_per_etr"].values())


async def test_fig2_raw_transport_sizes_and_extra_payloads():
    r = await fig2(chunks=8, transport="raw", algorithm_id=1)
    assert check(r) == [] and r["sizes"].h_cc == 56
    # with an extra payload after every header, each ETR gets one payload per header
    r2 = await fig2(chunks=4, extra_payload_every=1)
    assert r2["intact"] and r2["itr_counters"]["extra_payload_copies"] == 4 * (7 - 3)


async def test_fig2_with_map_requests_answered_by_the_etrs():
    """ETRs register without the P-bit: the map-server forwards each Map-Request to the
    ETR, whose authoritative Map-Reply reaches the ITR; the stream is unchanged."""
    r = await fig2(chunks=5, proxy_reply=False)
    assert check(r) == []
    assert r["ms_counters"]["forwarded"] >= 3 and r["ms_counters"]["replies"] == 0
    assert r["itr_counters"]["map_replies"] >= 3


def test_demo_rows():
    rows = run(quick=True)
    assert all(set(r) == {"system", "what", "result"} for r in rows)
    assert any(r["what"] == "checks" and r["result"] == "all pass" for r in rows)


@pytest.mark.tool("curl")
async def test_subscription_service_join_heartbeat_timeout_leave():
    b = random.randint(100, 250)
    src = Source(f"127.{b}.0.1", (f"127.{b}.0.2", 9), heartbeat_timeout=0.6)
    src.add_channel(f"127.{b}.255.1")
    node = SourceNode(src, f"127.{b}.0.1", expire_every=0.1)
    await node.start(stream=False)
    try:
        http = (f"127.{b}.0.1", node.http_port)
        alive = ClientNode(f"127.{b}.11.1", 0, Client())
        await alive.start()
        await alive.join(http, f"127.{b}.255.1", heartbeat=0.15)
        quiet = ClientNode(f"127.{b}.11.2", 0, Client())
        await quiet.start()
        await quiet.join(http, f"127.{b}.255.1")
        # an external HTTP client (curl) speaks to the same h11 service
        out = await asyncio.to_thread(subprocess.run, [
            "curl", "-s", "-X", "POST", "--max-time", "5", "-H", "content-type: application/json",
            "--interface", f"127.{b}.12.1",  # the source serves a join only for the asking EID
            "-d", json.dumps({"channel": f"127.{b}.255.1", "eid": f"127.{b}.12.1", "port": 7000,
                              "corecast": False}),
            f"http://127.{b}.0.1:{node.http_port}/join"], capture_output=True, text=True)
        assert json.loads(out.stdout)["ok"] is True
        chan = src.channels[ipaddress.ip_address(f"127.{b}.255.1").packed]
        assert len(chan.dst) == 3
        await asyncio.sleep(1.2)
        left = {(e.eid, e.reason) for e in src.events if type(e).__name__ == "ClientLeft"}
        assert (f"127.{b}.11.2", "timeout") in left and (f"127.{b}.12.1", "timeout") in left
        assert [ipaddress.ip_address(s.eid).exploded for s in chan.dst.values()] == [
            f"127.{b}.11.1"]
        assert await alive.leave() and len(chan.dst) == 0
        assert (await request(*http, "POST", "/heartbeat", {
            "channel": f"127.{b}.255.1", "eid": f"127.{b}.11.1", "port": alive.port},
            local_host=f"127.{b}.11.1"))[0] == 404
        assert (await request(*http, "POST", "/join", {"channel": "nope"}))[0] == 400
        assert (await request(*http, "GET", "/nothing"))[0] == 404
        st, body = await request(*http, "GET", "/channels")
        assert st == 200 and body["channels"][0]["subscribers"] == 0
        # garbage on the socket gets a 400, the service keeps running
        r, w = await asyncio.open_connection(*http)
        w.write(b"\x00\x01garbage\r\n\r\n")
        await w.drain()
        assert b"400" in (await asyncio.wait_for(r.read(), 5))[:20]
        w.close()
        assert (await request(*http, "GET", "/channels"))[0] == 200
        for n in (alive, quiet):
            await n.close()
    finally:
        await node.close()


async def test_itr_and_etr_sockets_survive_garbage_and_count_it():
    """Malformed, truncated, wrong-hash and unknown-channel packets on real sockets are
    counted and dropped; valid traffic keeps flowing."""
    from corecast.aio.nodes import EtrNode, ItrNode, bind
    from corecast.core.etr import Etr
    from corecast.core.itr import Itr
    from corecast.core.mapcache import MapCache
    from corecast.core.maptrie import parse_prefix
    from corecast.wire import codec as c

    b = random.randint(100, 250)
    cc = [parse_prefix(f"127.{b}.255.0/24")]
    mc = MapCache()
    mc.load_static(f"127.{b}.11.0/24 127.{b}.1.1\n")
    itr = Itr(f"127.{b}.0.2", cc, mc, channels=[ipaddress.ip_address(f"127.{b}.255.1").packed])
    itrn = ItrNode(itr, (f"127.{b}.0.2", 9341))
    etrn = EtrNode(Etr(cc, eids=[parse_prefix(f"127.{b}.11.0/24")],
                       trusted_rlocs=[parse_prefix(f"127.{b}.0.0/24")]), f"127.{b}.1.1")
    got = []
    for n in (itrn, etrn):
        await n.start()
    rx = await bind(f"127.{b}.11.1", 0, lambda d, a: got.append(d))
    tx = await bind(f"127.{b}.0.1", 0, lambda d, a: None)
    port = rx.get_extra_info("sockname")[1]
    try:
        src = ipaddress.ip_address(f"127.{b}.0.1").packed
        chan = ipaddress.ip_address(f"127.{b}.255.1").packed
        other = ipaddress.ip_address(f"127.{b}.255.9").packed
        eid = ipaddress.ip_address(f"127.{b}.11.1").packed

        def cc_pkt(pdu: bytes, dst: bytes = chan) -> bytes:
            return c.build_ip(src, dst, 17, c.build_udp(54341, 54341, pdu))

        inside = (f"127.{b}.0.2", 9341)
        bad = [b"", b"\x45", b"\x60" + b"\x00" * 10, cc_pkt(b"\x12\x01\x14")[:-1],
               cc_pkt(c.encode_cc_payload(0, b"x", 1, b"\x00" * 20)),  # wrong hash
               cc_pkt(c.encode_cc_payload(0, b"x"), other),  # unknown channel
               cc_pkt(c.encode_cc_header(0, b"\x01" * 20, eid, port))]  # unknown hash
        for p in bad:
            tx.sendto(p, inside)
        etr_data = (f"127.{b}.1.1", 4341)
        for p in (b"", b"\x00" * 8, b"\x00" * 8 + b"\x45" * 30):
            tx.sendto(p, etr_data)
        tx.sendto(cc_pkt(c.encode_cc_payload(1, b"good")), inside)
        tx.sendto(cc_pkt(c.encode_cc_header(1, c.digest(1, b"good"), eid, port)), inside)
        for _ in range(200):
            if got:
                break
            await asyncio.sleep(0.01)
        assert got == [b"good"]
        d = itr.drops()
        assert d["malformed"] >= 3 and d["bad_hash"] == 1 and d["unknown_channel"] == 1
        assert d["unknown_hash"] == 1
        assert etrn.etr.drops()["malformed"] >= 2
    finally:
        rx.close()
        tx.close()
        for n in (itrn, etrn):
            await n.close()
