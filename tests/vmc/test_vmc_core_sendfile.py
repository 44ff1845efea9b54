"""Disk spans the core leaves to the driver (issue 17: zero copy for large bodies; the old proxy's
rule): with ``MachineConfig.sendfile_min`` set, a span of at least that many bytes already on
the disk copy leaves as one ``FileWrite`` (at most ``sendfile_span``) framed by h11 without the
core reading it; smaller spans and the window go as bytes; off (0, the simulator's), nothing
changes. The body a client gets, spans read back from the copy, is the origin's byte for byte."""

from __future__ import annotations

from deliverykit.protocol import StreamWrite
from vmc.core.events import Fetch, OriginData, OriginEnd, OriginHead
from vmc.core.http import FileWrite, HttpSharingCore
from vmc.core.machine import MachineConfig

BODY = bytes(range(256)) * 40  # 10,240 bytes


def _core(sendfile_min: int) -> HttpSharingCore:
    cfg = MachineConfig(window=1000, disk_budget=1 << 20, send_window=4096,
                        sendfile_min=sendfile_min, sendfile_span=3000)
    return HttpSharingCore(cfg, upstreams=["o:80"])


def _get(core: HttpSharingCore, conn: int, now: float) -> list[object]:
    core.connection_made(conn, now)
    core.data_received(conn, b"GET http://o/obj HTTP/1.1\r\nhost: o\r\n\r\n", now)
    return list(core.to_send(now))


def _fetched_once(core: HttpSharingCore) -> None:
    """Client 1 gets the object from the origin, whole, so it is kept on disk."""
    (f,) = [o for o in _get(core, 1, 0.0) if isinstance(o, Fetch)]
    core.origin_received(OriginHead(f.fetch, 200, ((b"content-length", b"%d" % len(BODY)),)), 0.1)
    for i in range(0, len(BODY), 1000):
        core.origin_received(OriginData(f.fetch, BODY[i:i + 1000]), 0.1)
        core.writable(1, 1000, 0.1)
    core.origin_received(OriginEnd(f.fetch), 0.2)
    core.to_send(0.2)
    core.writable(1, 1 << 20, 0.2)
    core.to_send(0.2)


def _drain(core: HttpSharingCore, conn: int, out: list[object]) -> tuple[bytes, list[FileWrite]]:
    """What ``conn`` receives, the file spans read back from their copy, taking every byte."""
    got, spans = b"", []
    for _ in range(100):  # bounded: 10 KiB in spans of >= 1 byte per round
        for o in out:
            if isinstance(o, StreamWrite) and o.conn == conn:
                got += o.data
                core.writable(conn, len(o.data), 1.0)
            elif isinstance(o, FileWrite) and o.conn == conn:
                spans.append(o)
                end = o.first + o.count
                got += o.copy.read(o.first, end)  # type: ignore[attr-defined]  # a file copy
                core.writable(conn, o.count, 1.0)
        out = list(core.to_send(1.0))
        if not out:
            break
    return got, spans


def test_a_disk_span_leaves_as_file_writes_and_arrives_whole() -> None:
    core = _core(sendfile_min=2000)
    _fetched_once(core)
    got, spans = _drain(core, 2, _get(core, 2, 1.0))
    head, _, body = got.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200") and body == BODY
    assert spans and all(2000 <= s.count <= 3000 for s in spans), spans
    assert sum(s.count for s in spans) >= len(BODY) - 2000  # all but a tail under the minimum
    assert [s.first for s in spans] == sorted(s.first for s in spans)


def test_off_by_default_every_byte_goes_as_bytes() -> None:
    core = _core(sendfile_min=0)
    _fetched_once(core)
    out = _get(core, 2, 1.0)
    got, spans = _drain(core, 2, out)
    assert got.partition(b"\r\n\r\n")[2] == BODY and spans == []

