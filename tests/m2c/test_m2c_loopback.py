"""End to end over real UDP multicast on loopback (no root): sender, receivers,
foreign/corrupt packets, the CLI as subprocesses, and the demo."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import socket
import subprocess
import sys

import pytest

from m2c.aio.driver import MulticastReceiver, MulticastSender, make_session
from m2c.core.description import FecScheme
from m2c.wire import codec


def fresh_net() -> tuple[str, int]:
    third = 1 + secrets.randbelow(250)
    return f"239.194.{third}.1", 30000 + 100 * secrets.randbelow(300)


async def transfer(path, d, fec="ldpc", controllers=("m2c", "webrc"), inject=None, **kw):
    group, port = fresh_net()
    sd = make_session(path, group=group, port=port, min_rate=30.0, max_rate=3000.0, tsd=0.5,
                      k=2, fec=fec, **kw)
    stop = asyncio.Event()
    snd = asyncio.create_task(MulticastSender(sd, path).send(duration=25, stop=stop))
    tasks = [MulticastReceiver(sd, os.path.join(d, f"out{i}"), controller=c).receive(timeout=20)
             for i, c in enumerate(controllers)]
    if inject is not None:
        tasks.append(inject(sd))
    res = await asyncio.gather(*tasks)
    stop.set()
    sent = await snd
    return sd, res, sent


def make_file(tmp_path, size):
    p = tmp_path / "src.bin"
    p.write_bytes(os.urandom(size))
    return str(p)


async def test_two_receivers_ldpc(tmp_path):
    src = make_file(tmp_path, 900_000)
    sd, res, sent = await transfer(src, str(tmp_path))
    data = open(src, "rb").read()
    for i, r in enumerate(res):
        assert r.ok and r.complete
        assert (tmp_path / f"out{i}").read_bytes() == data
        m = r.metrics
        assert m.time > 0 and m.gput > 0 and m.sym >= 0 and m.dup >= 0
        assert m.net > m.head > 0
        assert r.joins > 3 and r.leaves == r.joins  # every group left at the end
    assert sent.packets > 0


async def test_reed_solomon_small_blocks(tmp_path):
    src = make_file(tmp_path, 300_001)
    sd, res, _ = await transfer(src, str(tmp_path), fec="rs", controllers=("m2c",))
    assert res[0].ok
    assert sd.fec.scheme is FecScheme.RS and sd.partition().blocks > 1
    assert (tmp_path / "out0").read_bytes() == open(src, "rb").read()


async def test_foreign_and_corrupt_packets_are_rejected(tmp_path):
    src = make_file(tmp_path, 400_000)

    async def inject(sd):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton("127.0.0.1"))
        g, port = sd.groups[0]
        foreign = codec.AlcPacket((sd.session + 1) & 0xFFFFFFFF, 1, 3, 0, 0, 5, 0, 0, 0, 1,
                                  b"\0" * sd.fec.symbol_size)
        good = bytearray(codec.encode(codec.AlcPacket(sd.session, 1, 3, 0, 0, 7, 0, 0, 0, 2,
                                                      b"\x55" * sd.fec.symbol_size)))
        good[-1] ^= 1  # corrupt the symbol: the CRC catches it
        try:
            for _ in range(40):
                s.sendto(codec.encode(foreign), (g, port))
                s.sendto(bytes(good), (g, port))
                s.sendto(b"garbage" * 10, (g, port))
                await asyncio.sleep(0.02)
        finally:
            s.close()
        return None

    sd, res, _ = await transfer(src, str(tmp_path), controllers=("m2c",), inject=inject)
    r = res[0]
    assert r.ok
    assert r.rejected >= 30  # foreign session, bad CRC, garbage: never decoded
    assert (tmp_path / "out0").read_bytes() == open(src, "rb").read()


def test_cli_send_and_receive_subprocesses(tmp_path):
    src = make_file(tmp_path, 500_000)
    sdp = tmp_path / "s.json"
    out = tmp_path / "out.bin"
    group, port = fresh_net()
    env = dict(os.environ)
    snd = subprocess.Popen(
        [sys.executable, "-m", "m2c", "send", src, "--sdp", str(sdp), "--group", group,
         "--port", str(port), "--min-rate", "400", "--max-rate", "30000", "--tsd", "0.5",
         "--duration", "30"], stderr=subprocess.PIPE, env=env)
    try:
        for _ in range(100):
            if sdp.exists() and sdp.stat().st_size > 0:
                break
            if snd.poll() is not None:
                raise AssertionError(snd.stderr.read().decode())
            subprocess.run(["sleep", "0.1"], check=True)
        r = subprocess.run([sys.executable, "-m", "m2c", "receive", str(sdp), "-o", str(out),
                            "-q", "--timeout", "25"], capture_output=True, text=True, timeout=40)
        assert r.returncode == 0, r.stderr
        res = json.loads(r.stdout)
        assert res["ok"] and set(res["metrics"]) >= {"time", "gput", "tput", "loss", "dup",
                                                     "sym", "head", "net", "comp"}
        assert out.read_bytes() == open(src, "rb").read()
    finally:
        snd.terminate()
        snd.wait(timeout=10)
        snd.stderr.close()


def test_receive_with_bad_sdp_fails_cleanly(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    r = subprocess.run([sys.executable, "-m", "m2c", "receive", str(bad), "-o",
                        str(tmp_path / "x")], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "session description" in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.slow
def test_demo_rows():
    from m2c.demo import run

    rows = run(quick=True)
    assert len(rows) == 3 and all(r["ok"] for r in rows)
    assert all(r["system"] == "m2c" for r in rows)


async def test_session_description_over_http(tmp_path):
    from m2c.cli import _serve_sdp, load_sdp

    src = make_file(tmp_path, 1000)
    group, port = fresh_net()
    sd = make_session(src, group=group, port=port)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        http_port = probe.getsockname()[1]
    server = await _serve_sdp(sd.to_json(), "127.0.0.1", http_port)
    try:
        got = await asyncio.to_thread(load_sdp, f"http://127.0.0.1:{http_port}/")
    finally:
        server.close()
        await server.wait_closed()
    assert got == sd and got.rates == sd.rates and got.groups == sd.groups


async def test_tiny_file_no_false_losses(tmp_path):
    """A file smaller than one buffer: empty slots go out as data-less packets,
    so the receivers' PSN accounting sees no loss."""
    src = make_file(tmp_path, 3000)
    sd, res, _ = await transfer(src, str(tmp_path), controllers=("m2c",))
    assert res[0].ok and res[0].metrics.loss == 0.0
    empty = tmp_path / "empty.bin"
    empty.write_bytes(b"")
    sd, res, _ = await transfer(str(empty), str(tmp_path), controllers=("m2c",))
    assert res[0].ok


