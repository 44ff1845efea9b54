"""The proxy shares in-flight GETs: real sockets, real curl, our VMC-aware client.

Joins are made deterministic by waiting until the first stream is live at a
given offset (polling the proxy's session table) before the next client starts.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from pathlib import Path

import pytest
from vmc_support import sessions

from vmc.aio import upstream as up
from vmc.aio.origin import expected
from vmc.client import fetch
from vmc.core import ranges

CURL_TIMEOUT = 60


def wait_live(st, path_prefix: str, min_bytes: int, timeout: float = 20.0) -> int:
    """Block until a live session for a URI containing ``path_prefix`` has >= min_bytes; its
    edge."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for s in sessions(st.proxy):
            if path_prefix in s.uri and s.live and s.buffer.received >= min_bytes:
                return s.buffer.received
        time.sleep(0.01)
    raise AssertionError(f"no live session for {path_prefix} reached {min_bytes} bytes")


def curl(st, path: str, out: Path, *extra: str, via_proxy_option: bool = False,
         headers: Path | None = None):
    """Start curl for ``path`` through the proxy (reverse-proxy form, or -x absolute form)."""
    argv = ["curl", "-sS", "-o", str(out), "-w", "%{http_code} %{size_download}", *extra]
    if headers is not None:
        argv += ["-D", str(headers)]
    if via_proxy_option:
        argv += ["-x", f"http://{st.proxy_addr}", st.url(path)]
    else:
        argv.append(st.reverse_url(path))
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def finish(p) -> tuple[int, int, int]:
    out, err = p.communicate(timeout=CURL_TIMEOUT)
    code, n = out.decode().split()
    return p.returncode, int(code), int(n)


def records(st, path: str) -> list[dict]:
    return [r for r in st.status()["recent"] if path in r["uri"]]


@pytest.mark.tool("curl")
def test_curl_late_joiners_share_one_origin_copy(make_stack, tmp_path: Path) -> None:
    st = make_stack(rate=1_000_000)
    size = 1_500_000
    path = f"/share.bin?size={size}"
    outs = [tmp_path / f"c{i}" for i in range(3)]
    procs = [curl(st, path, outs[0])]
    wait_live(st, "/share.bin", 200_000)
    procs.append(curl(st, path, outs[1]))
    wait_live(st, "/share.bin", 600_000)
    procs.append(curl(st, path, outs[2], via_proxy_option=True))  # absolute-form via -x
    results = [finish(p) for p in procs]
    assert results == [(0, 200, size)] * 3
    body = expected("/share.bin", size)
    assert all(o.read_bytes() == body for o in outs)
    assert st.origin.stats.per_path["/share.bin"] == size  # one copy from the origin
    snap = st.status()
    assert snap["origin_bytes"] == size and snap["client_bytes"] == 3 * size
    assert snap["sharing_ratio"] == pytest.approx(3.0)
    recs = records(st, "/share.bin")
    assert [r["mode"] for r in recs] == ["origin", "joined", "joined"]
    assert 0 < recs[1]["offset"] < recs[2]["offset"] < size
    assert all(r["completion"] is not None and r["ttfb"] is not None for r in recs)


async def _raw_get(addr: str, target: bytes, host: bytes, extra=(), upto: int = 1 << 40):
    """Response head and the first ``upto`` body bytes (then the connection is dropped)."""
    h, p = addr.split(":")
    resp = await up.request(h, int(p), b"GET", target, [(b"host", host), *extra])
    body = b""
    async for chunk in resp.chunks():
        body += chunk
        if len(body) >= upto:
            break
    resp.close()
    return resp, body


@pytest.mark.tool("curl")
def test_vmc_client_gets_206_from_live_edge_and_patches_prefix(make_stack, tmp_path: Path) -> None:
    st = make_stack(rate=1_000_000)
    size = 1_200_000
    path = f"/vmc.bin?size={size}"
    body = expected("/vmc.bin", size)
    first = curl(st, path, tmp_path / "first")
    wait_live(st, "/vmc.bin", 150_000)
    # What a VMC-aware client sees on the wire: 206 for a request without Range.
    resp, part = asyncio.run(_raw_get(st.proxy_addr, path.encode(), st.origin.authority.encode(),
                                      [(b"vmc", b"1")], 100_000))
    assert resp.status == 206
    cr = ranges.parse_content_range(resp.header(b"content-range"))
    assert cr.length == size and cr.last == size - 1 and 150_000 <= cr.first < size
    assert resp.header(b"content-length") == str(size - cr.first).encode()
    assert f"offset={cr.first}".encode() in resp.header(b"vmc")
    assert len(part) >= 100_000 and part == body[cr.first : cr.first + len(part)]
    # The client library does the whole dance and checks length and Repr-Digest.
    wait_live(st, "/vmc.bin", 400_000)
    res = asyncio.run(fetch(st.url(path), proxy=st.proxy_addr))
    assert res.status == 206 and res.body == body and res.digest_ok is True
    assert res.parts[0][2] == 206 and res.parts[0][0] > 0
    assert res.parts[1][:2] == (0, res.parts[0][0])
    assert finish(first) == (0, 200, size)
    assert st.origin.stats.per_path["/vmc.bin"] == size  # the window held the prefix
    modes = [r["mode"] for r in records(st, "/vmc.bin")]
    assert modes.count("joined-vmc") == 2 and modes.count("range") == 1
    dropped = [r for r in records(st, "/vmc.bin") if r["mode"] == "joined-vmc"][0]
    assert dropped["completion"] is None and dropped["error"].startswith("client gone")


