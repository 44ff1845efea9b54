"""Shared helpers for the capture-analysis tests: a loopback tcpdump and the analyse CLI."""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import socket
import subprocess
import sys
import time
from pathlib import Path

PY = sys.executable


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_tcp_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def tcpdump(path: Path, bpf: str = "", iface: str = "lo", snaplen: int = 0):
    """Capture on ``iface`` into ``path`` until the block ends (waits for 'listening on').

    ``snaplen`` 0 keeps every frame whole (loopback frames reach 65,549 bytes: ``-s 65535``
    would cut them)."""
    argv = ["tcpdump", "-U", "--immediate-mode", "-Z", "root", "-s", str(snaplen), "-B", "65536",
            "-i", iface, "-w", str(path)] + (bpf.split() if bpf else [])
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    sel = selectors.DefaultSelector()
    sel.register(proc.stderr, selectors.EVENT_READ)
    err = b""
    deadline = time.monotonic() + 10
    try:
        while b"listening on" not in err:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError(f"tcpdump did not start: {err.decode(errors='replace')}")
            if sel.select(0.5):
                chunk = os.read(proc.stderr.fileno(), 4096)
                if not chunk:
                    break
                err += chunk
        yield proc
        time.sleep(0.3)  # let the last packets reach the file
    finally:
        sel.close()
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stderr.close()


def analyse(capture: Path, tmp: Path, *args: str) -> dict:
    """Run ``deliverykit analyse`` as a user would and return its JSON results."""
    out = tmp / "analysis.json"
    r = subprocess.run([PY, "-m", "deliverykit", "analyse", str(capture), "--no-progress",
                        "--json", str(out), *args], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(out.read_text())


