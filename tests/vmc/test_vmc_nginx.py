"""nginx as the origin (a real subprocess serving generated files) behind our proxy."""

from __future__ import annotations

import asyncio
import subprocess
import time
from pathlib import Path

import pytest
from test_vmc_proxy_sharing import wait_live  # noqa: E402  (same directory)

from vmc.aio.origin import body_slice
from vmc.client import fetch
from vmc.nginx import Nginx, write_object


@pytest.mark.tool("nginx")
@pytest.mark.tool("curl")
def test_nginx_origin_through_vmc(make_stack, tmp_path: Path) -> None:
    size = 3_000_000
    root = tmp_path / "www"
    write_object(root, "big.bin", size)
    want = body_slice("/big.bin", 0, size)
    with Nginx.origin(root, rate="1m") as ng:
        st = make_stack(upstreams=[ng.authority], default_upstream=ng.authority)
        url = f"http://{ng.authority}/big.bin"
        first = subprocess.Popen(["curl", "-sS", "-o", str(tmp_path / "a"),
                                  "-x", f"http://{st.proxy_addr}", url])
        wait_live(st, "/big.bin", 1_200_000)  # past nginx's first-second burst
        plain = subprocess.Popen(["curl", "-sS", "-o", str(tmp_path / "b"),
                                  st.reverse_url("/big.bin")])
        res = asyncio.run(fetch(url, proxy=st.proxy_addr))  # VMC-aware: 206 + prefix by Range
        assert first.wait(60) == 0 and plain.wait(60) == 0
        assert (tmp_path / "a").read_bytes() == want == (tmp_path / "b").read_bytes()
        assert res.status == 206 and res.body == want
        time.sleep(0.2)
        log = ng.access_log()
        # nginx saw one whole GET (200) and nothing else: the window held the prefix.
        assert len(log) == 1 and '"GET /big.bin HTTP/1.1" 200 3000000' in log[0], log
        snap = st.status()
        assert snap["origin_bytes"] == size and snap["client_bytes"] == 3 * size


@pytest.mark.tool("nginx")
def test_nginx_origin_serves_range_patches(make_stack, tmp_path: Path) -> None:
    """With a tiny window and no disk store the prefix comes from nginx by Range + If-Range
    (its ETag is strong)."""
    size = 2_000_000
    root = tmp_path / "www"
    write_object(root, "p.bin", size)
    want = body_slice("/p.bin", 0, size)
    with Nginx.origin(root, rate="1m") as ng:
        st = make_stack(upstreams=[ng.authority], default_upstream=ng.authority, window=32 << 10,
                        disk_budget=0)
        url = f"http://{ng.authority}/p.bin"

        async def both():
            first = asyncio.create_task(fetch(url, proxy=st.proxy_addr, vmc=False))
            await asyncio.to_thread(wait_live, st, "/p.bin", 1_100_000)
            second = await fetch(url, proxy=st.proxy_addr, vmc=False)
            return await first, second

        r1, r2 = asyncio.run(both())
        assert r1.body == want and r2.body == want
        time.sleep(0.2)
        assert any('" 206 ' in line for line in ng.access_log()), ng.access_log()


@pytest.mark.tool("nginx")
def test_nginx_origin_sends_one_copy_with_the_disk_store(make_stack, tmp_path: Path) -> None:
    """Issue 19: the same late joiner past a tiny window, default disk store: its prefix is read
    from disk, and nginx's own log shows one whole GET and no Range request."""
    size = 2_000_000
    root = tmp_path / "www"
    write_object(root, "s.bin", size)
    want = body_slice("/s.bin", 0, size)
    with Nginx.origin(root, rate="1m") as ng:
        st = make_stack(upstreams=[ng.authority], default_upstream=ng.authority, window=32 << 10)
        url = f"http://{ng.authority}/s.bin"

        async def both():
            first = asyncio.create_task(fetch(url, proxy=st.proxy_addr, vmc=False))
            await asyncio.to_thread(wait_live, st, "/s.bin", 1_100_000)
            second = await fetch(url, proxy=st.proxy_addr, vmc=False)
            return await first, second

        r1, r2 = asyncio.run(both())
        assert r1.body == want and r2.body == want
        time.sleep(0.2)
        log = ng.access_log()
        assert len(log) == 1 and '"GET /s.bin HTTP/1.1" 200 2000000' in log[0], log
        disk = st.status()["disk"]
        # from the disk store by read or, for spans of 1 MiB or more, by sendfile
        assert disk["read_bytes"] + disk["sendfile_bytes"] >= 1_000_000, disk
