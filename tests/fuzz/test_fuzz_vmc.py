"""Fuzz the live VMC proxy from both sides, inside a network namespace with no route out.

The proxy is a forwarding role, so it runs only in an
:class:`~deliverykit.testbed.isolated.IsolatedNamespace` (``lo`` alone; a packet to
anywhere else fails with ENETUNREACH). Origin, proxy and clients all use that
namespace's loopback. For a bounded time (``FUZZ_SECONDS``, default 3 s in CI; at
least 5 s here) and a bounded number of requests (``FUZZ_SEED`` replays a run):

- client side: valid requests, their HTTP-shaped variants (versions, framing fields,
  folding, pipelining) and the shared :class:`Mutator`'s mutations of them
  (bits flipped, cut, extended, spliced, random bytes), sent raw;
- origin side: every fuzz request names a misbehaviour the origin then commits
  (bytes past Content-Length, short bodies, bad chunked framing, garbage status
  lines, no answer, 1xx floods, conflicting lengths, ...).

Each fuzz request has its own id, and every body byte the origin sends for it
(including the bytes it injects past the framing) carries that id. The test
asserts that the proxy stays up, counts what it refused and dropped, never hands
a client a body that carries another request's id, that a transfer running
beside the fuzzer completes with exactly the right bytes, and that nothing tried
to leave the namespace.
"""

from __future__ import annotations

import json
import os
import random
import re
import socket
import sys
import threading
import time
from collections import Counter

import pytest

from vmc.aio.origin import body_slice, expected
from vmc.conformance.harness import CLOSE, CraftedOrigin, fetch, response

from .conftest import Mutator, fuzz_seconds, fuzz_seed

pytestmark = [pytest.mark.root]

PROXY_PORT, ORIGIN_PORT = 18080, 18081
MAX_REQUESTS = 3000
SIDE_PATH, SIDE_SIZE, SIDE_RATE = "/good/side.bin", 3_000_000, 1_000_000
MARK = re.compile(rb"<(\d+)>")

MODES = ("good", "extra", "short-close", "short-hang", "bad-chunk", "chunk-no-end",
         "garbage-status", "no-answer", "interim-flood", "early-hints", "cl-and-te",
         "two-lengths", "no-colon", "close-delimited", "huge-header", "negative-length",
         "pipeline-garbage")
# Not fuzzed: an origin that sends a whole unsolicited response some time *after* a complete one. If
# the proxy has sent the next request on that connection by then, the unsolicited bytes are, on the
# wire, that request's answer, and the connection stays one response behind from then on: no
# HTTP/1.1 client can tell (docs/security/vmc-proxy.md, "What the proxy trusts"). Bytes that arrive
# while the connection is idle are caught: test_vmc_proxy_safety::test_bytes_arriving_while_idle_*.


