"""The CLI signal contract in ``m2c send`` and ``m2c receive`` (issue 13, item 16):
Ctrl-C (SIGINT) and SIGTERM stop either role cleanly, it prints the same final
counters either way (the JSON it prints when it ends by itself), and exits 130
for SIGINT, 143 for SIGTERM.  The receiver's temporary file is removed and the
output never appears; the sender closes the session (A = 1) on either signal.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest
from m2c_support import as_foreground, fresh_net, reap, signal_and_wait, start_sender, wait_for

SIGNALS = [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")]


@pytest.mark.parametrize("sig, status, word", SIGNALS, ids=["SIGINT", "SIGTERM"])
def test_sender_prints_its_counters_on_either_signal(tmp_path, sig, status, word):
    src = tmp_path / "f.bin"
    src.write_bytes(os.urandom(50_000))
    sdp = tmp_path / "s.json"
    group, port = fresh_net(188)
    p = subprocess.Popen([sys.executable, "-m", "m2c", "send", str(src), "--sdp", str(sdp),
                          "--group", group, "--port", port],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         preexec_fn=as_foreground)  # so SIGINT acts as a Ctrl-C
    try:
        wait_for(sdp)
    finally:
        _, err = signal_and_wait(p, sig)
    assert p.returncode == status, err
    assert "Traceback" not in err
    stats = json.loads(err.splitlines()[-1])
    assert stats["stopped"] is True and stats["closed"] is True and stats["packets"] > 0


@pytest.mark.parametrize("sig, status, word", SIGNALS, ids=["SIGINT", "SIGTERM"])
def test_receiver_prints_its_counters_on_either_signal(tmp_path, sig, status, word):
    src = tmp_path / "f.bin"
    src.write_bytes(os.urandom(3_000_000))
    sdp = tmp_path / "s.json"
    # a slow sender: the transfer is still under way when the signal comes
    snd = start_sender(src, sdp, 188, "--max-rate", "800", "--min-rate", "200")
    out = tmp_path / "out.bin"
    rx = None
    try:
        rx = subprocess.Popen([sys.executable, "-m", "m2c", "receive", str(sdp), "-o", str(out),
                               "--json", str(tmp_path / "r.json"), "--timeout", "60"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              preexec_fn=as_foreground)
        parts: list[str] = []
        for _ in range(200):  # until packets arrive (the temporary file exists before)
            parts = [n for n in os.listdir(tmp_path) if n.endswith(".part")]
            if parts and os.path.exists(f"/proc/{rx.pid}") and rx.poll() is None:
                break
            subprocess.run(["sleep", "0.05"], check=True)
        assert parts, "the receiver never started"
        subprocess.run(["sleep", "1.5"], check=True)
        assert rx.poll() is None, rx.communicate()
        _, err = signal_and_wait(rx, sig)
    finally:
        reap(snd, rx)
    assert rx.returncode == status, err
    assert "Traceback" not in err
    res = json.loads((tmp_path / "r.json").read_text())
    assert res["ok"] is False and res["stopped"] is True and res["packets"] > 0
    assert res["metrics"]["net"] is None
    assert f"{word}" in err.splitlines()[-1] and "not written" in err.splitlines()[-1]
    assert not out.exists()
    assert [n for n in os.listdir(tmp_path) if n.endswith(".part")] == []
