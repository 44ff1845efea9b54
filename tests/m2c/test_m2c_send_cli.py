"""m2c send as a user meets it.

- ``--resume``: a sender killed mid-transfer and restarted with the same
  session description serves the receiver still running, which completes.
- A --max-rate the sender cannot schedule is refused; a high one it can still
  ends on its own after --duration.
- Clear refusals: a directory, a --group range that leaves 224.0.0.0/4, --port 0,
  an IPv6 --interface; an --interface that cannot be bound fails before the
  session description is written; a busy --serve-sdp port is named.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest
from m2c_support import fresh_net, reap, signal_and_wait, wait_for


def m2c(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "m2c", *args], capture_output=True, text=True,
                          timeout=timeout)


def net() -> tuple[str, str]:
    return fresh_net(198)


@pytest.fixture
def small(tmp_path):
    f = tmp_path / "f.bin"
    f.write_bytes(os.urandom(50_000))
    return f



@pytest.mark.slow
def test_restarted_sender_resumes_the_session(tmp_path):
    src = tmp_path / "r.bin"
    src.write_bytes(os.urandom(1_000_000))
    sdp = tmp_path / "r.json"
    group, port = net()
    send = [sys.executable, "-m", "m2c", "send", str(src), "--sdp", str(sdp), "--resume",
            "--duration", "60"]
    first = subprocess.Popen([*send, "--group", group, "--port", port, "--min-rate", "100",
                              "--max-rate", "1500"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    second = None
    try:
        wait_for(sdp)
        before = json.loads(sdp.read_text())
        rx = subprocess.Popen([sys.executable, "-m", "m2c", "receive", str(sdp), "-o",
                               str(tmp_path / "out"), "-q", "--timeout", "60"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(2.5)  # about a third of the transfer
        assert rx.poll() is None, "the transfer ended before the sender was killed"
        first.kill()
        first.wait(10)
        time.sleep(0.5)
        second = subprocess.Popen(send, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  text=True)
        out, err = rx.communicate(timeout=70)
    finally:
        reap(first, second)
    assert rx.returncode == 0, err
    assert (tmp_path / "out").read_bytes() == src.read_bytes()
    assert json.loads(sdp.read_text()) == before  # the description was reused as it was
    assert "resuming session" in second.stderr.read()


def test_resume_refuses_another_file(small, tmp_path):
    sdp = tmp_path / "s.json"
    group, port = net()
    r = m2c("send", str(small), "--sdp", str(sdp), "--group", group, "--port", port,
            "--duration", "0.2")
    assert r.returncode == 0, r.stderr
    small.write_bytes(os.urandom(50_000))  # same size, other content
    r = m2c("send", str(small), "--sdp", str(sdp), "--resume", "--duration", "0.2")
    assert r.returncode == 2
    assert "is not the file" in r.stderr


def test_unschedulable_rate_is_refused(small):
    r = m2c("send", str(small), "--max-rate", "1e8", "--duration", "2", timeout=30)
    assert r.returncode == 2
    assert "packets/s" in r.stderr and "--max-rate" in r.stderr


@pytest.mark.slow
def test_high_rate_sender_ends_after_duration(tmp_path):
    src = tmp_path / "f.bin"
    src.write_bytes(os.urandom(3_000_000))
    group, port = net()
    # 500 Mbit/s: far more than a loaded machine sequences in Python; it must still stop
    r = m2c("send", str(src), "--group", group, "--port", port, "--max-rate", "500000",
            "--duration", "2", "--sdp", str(tmp_path / "s.json"), timeout=40)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stderr.splitlines()[-1])["packets"] > 0


def test_sigterm_closes_the_session(small, tmp_path):
    sdp = tmp_path / "s.json"
    group, port = net()
    p = subprocess.Popen([sys.executable, "-m", "m2c", "send", str(small), "--sdp", str(sdp),
                          "--group", group, "--port", port],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(sdp)
        time.sleep(0.3)
    finally:
        _, err = signal_and_wait(p, signal.SIGTERM)
    assert p.returncode == 143
    assert json.loads(err.splitlines()[-1])["stopped"] is True


@pytest.mark.parametrize("args, message", [
    (("send", "{d}"), "is a directory"),
    (("send", "{f}", "--group", "239.255.255.250"), "use --group 239.255.255."),
    (("send", "{f}", "--port", "0"), "outside 1..65535"),
    (("send", "{f}", "--interface", "::1"), "not a local IPv4 interface address"),
])
def test_clear_refusals(small, tmp_path, args, message):
    r = m2c(*[a.format(f=small, d=tmp_path) for a in args])
    assert r.returncode == 2, r.stderr
    assert message in r.stderr
    assert "Traceback" not in r.stderr


def test_group_overflow_names_the_last_group(small):
    r = m2c("send", str(small), "--group", "239.255.255.250")
    assert "the last would be 240.0.0." in r.stderr
    assert "beyond the multicast range" in r.stderr


def test_unbindable_interface_leaves_no_description(small, tmp_path):
    sdp = tmp_path / "s.json"
    r = m2c("send", str(small), "--interface", "192.0.2.7", "--sdp", str(sdp),
            "--duration", "1")
    assert r.returncode == 1
    assert "cannot send from --interface 192.0.2.7" in r.stderr
    assert not sdp.exists()


def test_busy_serve_sdp_port_is_named(small, tmp_path):
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    port = busy.getsockname()[1]
    group, gport = net()
    try:
        r = m2c("send", str(small), "--group", group, "--port", gport, "--serve-sdp",
                str(port), "--sdp", str(tmp_path / "s.json"), "--duration", "1")
    finally:
        busy.close()
    assert r.returncode == 1
    assert f"port {port}: Address already in use" in r.stderr
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "s.json").exists()


def test_block_length_option_and_advice(small, tmp_path):
    group, port = net()
    r = m2c("send", str(small), "--block-length", "8", "--group", group, "--port", port,
            "--duration", "0.2")
    assert r.returncode == 0, r.stderr
    sd = json.loads(r.stdout)
    assert sd["fec"]["max_block_length"] == 8
    help_text = m2c("send", "--help").stdout
    assert "--block-length" in help_text and "(default 1400)" in help_text
