"""``vmc proxy --workers N`` steers each connection to the worker that owns its object (issue 17).

The kernel spreads connections over SO_REUSEPORT workers by 4-tuple; without steering, clients of
one object on two workers cost two origin copies and a late client cannot join a stream another
worker holds. These tests run the hand-off on real sockets: a TCP connection passed over a Unix
socket in one process, then whole proxies with two workers in front of a real origin.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

import pytest
from vmc_support import engine_args

from vmc.aio import steer
from vmc.core.http import HttpSharingCore
from vmc.core.machine import MachineConfig

HEAD = b"GET /a.bin?size=10 HTTP/1.1\r\nHost: example.org\r\n\r\n"


def test_first_head_takes_whole_gets_and_heads_only() -> None:
    assert steer.first_head(HEAD) == (b"/a.bin?size=10", b"example.org")
    assert steer.first_head(b"HEAD /x HTTP/1.1\r\nHost: h\r\n\r\n") == (b"/x", b"h")
    assert steer.first_head(HEAD[:-2]) is None  # not whole: served where it landed
    assert steer.first_head(b"POST /x HTTP/1.1\r\nHost: h\r\ncontent-length: 0\r\n\r\n") is None
    assert steer.first_head(b"GET /x HTTP/1.1\r\nHost: h\r\nbad header\r\n\r\n") is None
    assert steer.first_head(b"GET /x HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n") is None  # 400 here
    assert steer.first_head(HEAD + b"x" * steer.MAX_HANDOFF) is None


def test_the_core_names_the_uri_it_keys_by_and_counts_nothing() -> None:
    core = HttpSharingCore(MachineConfig(), "origin.example:8080",
                           upstreams=["origin.example:8080"], status_path="/_vmc/status")
    core.connection_made(1, 0.0)
    before = core.stats.snapshot(0)
    assert core.request_uri(1, b"/a.bin", b"whatever") == "http://origin.example:8080/a.bin"
    assert core.request_uri(1, b"/_vmc/status", None) is None  # each worker answers its own
    assert core.request_uri(1, b"ftp://x/y", None) is None  # refused: the core answers it
    core.original_destination(1, ("origin.example", 8080), 0.0)  # transparent: Host names it
    assert core.request_uri(1, b"/p", b"Site.Example") == "http://site.example/p"
    assert core.stats.snapshot(0) == before


def test_owner_is_the_same_in_every_worker_and_spreads_objects() -> None:
    made = steer.pairs(3)
    try:
        ws = [steer.Steering(i, made[i][0], [tx for _, tx in made]) for i in range(3)]
        uris = [f"http://o/{i}.bin" for i in range(300)]
        owners = [ws[0].owner(u) for u in uris]
        assert all(w.owner(u) == o for w in ws for u, o in zip(uris, owners))
        assert min(owners.count(i) for i in range(3)) > 60
    finally:
        for a, b in made:
            a.close()
            b.close()


def test_a_handed_off_connection_is_the_same_connection() -> None:
    """The socket that arrives is the client's connection: what the new holder writes reaches
    the client, and the sender's descriptor closing does not end it."""
    made = steer.pairs(2)
    srv = socket.create_server(("127.0.0.1", 0))
    try:
        sender = steer.Steering(0, made[0][0], [tx for _, tx in made])
        taker = steer.Steering(1, made[1][0], [tx for _, tx in made])
        client = socket.create_connection(srv.getsockname(), timeout=5)
        accepted, _ = srv.accept()
        client.sendall(HEAD)
        first = accepted.recv(65536)
        assert sender.send(1, first, accepted.fileno())
        accepted.close()  # the sender forgets it: no FIN, the taker holds the socket
        got = taker.receive()
        assert [type(g) for g in got] == [steer.Handed] and got[0].data == HEAD
        held = got[0].sock
        held.setblocking(True)
        held.sendall(b"HTTP/1.1 204 No Content\r\n\r\n")
        assert client.recv(100) == b"HTTP/1.1 204 No Content\r\n\r\n"
        client.sendall(b"more")
        assert held.recv(10) == b"more"
        held.close()
        assert client.recv(10) == b""  # now it ends
        assert (sender.counters["handed_off"], taker.counters["taken_over"]) == (1, 1)
        assert taker.receive() == []
        client.close()
    finally:
        srv.close()
        for a, b in made:
            a.close()
            b.close()


