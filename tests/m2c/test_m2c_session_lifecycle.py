"""A session's life: closing it, the sender's source address, the idle timeout at a
slow base rate, data packets that carry A = 1.

- A sender started with ``--no-close`` stops (SIGTERM) without closing the
  session, so a ``--resume``d sender serves the receiver still running; without
  it, stopping closes the session (test_m2c_session_cli covers that).
- ``m2c send --interface 0.0.0.0`` is refused: receivers would drop every datagram
  (the source address in the description would never match, RFC 5775 4.4).
- The no-packet timeout covers the base group's packet interval (4 / min_rate).
- Data packets with A = 1 (RFC 5651 5.1: a sender may set A on its last packets)
  are decoded, not thrown away.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest
from m2c_support import as_foreground, fresh_net, reap, wait_for

from m2c import MulticastReceiver, MulticastSender, make_session
from m2c.aio.driver import ReceiveResult, SendResult
from m2c.core.filetx import FileSender, SessionDescription
from m2c.wire import codec


def net() -> tuple[str, str]:
    return fresh_net(191)



@pytest.mark.slow
@pytest.mark.parametrize("sig,status", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_no_close_sender_stopped_by_sigterm_can_be_resumed(tmp_path, sig, status):
    """SIGTERM, and Ctrl-C (SIGINT), of a --no-close sender leave the session open."""
    src = tmp_path / "r.bin"
    src.write_bytes(os.urandom(1_000_000))
    sdp = tmp_path / "r.json"
    group, port = net()
    send = [sys.executable, "-m", "m2c", "send", str(src), "--sdp", str(sdp), "--resume",
            "--duration", "60"]
    first = subprocess.Popen([*send, "--no-close", "--group", group, "--port", port,
                              "--min-rate", "100", "--max-rate", "1500"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                             preexec_fn=as_foreground)  # so SIGINT acts as a Ctrl-C
    second = rx = None
    try:
        wait_for(sdp)
        rx = subprocess.Popen([sys.executable, "-m", "m2c", "receive", str(sdp), "-o",
                               str(tmp_path / "out"), "-q", "--timeout", "60"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(2.5)  # about a third of the transfer
        assert rx.poll() is None, "the transfer ended before the sender was stopped"
        first.send_signal(sig)
        assert first.wait(10) == status
        assert "not closed" in first.stderr.read()
        time.sleep(0.5)
        second = subprocess.Popen(send, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        out, err = rx.communicate(timeout=70)
    finally:
        reap(first, second, rx)
    assert rx.returncode == 0, err
    assert (tmp_path / "out").read_bytes() == src.read_bytes()
    assert json.loads(out)["closed"] is False


async def _run_pair(sd, src: str, out: str, close: bool,
                    duration: float) -> tuple[ReceiveResult, SendResult]:
    rx = MulticastReceiver(sd, out, idle_timeout=3.0)
    t = asyncio.create_task(rx.receive(timeout=20))
    await asyncio.sleep(0.2)
    sent = await MulticastSender(sd, src, close=close).send(duration=duration)
    return await t, sent


@pytest.mark.parametrize("close", [True, False])
def test_duration_closes_unless_no_close(tmp_path, close):
    src = tmp_path / "f.bin"
    src.write_bytes(os.urandom(3_000_000))
    group, port = net()
    sd = make_session(str(src), group=group, port=int(port), min_rate=100, max_rate=300)
    res, sent = asyncio.run(_run_pair(sd, str(src), str(tmp_path / "o"), close, 1.0))
    assert isinstance(res, ReceiveResult) and isinstance(sent, SendResult)  # typed results
    assert sent.closed is close and sent.packets > 0 and not sent.stopped
    assert not res.ok and not res.complete and res.packets > 0
    assert res.closed is close
    assert res.end is not None
    if close:
        assert "closed the session" in res.end
    else:  # the sender only went quiet: the no-packet timeout ends it
        assert "no packet from the sender" in res.end
    assert res.metrics.raw["packets"] > 0 and res.metrics.gput is None


def test_send_refuses_the_unspecified_interface(tmp_path):
    src = tmp_path / "f.bin"
    src.write_bytes(os.urandom(1000))
    sdp = tmp_path / "s.json"
    r = subprocess.run([sys.executable, "-m", "m2c", "send", str(src), "--interface", "0.0.0.0",
                        "--sdp", str(sdp), "--duration", "1"], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 2, r.stderr
    assert "0.0.0.0" in r.stderr and "Traceback" not in r.stderr
    assert not sdp.exists()


def test_unspecified_source_is_not_a_valid_description(tmp_path):
    src = tmp_path / "f.bin"
    src.write_bytes(os.urandom(1000))
    sd = make_session(str(src))
    d = json.loads(sd.to_json())
    d["source"] = "0.0.0.0"
    with pytest.raises(ValueError, match="source"):
        SessionDescription.from_json(json.dumps(d))
    with pytest.raises(ValueError, match="0.0.0.0"):
        make_session(str(src), interface="0.0.0.0")


def test_idle_timeout_covers_a_slow_base_group(tmp_path):
    src = tmp_path / "f.bin"
    src.write_bytes(os.urandom(20_000))
    slow = make_session(str(src), min_rate=0.08, max_rate=8.0, tsd=1.0, k=1)
    assert MulticastReceiver(slow, str(tmp_path / "o")).idle_timeout >= 4 / 0.08
    usual = make_session(str(src), min_rate=20, max_rate=2000, tsd=1.0)
    assert MulticastReceiver(usual, str(tmp_path / "o")).idle_timeout == 10.0


async def _send_closing_data(sd, src: str, out: str) -> ReceiveResult:
    """Every base-group data packet carries A = 1, sent at its due time."""
    rx = MulticastReceiver(sd, out, idle_timeout=3.0)
    t = asyncio.create_task(rx.receive(timeout=15))
    await asyncio.sleep(0.2)
    core = FileSender(sd, lambda off, n: open(src, "rb").read()[off:off + n])
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton("127.0.0.1"))
    addr = (sd.groups[0][0], int(sd.groups[0][1]))
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    sent = 0
    try:
        while not t.done() and sent < 400:
            for pdu, pkt in core.next_pdus():
                if pdu.g != 0:
                    continue
                await asyncio.sleep(max(0.0, pdu.due - (loop.time() - t0)))
                if t.done():
                    break
                sock.sendto(codec.encode(dataclasses.replace(pkt, close_session=True)), addr)
                sent += 1
    finally:
        sock.close()
    return await t


def test_data_packets_with_close_flag_are_decoded(tmp_path):
    src = tmp_path / "f.bin"
    src.write_bytes(os.urandom(14_000))  # 10 symbols: decoded well within the grace
    group, port = net()
    sd = make_session(str(src), group=group, port=int(port), min_rate=400, max_rate=1200, k=1)
    res = asyncio.run(_send_closing_data(sd, str(src), str(tmp_path / "o")))
    assert res.closed
    assert res.ok, res.end
    assert (tmp_path / "o").read_bytes() == src.read_bytes()


@pytest.mark.parametrize("fec,header", [("ldpc", 44), ("rs", 48)])
def test_send_rates_count_the_codepoints_header(tmp_path, fec, header):
    """kbit/s at the IP level: the symbol, the ALC header of the chosen FEC scheme
    (LDPC 44 bytes, Reed-Solomon 48: its FEC Payload ID is longer) and IPv4 + UDP."""
    src = tmp_path / "f.bin"
    src.write_bytes(os.urandom(5000))
    sdp = tmp_path / "s.json"
    group, port = net()
    r = subprocess.run([sys.executable, "-m", "m2c", "send", str(src), "--fec", fec, "--sdp",
                        str(sdp), "--group", group, "--port", port, "--min-rate", "100",
                        "--max-rate", "1000", "--duration", "0.1"], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    sd = SessionDescription.from_json(sdp.read_text())
    assert codec.header_length(sd.codepoint) == header
    size = 1400 + header + 28
    assert sd.rates.min_rate == pytest.approx(100_000 / 8 / size, rel=1e-9)
    assert sd.rates.max_rate == pytest.approx(1_000_000 / 8 / size, rel=1e-9)

