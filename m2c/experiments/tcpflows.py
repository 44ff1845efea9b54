"""TCP helpers for the section 7 experiments: a file/stream server, a
downloader, and the sender-side TCP_INFO counters (retransmissions)."""

from __future__ import annotations

import asyncio
import socket
import struct
import time

from deliverykit.deadline import within

CHUNK = 64 * 1024


def tcp_info(sock: socket.socket) -> dict:
    """Linux struct tcp_info: total retransmissions and segments sent."""
    raw = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 256)
    out = {"total_retrans": 0, "segs_out": 0}
    if len(raw) >= 104:
        out["total_retrans"] = struct.unpack_from("I", raw, 100)[0]
    if len(raw) >= 140:
        out["segs_out"] = struct.unpack_from("I", raw, 136)[0]
    return out


async def serve(host: str, port: int, size: int | None, ready=None, stats: dict | None = None,
                connections: int = 1) -> dict:
    """Send ``size`` bytes (None: for ever) to each of ``connections`` clients."""
    done = asyncio.Event()
    served = 0
    payload = b"\xa5" * CHUNK
    result = stats if stats is not None else {}

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal served
        sock = writer.get_extra_info("socket")
        sent = 0
        try:
            while size is None or sent < size:
                n = CHUNK if size is None else min(CHUNK, size - sent)
                writer.write(payload[:n])
                await writer.drain()
                sent += n
            info = tcp_info(sock)
            result.setdefault("flows", []).append({"bytes": sent, **info})
        except ConnectionError:
            pass
        finally:
            writer.close()
            try:  # let the transport flush what drain() left buffered before we exit
                await writer.wait_closed()
            except ConnectionError:
                pass
            served += 1
            if served >= connections:
                done.set()

    server = await asyncio.start_server(handle, host, port)
    if ready is not None:
        ready.set()
    async with server:
        await done.wait()
    return result


async def download(host: str, port: int, size: int | None, duration: float | None = None) -> dict:
    """Read ``size`` bytes (or for ``duration`` s); returns time and bytes."""
    for _ in range(100):
        try:
            reader, writer = await asyncio.open_connection(host, port)
            break
        except OSError:
            await asyncio.sleep(0.05)
    else:
        raise ConnectionError(f"cannot connect to {host}:{port}")
    t0 = time.monotonic()
    got = 0
    try:
        while size is None or got < size:
            if duration is not None and time.monotonic() - t0 >= duration:
                break
            try:
                b = await within(reader.read(CHUNK), 1.0)
            except asyncio.TimeoutError:
                continue
            if not b:
                break
            got += len(b)
    finally:
        writer.close()
    return {"time": time.monotonic() - t0, "bytes": got}