def test_a_refused_hand_off_is_counted_and_kept() -> None:
    made = steer.pairs(2)
    try:
        s = steer.Steering(0, made[0][0], [tx for _, tx in made])
        made[1][0].close()  # worker 1 is gone
        r, w = socket.socketpair()
        assert not s.send(1, b"GET / HTTP/1.1\r\n\r\n", r.fileno())
        assert s.counters["handoff_failed"] == 1 and s.counters["handed_off"] == 0
        r.close()
        w.close()
    finally:
        for a, b in made:
            a.close()
            b.close()


def test_a_finished_object_offered_arrives_with_its_file(tmp_path) -> None:
    from vmc.aio.spill import DiskStore
    from vmc.core import policy
    from vmc.core.session import FinishedCopy

    made = steer.pairs(2)
    try:
        a = steer.Steering(0, made[0][0], [tx for _, tx in made])
        b = steer.Steering(1, made[1][0], [tx for _, tx in made])
        body = b"x" * 5000
        src = DiskStore(1 << 20, str(tmp_path))
        f = src.open(len(body))
        assert f is not None and f.write(0, body) and f.complete
        copy = FinishedCopy("k", "http://o/a", ("o", 80), b"/a", ((b"host", b"o"),), 200,
                            ((b"content-length", b"5000"),), policy.Validators(b'"e"', None, 5000),
                            5000, (), (), policy.Freshness(60.0, 0.0), 1.0,
                            policy.Verdict(True, policy.NotShared.SHAREABLE))
        a.offer(copy, f.fd)
        (got,) = b.receive()
        assert isinstance(got, steer.Offered) and got.copy == copy
        dst = DiskStore(1 << 20, str(tmp_path))
        mine = dst.adopt(got.fd, 5000)
        f.close()  # the sender's copy goes; ours still reads the same bytes
        assert mine is not None and mine.complete and mine.read(0, 5000) == body
        assert dst.snapshot()["adopted"] == 1 and dst.reserved == 5000
        assert a.counters["offered"] == 1
        r, w = socket.socketpair()  # a file shorter than its length is refused and closed
        assert DiskStore(1 << 20, str(tmp_path)).adopt(os.dup(r.fileno()), 10) is None
        r.close()
        w.close()
        mine.close()
    finally:
        for x, y in made:
            x.close()
            y.close()


def _get(addr: tuple[str, int], path: str, split: bool = False) -> bytes:
    """One GET on a new connection (a new 4-tuple for the kernel to spread); ``split``: the
    head in two writes 0.2 s apart."""
    req = b"GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % path.encode()
    with socket.create_connection(addr, timeout=20) as s:
        if split:
            s.sendall(req[:10])
            time.sleep(0.2)
            s.sendall(req[10:])
        else:
            s.sendall(req)
        out = b""
        while chunk := s.recv(65536):
            out += chunk
        return out


