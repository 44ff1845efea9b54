"""Our seeder, run as a user runs it (``ppspp seed FILE --chunk-size 8192``),
feeding the real libswift leecher that is stopped three times mid-transfer
(SIGSTOP for 0.2 s: libswift descheduled on a loaded machine, as in the
bench runs where its file stalled 1.69 s): nothing is dropped at libswift's
socket (the window stays below what it holds, Ledbat.MAX_CWND) and our seeder
never gives up repairing a chunk (libswift would then wait for its own request
to expire, 2 x max(1 s, 4 RTT) after it asked: the stall of issue 15).
Counters only, no clock in any assertion.

Opt-in, outside CI: set ``LIBSWIFT_BIN`` to libswift's ``swift`` binary.  The CI
tests of the same mechanisms: test_swift_stall_repair.py, test_swift_ledbat_cap.py,
test_swift_stall_socket.py.  Traffic stays on 127.0.0.1.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from swift_support import udp_drops

LIBSWIFT = os.environ.get("LIBSWIFT_BIN", "")
pytestmark = [pytest.mark.live_peer("LIBSWIFT_BIN"), pytest.mark.slow, pytest.mark.timeout(600)]
CS = 8192
SIZE = 24 * 1024 * 1024
WAIT = 300.0  # safety bound only


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for(path: Path, pattern: str, proc: subprocess.Popen) -> re.Match:
    end = time.monotonic() + WAIT
    while time.monotonic() < end:
        m = re.search(pattern, path.read_text(errors="replace"), re.M) if path.exists() else None
        if m:
            return m
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    raise AssertionError(f"{pattern!r} never appeared: {path.read_text(errors='replace')}")


def _allocated(path: Path) -> int:
    try:
        return path.stat().st_blocks * 512
    except OSError:
        return 0


def test_libswift_stopped_mid_transfer_loses_nothing_and_waits_for_no_request(
        tmp_path: Path) -> None:
    data = os.urandom(SIZE)
    (tmp_path / "s").mkdir()
    (tmp_path / "l").mkdir()
    src = tmp_path / "s" / "content.bin"
    src.write_bytes(data)
    log = tmp_path / "seed.err"
    with log.open("w") as fh:
        seed = subprocess.Popen([sys.executable, "-m", "swift", "seed", str(src), "--host",
                                 "127.0.0.1", "--port", "0", "--chunk-size", str(CS)],
                                stdout=subprocess.PIPE, stderr=fh, text=True)
    leech = None
    try:
        root = _wait_for(log, r"as SHA-1 swarm ([0-9a-f]{40})", seed).group(1)
        port = int(_wait_for(log, r"^seeding .* on [0-9.]+:(\d+)$", seed).group(1))
        lport = _free_port()
        leech = subprocess.Popen([LIBSWIFT, "-t", f"127.0.0.1:{port}", "-h", root, "-l",
                                  f"127.0.0.1:{lport}", "-z", str(CS), "-w", "0s"],
                                 cwd=tmp_path / "l", stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
        out = tmp_path / "l" / root
        end = time.monotonic() + WAIT
        for part in (4, 2, 4 / 3):  # a quarter, half, three quarters on disk
            while _allocated(out) < SIZE / part and leech.poll() is None:
                assert time.monotonic() < end, "safety bound"
                time.sleep(0.005)
            leech.send_signal(signal.SIGSTOP)  # libswift descheduled: its socket fills
            time.sleep(0.2)
            leech.send_signal(signal.SIGCONT)
        drops = 0
        while leech.poll() is None:  # its socket's counter, until it exits (complete)
            assert time.monotonic() < end, "safety bound"
            drops = max(drops, udp_drops(lport, missing=-1))
            time.sleep(0.02)
        rc = leech.wait()
    finally:
        if leech is not None and leech.poll() is None:
            leech.kill()
            leech.wait()
        seed.send_signal(signal.SIGTERM)
        stdout, _ = seed.communicate(timeout=60)
    assert rc == 0, log.read_text()[-2000:]
    assert hashlib.sha1(out.read_bytes()).digest() == hashlib.sha1(data).digest()
    stats = json.loads(stdout.strip().splitlines()[-1])["stats"]
    assert drops == 0, drops
    assert stats.get("repair_given_up", 0) == 0, stats
