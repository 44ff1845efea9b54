"""``corecast client`` accepts the stream only from the source and its domain's ETRs (issue 13
item 2), and retries the join with backoff while the source is not up yet (item 19b)."""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading

PY = [sys.executable, "-m", "corecast"]


def _free_tcp_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _line(p: subprocess.Popen, needle: str) -> str:
    """Read stderr lines until one contains ``needle`` (the process prints a few at most)."""
    seen = []
    for _ in range(20):
        line = p.stderr.readline()
        seen.append(line)
        if needle in line or not line:
            break
    assert needle in seen[-1], seen
    return seen[-1]


def test_garbage_from_a_stranger_is_rejected_and_the_stream_is_intact():
    b = random.randint(1, 250)
    pre = f"127.85.{b}"
    http = _free_tcp_port(f"{pre}.1")
    src = subprocess.Popen(PY + ["source", "--eid", f"{pre}.1", "--channel", f"{pre}.255",
                                 "--itr", f"{pre}.2:9341", "--http-port", str(http),
                                 "--chunks", "40", "--bitrate", "800000",
                                 "--wait-subscribers", "1", "--duration", "60"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    client = None
    stop = threading.Event()
    sent = [0]
    try:
        _line(src, " ready ")
        client = subprocess.Popen(PY + ["client", "--eid", f"{pre}.11",
                                        "--join", f"{pre}.1:{http}", "--channel", f"{pre}.255",
                                        "--no-corecast", "--chunks", "40", "--duration", "60"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        port = json.loads(_line(client, " ready ").partition(" ready ")[2])["port"]

        def flood() -> None:  # RTP-looking garbage with random sequence numbers, from a stranger
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as tx:
                tx.bind((f"{pre}.66", 0))
                while not stop.is_set() and sent[0] < 5000:
                    tx.sendto(b"\x80\x60" + os.urandom(30), (f"{pre}.11", port))
                    sent[0] += 1
                    stop.wait(0.001)

        t = threading.Thread(target=flood)
        t.start()
        out, err = client.communicate(timeout=60)
        stop.set()
        t.join()
        assert client.returncode == 0, err
        st = json.loads(out)
        assert st["received"] == 40 and st["expected"] == 40 and st["lost"] == 0, st
        assert st["malformed"] == 0 and st["duplicates"] == 0
        assert st["rejected"] >= 1 and st["rejected"] <= sent[0]
        assert f"dropping datagrams from {pre}.66" in err and err.count("dropping") == 1
    finally:
        stop.set()
        for p in (src, client):
            if p is not None and p.poll() is None:
                p.kill()
                p.communicate(timeout=5)


def test_client_started_before_the_source_retries_and_joins():
    """README 'The roles by hand': the client may start before the source's HTTP port is open."""
    b = random.randint(1, 250)
    pre = f"127.86.{b}"
    http = _free_tcp_port(f"{pre}.1")
    client = subprocess.Popen(PY + ["client", "--eid", f"{pre}.11", "--join", f"{pre}.1:{http}",
                                    "--channel", f"{pre}.255", "--no-corecast", "--chunks", "10",
                                    "--duration", "60"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    src = None
    try:
        # the client says once that the source is not there yet, then keeps trying
        assert "retrying for up to 30 s" in _line(client, "cannot join")
        src = subprocess.Popen(PY + ["source", "--eid", f"{pre}.1", "--channel", f"{pre}.255",
                                     "--itr", f"{pre}.2:9341", "--http-port", str(http), "--chunks",
                                     "10", "--wait-subscribers", "1", "--duration", "60"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        out, err = client.communicate(timeout=60)
        assert client.returncode == 0, err
        st = json.loads(out)
        assert st["received"] == 10 and st["lost"] == 0
    finally:
        for p in (src, client):
            if p is not None and p.poll() is None:
                p.kill()
                p.communicate(timeout=5)


def test_join_gives_up_after_its_timeout_with_one_line():
    b = random.randint(1, 250)
    r = subprocess.run(PY + ["client", "--eid", f"127.87.{b}.11", "--join", f"127.87.{b}.1:9",
                             "--channel", f"127.87.{b}.255", "--join-timeout", "1"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 2 and "retrying for up to 1 s" in lines[0]
    assert lines[1].startswith(f"corecast: error: client: cannot join via 127.87.{b}.1:9 after ")
    assert json.loads(r.stdout)["received"] == 0


async def test_source_serves_a_join_only_for_the_asking_eid():
    """The subscription service: a join names EID:port, and the stream goes there, so only that
    EID may ask (its TCP source address); anyone else would aim the stream at a victim."""
    from corecast.aio.http import request
    from corecast.aio.nodes import SourceNode
    from corecast.core.source import Source

    b = random.randint(1, 250)
    src = Source(f"127.88.{b}.1", (f"127.88.{b}.2", 9))
    src.add_channel(f"127.88.{b}.255")
    node = SourceNode(src, f"127.88.{b}.1")
    await node.start(stream=False)
    try:
        http = (f"127.88.{b}.1", node.http_port)
        join = {"channel": f"127.88.{b}.255", "eid": "127.88.77.77", "port": 9, "corecast": False}
        status, body = await request(*http, "POST", "/join", join, local_host=f"127.88.{b}.66")
        assert status == 403 and "not the address" in body["error"] and node.refused == 1
        status, _ = await request(*http, "POST", "/join", join, local_host="127.88.77.77")
        assert status == 200 and node.refused == 1
        assert sum(len(c.dst) for c in src.channels.values()) == 1
    finally:
        await node.close()


def test_a_stream_that_never_comes_is_said_once():
    b = random.randint(1, 250)
    pre = f"127.92.{b}"
    http = _free_tcp_port(f"{pre}.1")
    src = subprocess.Popen(PY + ["source", "--eid", f"{pre}.1", "--channel", f"{pre}.255",
                                 "--itr", f"{pre}.2:9341", "--http-port", str(http),
                                 "--wait-subscribers", "2", "--duration", "30"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    client = None
    try:
        _line(src, " ready ")
        client = subprocess.Popen(PY + ["client", "--eid", f"{pre}.11", "--join", f"{pre}.1:{http}",
                                        "--channel", f"{pre}.255", "--etr", f"{pre}.5",
                                        "--stall-warning", "0.5", "--duration", "20"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        _line(client, " ready ")
        warning = _line(client, "warning")
        assert "nothing received 0.5 s after joining" in warning and f"ETR {pre}.5" in warning
        client.send_signal(signal.SIGINT)
        out, err = client.communicate(timeout=15)
        assert client.returncode == 130 and "warning" not in err  # said once
        assert json.loads(out)["received"] == 0
    finally:
        for p in (src, client):
            if p is not None and p.poll() is None:
                p.kill()
                p.communicate(timeout=5)
