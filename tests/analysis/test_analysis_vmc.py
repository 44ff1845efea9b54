"""``deliverykit analyse --only vmc`` on a captured proxy + origin + clients run.

An origin streams one object slowly; a first curl starts the shared stream,
an unmodified curl and a VMC-aware ``vmc get`` join it later (the latter gets
a 206 and patches its prefix with a Range request).  The analyser's origin
and client byte counts must equal the proxy's own status endpoint, its
per-URI numbers the object sizes, and its 206 rows the patches that happened.
"""

from __future__ import annotations

import json
import subprocess
import time

import pytest
from analysis_support import PY, analyse, free_tcp_port, tcpdump
from hypothesis import given, settings, strategies as st

from deliverykit.pcap import Frame
from vmc.analysis import Analyser

SIZE = 300_000


def _wait_port(port: int, deadline: float = 10.0) -> None:
    import socket
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(port)


def _summary(res: dict) -> dict:
    return {r["what"]: r["value"] for r in res["vmc_summary"]}


@pytest.mark.root
@pytest.mark.tool("tcpdump", "curl")
@pytest.mark.slow
def test_proxy_origin_capture(tmp_path, procs):
    op, pp = free_tcp_port(), free_tcp_port()
    cap = tmp_path / "vmc.pcap"
    with tcpdump(cap, f"tcp and (port {op} or port {pp})"):
        procs.append(subprocess.Popen([PY, "-m", "vmc", "origin", "--listen", f"127.0.0.1:{op}"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        procs.append(subprocess.Popen([PY, "-m", "vmc", "proxy", "--listen", f"127.0.0.1:{pp}",
                                       "--upstream", f"127.0.0.1:{op}"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        _wait_port(op)
        _wait_port(pp)
        url = f"http://127.0.0.1:{op}/movie.bin?size={SIZE}&rate=150000"
        first = subprocess.Popen(["curl", "-sS", "-x", f"127.0.0.1:{pp}", url, "-o",
                                  str(tmp_path / "a")])
        procs.append(first)
        time.sleep(0.8)
        late = subprocess.Popen(["curl", "-sS", "-x", f"127.0.0.1:{pp}", url, "-o",
                                 str(tmp_path / "b")])
        procs.append(late)
        aware = subprocess.run([PY, "-m", "vmc", "get", url, "--proxy", f"127.0.0.1:{pp}", "-o",
                                str(tmp_path / "c"), "-q"], capture_output=True, text=True,
                               timeout=30)
        assert aware.returncode == 0, aware.stderr
        assert first.wait(30) == 0 and late.wait(30) == 0
        status = json.loads(subprocess.run(
            ["curl", "-sS", f"http://127.0.0.1:{pp}/_vmc/status"], capture_output=True,
            text=True, timeout=10, check=True).stdout)
    for n in "abc":
        assert (tmp_path / n).stat().st_size == SIZE
    for infer, opts in (
            ("both", ["--opt", f"proxy=127.0.0.1:{pp}", "--opt", f"origin=127.0.0.1:{op}"]),
            ("proxy-only", ["--opt", f"proxy={pp}"]), ("inferred", [])):
        _check(tmp_path, cap, infer, opts, op, pp, status)


def _check(tmp_path, cap, infer: str, opts: list[str], op: int, pp: int, status: dict) -> None:
    res = analyse(cap, tmp_path, "--only", "vmc", "--plots", str(tmp_path / "plots"),
                  *opts)["results"]["vmc"]
    s = _summary(res)
    assert s["origin_bytes"] == status["origin_bytes"]
    assert s["client_bytes"] == status["client_bytes"] == 3 * SIZE
    assert s["client_incomplete"] == 0 and s["gaps"] == 0 and s["http_errors"] == 0
    assert res["vmc_summary"] and not any("unreliable" in r for r in res["vmc_summary"])
    assert s["proxies"] == (f"*:{pp}" if infer == "proxy-only" else f"127.0.0.1:{pp}")
    uri = f"http://127.0.0.1:{op}/movie.bin?size={SIZE}&rate=150000"
    (u,) = [r for r in res["vmc_uris"] if r["uri"] == uri]
    assert u["client_bytes"] == 3 * SIZE and u["origin_bytes"] == status["origin_bytes"]
    # the late curl (patched), vmc get (joined) and its prefix Range request, as the proxy counts
    assert u["joins"] == status["joins"] == 3
    assert u["client_206"] >= 1  # the VMC-aware joiner's live part and its prefix patch
    client_patches = [p for p in res["vmc_patches"] if p["side"] == "client"]
    assert sum(p["bytes"] for p in client_patches) > 0
    for p in res["vmc_patches"]:
        first_b, last_b = p["content_range"].split()[1].split("/")[0].split("-")
        assert p["bytes"] == int(last_b) - int(first_b) + 1
    assert any(r["side"] == "status" for r in res["vmc_requests"])
    assert s["origin_bytes"] < s["client_bytes"]  # the stream was shared
    for side, key in (("client", "client_bytes"), ("origin", "origin_bytes")):
        assert sum(r["body_bytes"] for r in res["vmc_rates"] if r["side"] == side) == s[key]
    assert (tmp_path / "plots" / "vmc-bytes.png").read_bytes()[:4] == b"\x89PNG"


_tcp = st.builds(
    lambda hdr, flags, seq, body: (hdr + seq.to_bytes(4, "big") + b"\0\0\0\0" + bytes([0x50, flags])
                                   + b"\xff\xff\0\0\0\0" + body),
    st.sampled_from([b"\x1f\x90\xc0\x00", b"\xc0\x00\x1f\x90"]),
    st.sampled_from([0x02, 0x12, 0x10, 0x18, 0x11, 0x04]),
    st.integers(0, 2**32 - 1),
    st.one_of(st.binary(max_size=80), st.just(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
              st.just(b"HTTP/1.1 206 OK\r\nContent-Length: 3\r\n"
                      b"Content-Range: bytes 0-2/9\r\n\r\nabc")))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(_tcp, st.binary(max_size=60)), max_size=25), st.booleans())
def test_fuzz_feed_never_raises(segments, with_opts):
    opts = {"proxy": "8080", "max-ooo": "100", "max-connections": "2"} if with_opts else {}
    a = Analyser(opts)
    for i, seg in enumerate(segments):
        f = Frame(float(i), "127.0.0.1", "127.0.0.2", 6, None, None, seg, len(seg) + 20)
        if a.accepts(f):
            a.feed(f)
    assert "vmc_summary" in a.tables()


def _feed(frames, opts) -> dict:
    a = Analyser(opts)
    for f in frames:
        if a.accepts(f):
            a.feed(f)
    return a.tables()


@pytest.mark.root
@pytest.mark.tool("tcpdump", "curl")
def test_reassembly_survives_reordering_and_retransmission(tmp_path, procs):
    """The same capture, with segments swapped pairwise and some sent twice, gives the same
    bytes."""
    import random

    from deliverykit.pcap import Reader
    op = free_tcp_port()
    cap = tmp_path / "o.pcap"
    with tcpdump(cap, f"tcp and port {op}"):
        procs.append(subprocess.Popen([PY, "-m", "vmc", "origin", "--listen", f"127.0.0.1:{op}"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        _wait_port(op)
        for size in (1000, 200_000):
            subprocess.run(["curl", "-sS", "-o", "/dev/null", f"http://127.0.0.1:{op}/x?size={size}",
                            f"http://127.0.0.1:{op}/y?size={size}"], check=True, timeout=20)
        subprocess.run(["curl", "-sS", "-o", "/dev/null", "-r", "100-1099",
                        f"http://127.0.0.1:{op}/x?size=5000"], check=True, timeout=20)
    frames = list(Reader(cap))
    base = _feed(frames, {})
    rng = random.Random(7)
    mixed = []
    i = 0
    while i < len(frames):
        group = frames[i:i + 3]
        rng.shuffle(group)
        mixed.extend(group)
        if rng.random() < 0.3:
            mixed.append(group[0])  # a retransmission
        i += 3
    again = _feed(mixed, {})
    rows = [(r["target"], r["status"], r["body_bytes"]) for r in base["vmc_requests"]]
    assert sorted(rows) == sorted((r["target"], r["status"], r["body_bytes"])
                                  for r in again["vmc_requests"])
    assert sorted(rows) == sorted([("/x?size=1000", 200, 1000), ("/y?size=1000", 200, 1000),
                                   ("/x?size=200000", 200, 200_000),
                                   ("/y?size=200000", 200, 200_000),
                                   ("/x?size=5000", 206, 1000)])
    (patch,) = again["vmc_patches"]
    assert patch["content_range"] == "bytes 100-1099/5000" and patch["side"] == "origin"


def _seg(sport: int, dport: int, seq: int, flags: int, data: bytes = b"") -> bytes:
    return (sport.to_bytes(2, "big") + dport.to_bytes(2, "big") + seq.to_bytes(4, "big")
            + b"\0\0\0\0" + bytes([0x50, flags]) + b"\xff\xff\0\0\0\0" + data)


def test_bounded_state():
    """Connections over max-connections are forgotten (counted); a client pipelining requests
    nobody answers stops being parsed once h11's backlog passes max-ooo."""
    a = Analyser({"max-connections": "3", "max-ooo": "2000"})
    for i in range(10):  # ten connections, each with one answered request
        cport = 40000 + i
        req = b"GET /%d HTTP/1.1\r\nHost: o\r\n\r\n" % i
        resp = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
        for src, dst, seg in (("10.0.0.2", "10.0.0.1", _seg(cport, 80, 100, 0x02)),
                              ("10.0.0.2", "10.0.0.1", _seg(cport, 80, 101, 0x18, req)),
                              ("10.0.0.1", "10.0.0.2", _seg(80, cport, 500, 0x18, resp))):
            a.feed(Frame(float(i), src, dst, 6, None, None, seg, 40 + len(seg)))
    assert len(a.conns) <= 3
    seq = 101
    a.feed(Frame(20.0, "10.0.0.3", "10.0.0.1", 6, None, None, _seg(50000, 80, 100, 0x02), 40))
    for i in range(200):  # pipelined, never answered
        req = b"GET /p%d HTTP/1.1\r\nHost: o\r\n\r\n" % i
        a.feed(Frame(21.0, "10.0.0.3", "10.0.0.1", 6, None, None, _seg(50000, 80, seq, 0x18, req),
                     40 + len(req)))
        seq += len(req)
    s = {r["what"]: r["value"] for r in a.tables()["vmc_summary"]}
    assert s["dropped_connections"] == 10 + 1 - 3
    assert s["http_backlog_dropped"] == 1
    assert s["origin_requests"] == 10 + 1 and s["origin_bytes"] == 20


def test_keepalive_head_chunked_and_pipelining():
    """Framing comes from h11: HEAD has no body, chunked bodies count their data, two
    pipelined requests on one keep-alive connection are paired with their answers in order."""
    a = Analyser({"origin": "80"})
    reqs = (b"HEAD /h HTTP/1.1\r\nHost: o\r\n\r\n"
            b"GET /c HTTP/1.1\r\nHost: o\r\n\r\n"
            b"GET /r HTTP/1.1\r\nHost: o\r\nRange: bytes=2-5\r\n\r\n")
    resps = (b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n"
             b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
             b"5\r\nhello\r\n3\r\nabc\r\n0\r\n\r\n"
             b"HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 2-5/10\r\nContent-Length: 4\r\n"
             b"\r\n2345")
    frames = [("10.0.0.2", "10.0.0.1", _seg(40000, 80, 100, 0x02)),
              ("10.0.0.1", "10.0.0.2", _seg(80, 40000, 700, 0x12))]
    for i in range(0, len(reqs), 20):  # small segments, sent in a burst
        frames.append(("10.0.0.2", "10.0.0.1", _seg(40000, 80, 101 + i, 0x18, reqs[i:i + 20])))
    for i in range(0, len(resps), 30):
        frames.append(("10.0.0.1", "10.0.0.2", _seg(80, 40000, 701 + i, 0x18, resps[i:i + 30])))
    frames.append(("10.0.0.1", "10.0.0.2", _seg(80, 40000, 701 + len(resps), 0x11)))
    frames.append(("10.0.0.2", "10.0.0.1", _seg(40000, 80, 101 + len(reqs), 0x11)))
    for i, (src, dst, seg) in enumerate(frames):
        a.feed(Frame(float(i), src, dst, 6, None, None, seg, 40 + len(seg)))
    t = a.tables()
    rows = [(r["method"], r["target"], r["status"], r["body_bytes"], r["complete"])
            for r in t["vmc_requests"]]
    assert rows == [("HEAD", "/h", 200, 0, True), ("GET", "/c", 200, 8, True),
                    ("GET", "/r", 206, 4, True)]
    assert t["vmc_patches"][0]["content_range"] == "bytes 2-5/10"
    s = {r["what"]: r["value"] for r in t["vmc_summary"]}
    assert s["origin_bytes"] == 12 and s["http_errors"] == 0 and s["open_connections_at_end"] == 0


def test_partial_connections_mark_their_side():
    """Connections forgotten at max-connections, or whose bytes h11 cannot parse (a capture
    that starts inside a response), leave their side's totals incomplete: marked, and the
    other side's are not."""
    a = Analyser({"proxy": "8080", "max-connections": "2"})
    for i in range(4):  # origin side (server 10.0.0.1:80): four connections, cap 2
        cport = 40000 + i
        req = b"GET /%d HTTP/1.1\r\nHost: o\r\n\r\n" % i
        for src, dst, seg in (("10.0.0.2", "10.0.0.1", _seg(cport, 80, 100, 0x02)),
                              ("10.0.0.2", "10.0.0.1", _seg(cport, 80, 101, 0x18, req))):
            a.feed(Frame(float(i), src, dst, 6, None, None, seg, 40 + len(seg)))
    # client side (the proxy at 8080): one whole exchange, then one seen from mid-body
    req = b"GET http://o/x HTTP/1.1\r\nHost: o\r\n\r\n"
    resp = b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\nVMC: first\r\n\r\nabcd"
    for src, dst, seg in (("10.0.0.3", "10.0.0.9", _seg(50000, 8080, 100, 0x02)),
                          ("10.0.0.3", "10.0.0.9", _seg(50000, 8080, 101, 0x18, req)),
                          ("10.0.0.9", "10.0.0.3", _seg(8080, 50000, 700, 0x18, resp))):
        a.feed(Frame(10.0, src, dst, 6, None, None, seg, 40 + len(seg)))
    t = a.tables()
    s = {r["what"]: r for r in t["vmc_summary"]}
    assert s["dropped_connections"]["value"] == 3  # the last one made room for the client
    assert s["origin_bytes"]["unreliable"] and not s["client_bytes"]["unreliable"]
    b = Analyser({"proxy": "8080"})
    mid = b"xx body bytes\r\n\r\nHTTP/1.1 200 OK\r\n\r\n"  # capture started inside a response
    b.feed(Frame(1.0, "10.0.0.9", "10.0.0.3", 6, None, None, _seg(8080, 50001, 900, 0x18, mid),
                 40 + len(mid)))
    s = {r["what"]: r for r in b.tables()["vmc_summary"]}
    assert s["unparsed_bytes"]["value"] == len(mid) and s["client_bytes"]["unreliable"]
