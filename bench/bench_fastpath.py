"""Foundation fast paths: XOR throughput, and UDP receive rates per event-loop strategy.

Measured here: one sender process floods loopback with sendmmsg while each
receiver strategy counts what it gets in a fixed window; the strategies repeat
interleaved, so the ratios between them are comparable even though absolute
rates swing 2-3x between runs on a shared VM.  Reference figures (the field
notes, through a relay between namespaces on these machines): stdlib asyncio
datagram transport ~22k pkt/s, uvloop ~124k, blocking Python loop ~138k, C
recvmmsg/sendmmsg ~180-270k at 1,200-byte packets; printed as references.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import os
import socket
import time
from collections.abc import Callable
from functools import partial

from bench.harness import Figure, Reference, interleaved, measured, referenced
from deliverykit import fastpath
from deliverykit.aio import BatchedUDPEndpoint, make_udp_socket

PKT = 1200


def _sender(addr, seconds, stop_evt):
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    batch = [(bytes(PKT), addr)] * 64
    send = fastpath.speedups.send_batch if fastpath.speedups else fastpath.py_send_batch
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not stop_evt.is_set():
        try:
            send(sock, batch)
        except OSError:
            pass
    sock.close()


def _flood(addr, seconds):
    stop = mp.Event()
    p = mp.Process(target=_sender, args=(addr, seconds + 0.5, stop), daemon=True)
    p.start()
    return p, stop


def _finish(p, stop):
    stop.set()
    p.join(5)
    if p.is_alive():
        p.kill()
        p.join()


def rx_blocking(seconds):
    sock = make_udp_socket(("127.0.0.1", 0))
    sock.setblocking(True)
    sock.settimeout(0.2)
    p, stop = _flood(sock.getsockname(), seconds)
    buf = bytearray(2048)
    n = 0
    try:
        sock.recv_into(buf)  # wait for the flood to start
        t0 = time.monotonic()
        end = t0 + seconds
        while time.monotonic() < end:
            for _ in range(64):
                sock.recv_into(buf)
                n += 1
        return n / (time.monotonic() - t0)
    finally:
        _finish(p, stop)
        sock.close()


def rx_asyncio(seconds, use_uvloop):
    class Counter(asyncio.DatagramProtocol):
        n = 0

        def datagram_received(self, data, addr):
            self.n += 1

    async def main():
        loop = asyncio.get_running_loop()
        sock = make_udp_socket(("127.0.0.1", 0))
        transport, proto = await loop.create_datagram_endpoint(Counter, sock=sock)
        p, stop = _flood(sock.getsockname(), seconds)
        try:
            while proto.n == 0:
                await asyncio.sleep(0.01)
            n0, t0 = proto.n, loop.time()
            await asyncio.sleep(seconds)
            return (proto.n - n0) / (loop.time() - t0)
        finally:
            _finish(p, stop)
            transport.close()

    if use_uvloop:
        import uvloop

        return uvloop.run(main())
    return asyncio.run(main())


def rx_batched(seconds, pure):
    async def main():
        counter = [0]
        sock = make_udp_socket(("127.0.0.1", 0))
        ep = BatchedUDPEndpoint(sock, lambda b, now: counter.__setitem__(0, counter[0] + len(b)))
        if pure:  # swap in the twin for this endpoint only
            import deliverykit.aio as aio_mod

            saved = aio_mod.recv_batch
            aio_mod.recv_batch = fastpath.py_recv_batch
        p, stop = _flood(sock.getsockname(), seconds)
        loop = asyncio.get_running_loop()
        try:
            while counter[0] == 0:
                await asyncio.sleep(0.01)
            n0, t0 = counter[0], loop.time()
            await asyncio.sleep(seconds)
            return (counter[0] - n0) / (loop.time() - t0)
        finally:
            _finish(p, stop)
            ep.close()
            if pure:
                aio_mod.recv_batch = saved

    return asyncio.run(main())


def xor_rate(fn, size, reps):
    dst, src = bytearray(os.urandom(size)), os.urandom(size)
    t0 = time.perf_counter()
    for _ in range(reps):
        fn(dst, src)
    return size * reps / (time.perf_counter() - t0) / 1e6


FIELD_NOTES = ("field notes (shared design notes): 1,200-byte UDP packets between namespaces "
               "through a relay on this VM; {what}; they swing 2-3x between runs")
REFERENCES = {
    "stdlib asyncio transport": Reference(
        22_000, "pkt/s", FIELD_NOTES.format(what="stdlib asyncio ~22k")
    ),
    "uvloop transport": Reference(
        124_000, "pkt/s", FIELD_NOTES.format(what="asyncio on uvloop ~124k")
    ),
    "blocking recv_into loop": Reference(
        138_000, "pkt/s", FIELD_NOTES.format(what="blocking Python recv_into/send loop ~138k")
    ),
    "BatchedUDPEndpoint recvmmsg (C)": Reference(
        180_000,
        "pkt/s",
        FIELD_NOTES.format(what="C recvmmsg/sendmmsg relay 180-270k (bottom of the range)"),
    ),
}


def run(quick: bool) -> dict:
    secs = 0.3 if quick else 2.0
    repeats = 2 if quick else 3
    xor_subjects: dict[str, Callable[[], float]] = {
        "xor_into 64 KiB (twin)": partial(
            xor_rate, fastpath.py_xor_into, 1 << 16, 50 if quick else 2000
        )
    }
    if fastpath.speedups:
        xor_subjects["xor_into 64 KiB (C)"] = partial(
            xor_rate, fastpath.speedups.xor_into, 1 << 16, 200 if quick else 20000)
    rx_subjects: dict[str, Callable[[], float]] = {
        "stdlib asyncio transport": partial(rx_asyncio, secs, False),
        "uvloop transport": partial(rx_asyncio, secs, True),
        "blocking recv_into loop": partial(rx_blocking, secs),
        "BatchedUDPEndpoint twin": partial(rx_batched, secs, True),
        "BatchedUDPEndpoint recvmmsg (C)": partial(rx_batched, secs, False),
    }
    xor = interleaved(xor_subjects, repeats)
    rx = interleaved(rx_subjects, repeats)
    rows: list[dict] = [{"subject": k, "MB/s": Figure.of(v)} for k, v in xor.items()]
    rows += [{"subject": f"UDP rx 1200 B: {k}", "pkt/s": Figure.of(v)} for k, v in rx.items()]
    comps = []
    if "xor_into 64 KiB (C)" in xor:
        comps.append(
            measured(
                "xor C / twin",
                xor["xor_into 64 KiB (C)"],
                xor["xor_into 64 KiB (twin)"],
                anchor="xor_into 64 KiB (twin)",
                unit="MB/s",
            )
        )
    batched = rx["BatchedUDPEndpoint recvmmsg (C)"]
    for base in ("stdlib asyncio transport", "uvloop transport"):
        comps.append(measured(f"batched C / {base}", batched, rx[base],
                              anchor=f"UDP rx 1200 B: {base}", unit="pkt/s"))
    for name, ref in REFERENCES.items():
        comps.append(referenced(f"{name} here / field notes", rx[name], ref,
                                anchor=f"{name} (field notes)"))
    return {
        "title": "Foundation fast paths (XOR, UDP receive strategies)",
        "rows": rows,
        "comparisons": comps,
        "repeats": repeats,
        "notes": ["receiver-limited rates on loopback: the sender floods with sendmmsg from "
                  "another process (the field notes' figures were through a relay between "
                  "namespaces: a yardstick, not the same setup)",
                  "2 cores: sender and receiver share the machine; figures swing between runs"],
    }
