"""m2c review 2 fixes (session 3): special outputs.

- A FIFO whose reader stalls: the receiver still honours SIGTERM while it copies
  the verified file into it, and removes its temporary file.
- ``-o`` naming a Unix socket is refused at once, not retried for ever.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import pytest
from m2c_support import fresh_net, reap, wait_for


def net() -> tuple[str, str]:
    return fresh_net(190)



@pytest.mark.slow
def test_sigterm_reaches_a_receiver_blocked_on_a_stalled_fifo(tmp_path):
    tmpd = tmp_path / "tmp"
    tmpd.mkdir()
    src = tmp_path / "f.bin"
    src.write_bytes(os.urandom(600_000))  # far more than a pipe holds
    sdp = tmp_path / "s.json"
    fifo = tmp_path / "p"
    os.mkfifo(fifo)
    group, port = net()
    snd = subprocess.Popen([sys.executable, "-m", "m2c", "send", str(src), "--sdp", str(sdp),
                            "--group", group, "--port", port, "--duration", "40"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # a reader that opens the FIFO and never reads
    reader = subprocess.Popen([sys.executable, "-c",
                               f"import time; f = open({str(fifo)!r}, 'rb'); time.sleep(60)"])
    rx = None
    try:
        wait_for(sdp)
        rx = subprocess.Popen([sys.executable, "-m", "m2c", "receive", str(sdp), "-o", str(fifo),
                               "-q", "--timeout", "30"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "TMPDIR": str(tmpd)})
        t = time.monotonic() + 30
        # the transfer is over once the temporary file is complete and the copy stalls
        while time.monotonic() < t and rx.poll() is None:
            parts = list(tmpd.iterdir())
            if parts and parts[0].stat().st_size == 600_000:
                time.sleep(1.5)
                break
            time.sleep(0.1)
        assert rx.poll() is None, rx.communicate()
        rx.send_signal(signal.SIGTERM)
        out, err = rx.communicate(timeout=10)
    finally:
        reap(snd, reader, rx)
    assert rx.returncode == 143, err
    assert "terminated" in err
    assert list(tmpd.iterdir()) == []


def test_socket_output_is_refused(tmp_path):
    """With a live sender: refused before receiving (it used to complete the
    transfer, then retry opening the socket for ever)."""
    path = tmp_path / "out.sock"
    us = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    src = tmp_path / "f.bin"
    src.write_bytes(os.urandom(30_000))
    sdp = tmp_path / "s.json"
    group, port = net()
    snd = subprocess.Popen([sys.executable, "-m", "m2c", "send", str(src), "--sdp", str(sdp),
                            "--group", group, "--port", port, "--duration", "30"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        us.bind(str(path))
        us.listen()
        wait_for(sdp)
        r = subprocess.run([sys.executable, "-m", "m2c", "receive", str(sdp), "-o", str(path),
                            "-q", "--timeout", "20"], capture_output=True, text=True, timeout=30)
    finally:
        us.close()
        snd.kill()
        snd.wait(10)
    assert r.returncode == 1, r.stderr
    assert "Unix socket" in r.stderr and "Traceback" not in r.stderr
    assert '"packets": 0' in r.stdout
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".part")] == []
