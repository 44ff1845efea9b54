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
from corecast.deploy import check, fig2
from corecast.demo import run


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
            "channel": f"127.{b}.255.1", "eid": f"127.{b}.11.1", "port": alive.port}))[0] == 404
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