async def test_sequencer_api_over_multicast_receivers_get_prefixes():
    """Paper 4-5 over real sockets: buffers sent with send(buffer, buffer_time); an
    unconstrained receiver ends up with whole buffers, one capped at ~30 % of the
    top rate gets ~ the first part of each buffer, as a contiguous prefix."""
    from m2c.aio.stream import StreamReceiver, StreamSender
    from m2c.core.groups import WaveSchedule

    group, port = fresh_net()
    s = WaveSchedule(30.0, 1500.0, tsd=0.5, k=2)
    a, b, c, d = (int(x) for x in group.split("."))
    groups = [(f"{a}.{b}.{c}.{d + i}", port + i) for i in range(s.channels + 1)]
    got: dict[str, list] = {"full": [], "capped": []}
    rx_full = StreamReceiver(s, groups, 77, got["full"].append)
    rx_cap = StreamReceiver(s, groups, 77, got["capped"].append, max_rate=0.3 * s.max_rate)
    tx = StreamSender(s, groups, 77, pdu_size=100)
    rx_full.start()
    rx_cap.start()
    try:
        for i in range(14):
            cap = tx.seq.capacity(0.5) if tx.seq else Sequencer_capacity(s, 0.5)
            buf = bytes([i]) * (cap * 100)
            await tx.send(buf, 0.5)
    finally:
        tx.close()
        await asyncio.sleep(0.1)
        rx_full.close()
        rx_cap.close()
    full = [r for r in got["full"] if r.buffer_id >= 8]
    capped = [r for r in got["capped"] if r.buffer_id >= 8]
    assert full and capped
    for r in full:
        total = sum(len(p) for _, p in r.parts)
        assert len(r.prefix) >= 0.9 * total > 0
    shares = []
    for r in capped:
        total = sum(len(p) for _, p in r.parts)
        assert total > 0 and len(r.prefix) >= 0.6 * total  # mostly contiguous from 0
        shares.append(total)
    full_size = max(sum(len(p) for _, p in r.parts) for r in full)
    assert sum(shares) / len(shares) < 0.6 * full_size  # the capped one got a part only


def Sequencer_capacity(s, bt):
    from m2c.core.sequencer import Sequencer

    return Sequencer(s, 100).capacity(bt)