@pytest.mark.tool("curl")
def test_range_requests_on_inflight_object(make_stack, tmp_path: Path) -> None:
    st = make_stack(rate=1_000_000)
    size = 1_000_000
    path = f"/rng.bin?size={size}"
    body = expected("/rng.bin", size)
    first = curl(st, path, tmp_path / "first")
    wait_live(st, "/rng.bin", 300_000)
    cases = [
        ("100-199", 206, body[100:200], f"bytes 100-199/{size}"),  # from the buffer
        # from the buffer, then live
        ("250000-800099", 206, body[250_000:800_100], f"bytes 250000-800099/{size}"),
        # a suffix, from the live stream
        ("-50", 206, body[-50:], f"bytes {size - 50}-{size - 1}/{size}"),
        ("10-19,20-29", 206, body[10:30], f"bytes 10-29/{size}"),  # adjacent: coalesced
        ("0-0,500-500", 206, None, None),  # two ranges: multipart/byteranges (checked below)
        (f"{size}-", 416, b"", f"bytes */{size}"),
    ]
    procs = []
    for i, (r, *_rest) in enumerate(cases):
        procs.append(curl(st, path, tmp_path / f"r{i}", "-r", r, headers=tmp_path / f"h{i}"))
    for i, (p, (r, status, want, content_range)) in enumerate(zip(procs, cases)):
        rc, code, n = finish(p)
        assert (rc, code) == (0, status), r
        hdrs = (tmp_path / f"h{i}").read_text().lower()
        got = (tmp_path / f"r{i}").read_bytes()
        if want is None:  # multipart/byteranges (RFC 9110 sec. 14.6)
            boundary = hdrs.split("boundary=", 1)[1].split()[0].encode()
            chunks = got.split(b"--" + boundary)
            assert chunks[0] == b"" and chunks[-1] == b"--\r\n" and len(chunks) == 4
            for (a, b), chunk in zip(((0, 0), (500, 500)), chunks[1:-1]):
                head, _, payload = chunk.partition(b"\r\n\r\n")
                assert f"content-range: bytes {a}-{b}/{size}".encode() in head.lower()
                assert payload.removesuffix(b"\r\n") == body[a : b + 1]
            continue
        assert got == want if status != 416 else True
        if content_range:
            assert f"content-range: {content_range}".lower() in hdrs, (r, hdrs)
        else:
            assert "content-range" not in hdrs
    assert finish(first) == (0, 200, size)
    assert st.origin.stats.per_path["/rng.bin"] == size
    assert st.origin.stats.range_requests == 0


@pytest.mark.tool("curl")
def test_small_window_patches_prefix_from_origin_by_range(make_stack, tmp_path: Path) -> None:
    st = make_stack(rate=1_000_000, window=64 << 10, disk_budget=0)  # the origin-Range path
    size = 1_000_000
    path = f"/win.bin?size={size}"
    first = curl(st, path, tmp_path / "a")
    wait_live(st, "/win.bin", 300_000)
    second = curl(st, path, tmp_path / "b")
    assert finish(first) == (0, 200, size)
    assert finish(second) == (0, 200, size)
    body = expected("/win.bin", size)
    assert (tmp_path / "a").read_bytes() == body and (tmp_path / "b").read_bytes() == body
    assert st.origin.stats.range_requests >= 1
    joiner = records(st, "/win.bin")[1]
    assert joiner["mode"] == "joined" and joiner["origin_bytes"] >= 300_000 - (64 << 10)
    assert st.status()["peak_buffer_bytes"] <= (64 << 10) + 65536


NEVER_SHARED = [
    ("authorization", "", [["-H", "Authorization: Basic eDp5"]] * 2),
    ("cookie", "", [["-H", "Cookie: a=b"]] * 2),
    ("no-store", "&cc=no-store", [[], []]),
    ("private", "&cc=private,max-age=60", [[], []]),
    ("unknown-length", "&chunked=1", [[], []]),
    ("set-cookie", "&cookie=1", [[], []]),
    ("vary", "&vary=Accept-Language",
     [["-H", "Accept-Language: en"], ["-H", "Accept-Language: fr"]]),
]