def _marked(ident: int, n: int) -> bytes:
    unit = b"<%d>" % ident
    return (unit * (n // len(unit) + 1))[:n]


def _side(target: str):
    """The transfer beside the fuzzer: a correct, paced response (the proxy may share and pool
    it)."""
    path = target.partition("?")[0]
    first, end = 0, SIDE_SIZE
    yield response(200, [("etag", '"side"'), ("last-modified", "Sat, 01 Jan 2000 00:00:00 GMT"),
                         ("date", "Sun, 02 Jan 2000 00:00:00 GMT")], length=end - first)
    pos = first
    while pos < end:
        n = min(50_000, end - pos)
        yield body_slice(path, pos, pos + n)
        pos += n
        yield n / SIDE_RATE


def misbehave(target: str, hdrs: dict):
    """The crafted origin: ``/f/<id>?m=<mode>`` commits misbehaviour ``mode``; ``/good/...`` is
    correct."""
    if target.startswith("/good/"):
        yield from _side(target)
        return
    m = re.match(r"/f/(\d+)\?m=([a-z-]+)", target)
    if not m:
        yield response(404, [], b"")
        return
    ident, mode = int(m.group(1)), m.group(2)
    body = _marked(ident, 3000)
    if mode == "good":
        yield response(200, [], body)
    elif mode == "extra":
        yield response(200, [], body) + response(200, [], _marked(ident, 50))
    elif mode == "short-close":
        yield response(200, [], body[:1000], length=3000)
        yield CLOSE
    elif mode == "short-hang":
        yield response(200, [], body[:1000], length=3000)
        yield 1.0
        yield CLOSE
    elif mode == "bad-chunk":
        yield response(200, [("transfer-encoding", "chunked")],
                       b"10\r\n" + body[:16] + b"\r\nzz\r\n", length=-1)
        yield CLOSE
    elif mode == "chunk-no-end":
        yield response(200, [("transfer-encoding", "chunked")],
                       b"20\r\n" + body[:32] + b"\r\n", length=-1)
        yield CLOSE
    elif mode == "garbage-status":
        yield b"HTTP/1.1 2x0 Nope\r\n\r\n" + body[:100]
        yield CLOSE
    elif mode == "no-answer":
        yield CLOSE
    elif mode == "interim-flood":
        yield b"HTTP/1.1 102 Processing\r\n\r\n" * 40 + response(200, [], body)
    elif mode == "early-hints":
        hints = b"HTTP/1.1 103 Early Hints\r\nlink: </a>; rel=preload\r\n\r\n"
        yield hints + response(200, [], body)
    elif mode == "cl-and-te":
        yield response(200, [("transfer-encoding", "chunked")],
                       b"5\r\n" + body[:5] + b"\r\n0\r\n\r\n" + body[:40])
        yield CLOSE
    elif mode == "two-lengths":
        yield response(200, [("content-length", "10")], body[:40])
        yield CLOSE
    elif mode == "no-colon":
        yield (b"HTTP/1.1 200 OK\r\nthis header has no colon\r\ncontent-length: 10\r\n\r\n"
               + body[:10])
    elif mode == "close-delimited":
        yield response(200, [], body, length=-1)
        yield CLOSE
    elif mode == "huge-header":
        yield response(200, [("x-big", "a" * 100_000)], body[:10])
    elif mode == "negative-length":
        yield response(200, [], body[:10], length=-5)  # "content-length: -5"
        yield CLOSE
    elif mode == "pipeline-garbage":
        yield response(200, [], body[:100]) + b"\x00\xff garbage " + _marked(ident, 30)
    else:
        yield CLOSE


def request_seeds(target: str) -> list[bytes]:
    """A valid request for ``target`` and its HTTP-shaped variants (version, framing, folding,
    bare LF, pipelining): the seeds the shared :class:`Mutator` flips, cuts, extends and splices."""
    base = f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1:{ORIGIN_PORT}\r\n\r\n".encode()
    end = b"\r\n\r\n"
    versions = (b"HTTP/9.9", b"HTTP/1.0", b"HTTP/0.9", b"HTTP/2", b"HTTX/1.1")
    head_ends = (b"\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\nhello",
                 b"\r\nContent-Length: -1\r\n\r\n",
                 b"\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
                 b"\r\nHost: other\r\n\r\n",
                 b"\r\nX-A: b\r\n \tfolded\r\n\r\n",
                 b"\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\nabc")
    return [base,
            *(base.replace(b"HTTP/1.1", v) for v in versions),
            *(base.replace(end, v, 1) for v in head_ends),
            base.replace(b"\r\n", b"\n"),
            base + b"GET /f/0?m=good HTTP/1.1\r\nHost: x\r\n\r\n"]


def _raw(addr, data: bytes, wait: float = 0.5) -> bytes:
    out = b""
    try:
        with socket.create_connection(addr, timeout=wait) as s:
            s.sendall(data)
            end = time.monotonic() + wait
            while time.monotonic() < end:
                s.settimeout(max(0.05, end - time.monotonic()))
                more = s.recv(65536)
                if not more:
                    break
                out += more
    except OSError:
        pass
    return out


def drive(seed: int, seconds: float) -> dict:
    """Inside the namespace: the crafted origin, the side transfer and the fuzzing clients."""
    proxy = ("127.0.0.1", PROXY_PORT)
    report: dict = {"requests": 0, "raw": 0, "mixups": [], "statuses": Counter(), "side": None}
    lock = threading.Lock()
    with CraftedOrigin(misbehave, port=ORIGIN_PORT) as origin:
        deadline = time.monotonic() + 20
        while fetch(proxy, "/_vmc/status", timeout=2).status != 200:
            if time.monotonic() > deadline:
                raise RuntimeError("the proxy never answered")
            time.sleep(0.1)
        side: dict = {}

        def side_transfer() -> None:
            r = fetch(proxy, SIDE_PATH, timeout=60)
            side["ok"] = r.status == 200 and r.complete and r.body == expected(SIDE_PATH, SIDE_SIZE)
            side["what"] = f"{r.status} complete={r.complete} {len(r.body)} bytes {r.error}"

        side_th = threading.Thread(target=side_transfer, daemon=True)
        side_th.start()
        next_id = iter(range(1, 10**9))
        modes: dict[int, str] = {}
        stop_at = time.monotonic() + seconds

        def worker(wseed: int) -> None:
            rng = random.Random(wseed)
            while time.monotonic() < stop_at:
                with lock:
                    ident = next(next_id)
                    if report["requests"] >= MAX_REQUESTS:
                        return
                    report["requests"] += 1
                mode = rng.choice(MODES)
                target = f"/f/{ident}?m={mode}"
                modes[ident] = mode
                if rng.random() < 0.35:
                    seeds = request_seeds(target)
                    data = Mutator(seeds, rng).one() if rng.random() < 0.8 else rng.choice(seeds)
                    body = _raw(proxy, data)
                    r_body = b"-"
                    with lock:
                        report["raw"] += 1
                else:
                    r = fetch(proxy, target, timeout=30)
                    body = r_body = r.body
                    with lock:
                        key = str(r.status)
                        report["statuses"][key] += 1
                # A mutated request may name another id (a flipped digit): that one is its own.
                raw = body is not r_body
                named = {int(x) for x in re.findall(rb"/f/(\d+)", data)} if raw else set()
                asked = {ident, 0} | named
                others = {int(x) for x in MARK.findall(body)} - asked
                if others:
                    seen = [(o, modes.get(o)) for o in sorted(others)[:5]]
                    detail = (
                        "" if raw else f" status {r.status} interim {len(r.interim)} {r.headers}"
                    )
                    with lock:
                        report["mixups"].append(
                            f"{target} ({'raw' if raw else 'h11'}) got bytes of {seen}: "
                            f"{body[:200]!r}{detail}")

        workers = [threading.Thread(target=worker, args=(seed * 100 + i,), daemon=True)
                   for i in range(4)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(seconds + 60)
        side_th.join(90)
        report["side"] = side
        report["origin_requests"] = len(origin.requests)
        st = fetch(proxy, "/_vmc/status?recent=0", timeout=10)
        failed = {"error": f"{st.status} {st.error}"}
        report["status"] = json.loads(st.body) if st.status == 200 else failed
    return report


def test_fuzz_live_proxy_in_an_isolated_namespace(tmp_path):
    from deliverykit.testbed.isolated import IsolatedNamespace, start_forwarding_role

    seed, seconds = fuzz_seed(), max(5.0, fuzz_seconds())
    with IsolatedNamespace(prefix="fzvmc") as ns:
        with open(tmp_path / "proxy.err", "wb") as err, open(os.devnull, "wb") as out:
            argv = [sys.executable, "-m", "vmc.conformance.adapter", "proxy",
                    "--listen", f"127.0.0.1:{PROXY_PORT}",
                    "--upstream", f"127.0.0.1:{ORIGIN_PORT}"]
            proxy = start_forwarding_role(ns, argv, stdout=out, stderr=err)
            base = ns.ip_counters()["OutNoRoutes"]  # after the isolation probe, which counts one
            try:
                report = ns.spawn(drive, seed, seconds).result(timeout=seconds + 180)
                alive = proxy.poll() is None
            finally:
                proxy.terminate()
                proxy.wait(10)
        assert ns.ip_counters()["OutNoRoutes"] == base, "something tried to leave the namespace"
    stderr = (tmp_path / "proxy.err").read_text(errors="replace")
    print(f"seed {seed}: {report['requests']} requests ({report['raw']} raw), "
          f"statuses {report['statuses']}, origin saw {report['origin_requests']}; "
          f"refused {report['status'].get('refused')}")
    assert alive, f"seed {seed}: the proxy died: {stderr[-2000:]}"
    assert "Traceback" not in stderr, f"seed {seed}: {stderr[-2000:]}"
    assert not report["mixups"], (
        f"seed {seed}: one client got another's response: {report['mixups'][:5]}")
    assert report["side"].get("ok"), f"seed {seed}: the side transfer: {report['side']}"
    st = report["status"]
    refused = st["refused"]
    # mutated requests are counted as such
    assert refused.get("malformed", 0) > 0, refused
    # so are bad origins
    assert sum(v for k, v in refused.items() if k.startswith("upstream-")) > 0, refused
    # and connections never reused after extra bytes
    assert st.get("upstream_connections_dirty", 0) > 0, st
    assert report["statuses"].get("200", 0) > 0
