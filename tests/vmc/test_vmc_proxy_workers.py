"""What one proxy worker does per request, on real loopback sockets (issue 17, request rate).

The profile of the proxy under wrk at 1 KiB objects put most of its time in socket writes: a
response head and its body left in separate send() calls (two segments, two wake-ups of the
client). A small response must leave in one segment.
"""

from __future__ import annotations

import socket
import struct
import urllib.request

from vmc_support import engine_args

#: struct tcp_info (linux/tcp.h): tcpi_data_segs_in is the u32 at byte 156 (Linux >= 4.6).
_DATA_SEGS_IN = 156


def _data_segments_in(sock: socket.socket) -> int:
    info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 256)
    assert len(info) >= _DATA_SEGS_IN + 4, "kernel's tcp_info lacks tcpi_data_segs_in"
    return struct.unpack_from("I", info, _DATA_SEGS_IN)[0]


def _get_raw(addr: tuple[str, int], path: str) -> tuple[bytes, int]:
    """One GET with Connection: close; the whole reply and the data segments it came in."""
    with socket.create_connection(addr, timeout=10) as s:
        s.sendall(b"GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % path.encode())
        out = b""
        while chunk := s.recv(65536):
            out += chunk
        return out, _data_segments_in(s)


def test_small_response_leaves_in_one_segment(make_stack) -> None:
    st = make_stack()
    path = "/small.bin?size=1024"
    with urllib.request.urlopen(st.reverse_url(path), timeout=10) as r:  # the object is in
        assert len(r.read()) == 1024
    for _ in range(3):
        reply, segments = _get_raw(st.proxy.address, path)
        head, _, body = reply.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200") and len(body) == 1024
        assert segments == 1, f"head and body of a 1 KiB response came in {segments} segments"


def test_small_response_is_one_write(make_stack, monkeypatch) -> None:
    """Head and body in one send(): the kernel may merge two sends into one segment (as above),
    but each send() is a system call that also runs the loopback receiver; the writes are counted
    by a wrapper that passes every byte on to the real StreamWriter."""
    import asyncio

    st = make_stack()
    path = "/small1.bin?size=1024"
    with urllib.request.urlopen(st.reverse_url(path), timeout=10) as r:
        assert len(r.read()) == 1024
    writes: list[int] = []
    # the pump (a Protocol) writes to its transport
    cls = asyncio.selector_events._SelectorSocketTransport  # type: ignore[attr-defined]  # private
    real = cls.write

    def counted(self: object, data: bytes | bytearray | memoryview) -> None:
        writes.append(len(data))
        real(self, data)

    monkeypatch.setattr(cls, "write", counted)
    reply, _ = _get_raw(st.proxy.address, path)
    assert reply.startswith(b"HTTP/1.1 200") and reply.endswith(b"\r\n\r\n" + reply[-1024:])
    assert len(writes) == 1 and writes[0] == len(reply), f"writes: {writes}"


def test_workers_share_one_address_and_sum_their_counters() -> None:
    """``vmc proxy --workers 2``: both processes answer on one port (SO_REUSEPORT), each with its
    own state; SIGTERM stops all with 143 and one JSON line of summed counters."""
    import json
    import re
    import signal
    import subprocess
    import sys

    py = [sys.executable, "-m", "vmc"]
    origin = subprocess.Popen(py + ["origin", "--listen", "127.0.0.1:0"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    proxy = None
    try:
        assert origin.stdout is not None
        o = re.search(r"http://([0-9.]+:\d+)/", origin.stdout.readline())
        assert o, "origin did not start"
        proxy = subprocess.Popen(py + ["proxy", *engine_args(), "--listen", "127.0.0.1:0",
                                       "--upstream", o.group(1),
                                       "--default", o.group(1), "--workers", "2"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert proxy.stdout is not None
        first = proxy.stdout.readline()
        m = re.search(r"http://([0-9.]+):(\d+)/ \(2 workers", first)
        assert m, first
        addr = (m.group(1), int(m.group(2)))
        pids = set()
        for i in range(40):  # each on a new connection: a new 4-tuple for the kernel to hash
            reply, _ = _get_raw(addr, f"/w{i % 4}.bin?size=2048")
            assert reply.startswith(b"HTTP/1.1 200") and reply.endswith(b"\r\n\r\n" + reply[-2048:])
            with urllib.request.urlopen(f"http://{addr[0]}:{addr[1]}/_vmc/status",
                                        timeout=10) as r:
                pids.add(json.loads(r.read())["pid"])
        assert len(pids) == 2, f"one worker answered everything: {pids}"
        proxy.send_signal(signal.SIGTERM)
        out, err = proxy.communicate(timeout=60)
        assert proxy.returncode == 143, err
        final = json.loads(out.strip().splitlines()[-1])
        assert sorted(final["pid"]) == sorted(pids)
        assert final["requests"] == sum(w["requests"] for w in final["workers"]) >= 40
        assert "Traceback" not in err
    finally:
        for p in (proxy, origin):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait(10)
            if p is not None and p.stdout:
                p.stdout.close()