@pytest.mark.tool("curl")
@pytest.mark.parametrize("name, query, extras", NEVER_SHARED, ids=[c[0] for c in NEVER_SHARED])
def test_never_shared(make_stack, tmp_path: Path, name: str, query: str, extras) -> None:
    st = make_stack(rate=1_000_000)
    size = 400_000
    path = f"/ns-{name}.bin?size={size}{query}"
    first = curl(st, path, tmp_path / "a", *extras[0])
    deadline = time.monotonic() + 20
    while (st.origin.stats.per_path.get(f"/ns-{name}.bin", 0) < 50_000
           and time.monotonic() < deadline):
        time.sleep(0.01)  # the first response is flowing (it lasts ~0.4 s in all)
    second = curl(st, path, tmp_path / "b", *extras[1])
    assert finish(first) == (0, 200, size)
    assert finish(second) == (0, 200, size)
    body = expected(f"/ns-{name}.bin", size)
    assert (tmp_path / "a").read_bytes() == body == (tmp_path / "b").read_bytes()
    assert st.origin.stats.per_path[f"/ns-{name}.bin"] == 2 * size
    assert st.status()["joins"] == 0


@pytest.mark.tool("curl")
def test_vary_same_value_is_shared(make_stack, tmp_path: Path) -> None:
    """Positive control for the Vary case above: equal Accept-Language values do share."""
    st = make_stack(rate=1_000_000)
    size = 600_000
    path = f"/vary-same.bin?size={size}&vary=Accept-Language"
    first = curl(st, path, tmp_path / "a", "-H", "Accept-Language: en")
    wait_live(st, "/vary-same.bin", 100_000)
    second = curl(st, path, tmp_path / "b", "-H", "Accept-Language:   en")
    assert finish(first) == (0, 200, size) and finish(second) == (0, 200, size)
    assert st.origin.stats.per_path["/vary-same.bin"] == size


@pytest.mark.tool("curl")
def test_head_and_keepalive(make_stack, tmp_path: Path) -> None:
    st = make_stack(rate=1_000_000)
    size = 500_000
    path = f"/ka.bin?size={size}"
    first = curl(st, path, tmp_path / "a")
    wait_live(st, "/ka.bin", 50_000)
    head = subprocess.run(["curl", "-sS", "-I", st.reverse_url(path)], capture_output=True,
                          timeout=30)
    assert head.returncode == 0 and f"content-length: {size}".encode() in head.stdout.lower()
    assert finish(first) == (0, 200, size)
    # Two requests on one connection (keep-alive), both served.
    two = subprocess.run(
        ["curl", "-sS", "-o", "/dev/null", "-o", "/dev/null",
         "-w", "%{http_code} %{num_connects}\n",
         st.reverse_url("/k1?size=1000"), st.reverse_url("/k2?size=2000")],
        capture_output=True, timeout=30, text=True,
    )
    assert two.returncode == 0 and two.stdout.split("\n")[:2] == ["200 1", "200 0"]


@pytest.mark.tool("curl")
def test_weak_etag_prefix_out_of_window_is_fetched_alone(make_stack, tmp_path: Path) -> None:
    """No strong validator + prefix gone from the window: the joiner is not joined (a mixed body
    could not be proven consistent), it gets its own complete 200."""
    st = make_stack(rate=1_000_000, window=32 << 10, disk_budget=0)
    size = 600_000
    path = f"/weak.bin?size={size}&weak=1&nolm=1"
    first = curl(st, path, tmp_path / "a")
    wait_live(st, "/weak.bin", 200_000)
    second = curl(st, path, tmp_path / "b")
    assert finish(first) == (0, 200, size) and finish(second) == (0, 200, size)
    body = expected("/weak.bin", size)
    assert (tmp_path / "a").read_bytes() == body == (tmp_path / "b").read_bytes()
    snap = st.status()
    assert snap["not_shared"].get("prefix-unpatchable") == 1 and snap["joins"] == 0
    assert st.origin.stats.range_requests == 0


@pytest.mark.tool("curl")
@pytest.mark.parametrize("budget", [0, 4 << 20], ids=["chase", "parallel"])
def test_prefix_patch_modes(make_stack, tmp_path: Path, budget: int) -> None:
    """Prefix out of the window: chasing the live edge by Range costs about the rest of the object;
    taking the live stream at once (bounded queue) while patching costs only the prefix."""
    st = make_stack(rate=1_000_000, window=32 << 10, patch_budget=budget, disk_budget=0)
    # 3 s of stream, the second client 0.4 s in: it joins even when curl starts slowly under
    # load (with 1 MB, 0.6 s of stream was left; a client arriving after the end fetched on its
    # own, its record then carries no patch bytes: the flake once seen on the core, either engine)
    size = 3_000_000
    path = f"/pm.bin?size={size}"
    first = curl(st, path, tmp_path / "a")
    edge = wait_live(st, "/pm.bin", 400_000)
    second = curl(st, path, tmp_path / "b")
    assert finish(first) == (0, 200, size) and finish(second) == (0, 200, size)
    assert (tmp_path / "b").read_bytes() == expected("/pm.bin", size)
    joiner = records(st, "/pm.bin")[1]
    assert joiner["mode"] == "joined", "the second client came after the stream's end"
    if budget:
        assert joiner["origin_bytes"] <= edge + 200_000  # about the prefix
        assert st.status()["peak_queue_bytes"] <= budget + 65536
    else:
        # the chase ran far past the join point
        assert joiner["origin_bytes"] > edge + (size - edge) // 2