class _Stack:
    def __init__(self, *extra: str) -> None:
        py = [sys.executable, "-m", "vmc"]
        self.origin = subprocess.Popen(py + ["origin", "--listen", "127.0.0.1:0"],
                                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                       text=True)
        self.proxy: subprocess.Popen[str] | None = None
        assert self.origin.stdout is not None
        o = re.search(r"http://([0-9.]+:\d+)/", self.origin.stdout.readline())
        assert o, "origin did not start"
        self.proxy = subprocess.Popen(
            py + ["proxy", *engine_args(), "--listen", "127.0.0.1:0", "--upstream", o.group(1),
                  "--default", o.group(1), "--workers", "2", *extra],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert self.proxy.stdout is not None
        first = self.proxy.stdout.readline()
        m = re.search(r"http://([0-9.]+):(\d+)/ \(2 workers", first)
        assert m, first
        self.addr = (m.group(1), int(m.group(2)))

    def stop(self) -> tuple[dict, str]:
        assert self.proxy is not None
        self.proxy.send_signal(signal.SIGTERM)
        out, err = self.proxy.communicate(timeout=60)
        assert self.proxy.returncode == 143, err
        assert "Traceback" not in err, err
        return json.loads(out.strip().splitlines()[-1]), err

    def close(self) -> None:
        for p in (self.proxy, self.origin):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait(10)
            if p is not None and p.stdout:
                p.stdout.close()
            if p is not None and p.stderr:
                p.stderr.close()


@pytest.fixture
def stack():
    made: list[_Stack] = []

    def make(*extra: str) -> _Stack:
        made.append(_Stack(*extra))
        return made[-1]

    yield make
    for s in made:
        s.close()


def _body_ok(reply: bytes, size: int) -> bool:
    head, _, body = reply.partition(b"\r\n\r\n")
    return head.startswith(b"HTTP/1.1 200") and len(body) == size


@pytest.mark.parametrize("loop", ["auto", "asyncio"])
def test_two_workers_fetch_an_object_once(stack, loop) -> None:
    """24 connections for one object, one after another: the first goes to the object's owner
    (wherever the kernel put it), which fetches it once and offers the finished file to the
    other worker; from then on each worker serves it from that file where the connection
    landed. On uvloop (the CLI's default when installed) and on asyncio's loop."""
    st = stack("--loop", loop)
    bodies = set()
    for _ in range(24):
        reply = _get(st.addr, "/one.bin?size=4096")
        assert _body_ok(reply, 4096)
        bodies.add(reply.partition(b"\r\n\r\n")[2])
    assert len(bodies) == 1  # the same bytes from the owner's file and from its offered copy
    pids = set()
    for _ in range(12):  # the status path is each worker's own: both still answer it
        with urllib.request.urlopen(f"http://{st.addr[0]}:{st.addr[1]}/_vmc/status",
                                    timeout=10) as r:
            pids.add(json.loads(r.read())["pid"])
    final, _ = st.stop()
    assert final["origin_requests"] == 1, final
    assert final["requests"] == 24  # (the status answers are not requests for objects)
    ws = final["workers"]
    assert sum(w["handed_off"] for w in ws) == sum(w["taken_over"] for w in ws)
    # the first connection, and at most one more whose head came before the offer was read
    assert final["handed_off"] <= 2, final
    assert final["handoff_failed"] == 0 and final["offer_failed"] == 0
    assert final["offered"] == 1 and sum(w["disk"]["adopted"] for w in ws) == 1, final
    hits = [w["disk"]["hits"] for w in ws]
    assert min(hits) >= 1, f"one worker served everything: {hits}"
    assert len(pids) == 2, pids


def test_late_clients_on_either_worker_join_one_stream(stack) -> None:
    """Eight clients 0.1 s apart on a stream the origin paces over ~2 s: one origin copy,
    seven joins, every body whole."""
    st = stack()
    size, results = 400_000, []

    def one() -> None:
        results.append(_get(st.addr, f"/live.bin?size={size}&rate=200000"))

    threads = []
    for _ in range(8):
        t = threading.Thread(target=one)
        t.start()
        threads.append(t)
        time.sleep(0.1)
    for t in threads:
        t.join(60)
    assert len(results) == 8 and all(_body_ok(r, size) for r in results)
    final, _ = st.stop()
    assert final["origin_requests"] == 1, final
    assert final["joins"] == 7, final


def test_a_head_in_pieces_and_no_steer_are_served_where_they_land(stack) -> None:
    st = stack()
    for _ in range(6):
        assert _body_ok(_get(st.addr, "/p.bin?size=2048", split=True), 2048)
    final, _ = st.stop()
    assert final["handed_off"] == 0 and final["taken_over"] == 0
    st2 = stack("--no-steer")
    for _ in range(6):
        assert _body_ok(_get(st2.addr, "/q.bin?size=2048"), 2048)
    final2, _ = st2.stop()
    assert "handed_off" not in final2  # no steering sockets at all
