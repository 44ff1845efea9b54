"""What the m2c command-line tests share: a fresh multicast group and port, waiting
for a file a subprocess writes, and stopping a subprocess by a signal."""

from __future__ import annotations

import secrets
import signal
import subprocess
import time


def fresh_net(octet: int) -> tuple[str, str]:
    """A random group in 239.<octet>.x.1 and a port (strings, as the CLI takes them);
    each test file uses its own octet so parallel runs do not meet."""
    return f"239.{octet}.{1 + secrets.randbelow(250)}.1", str(20000 + 100 * secrets.randbelow(400))


def wait_for(path, limit: float = 10.0) -> None:
    """Until ``path`` exists and is not empty (AssertionError after ``limit`` s)."""
    t = time.monotonic() + limit
    while time.monotonic() < t:
        if path.exists() and path.stat().st_size:
            return
        time.sleep(0.05)
    raise AssertionError(f"{path} never appeared")


def signal_and_wait(p: subprocess.Popen, sig: int, timeout: float = 20.0):
    """Send ``sig``, collect (stdout, stderr); the process is killed if it outlives ``timeout``."""
    try:
        p.send_signal(sig)
        return p.communicate(timeout=timeout)
    finally:
        p.kill()
        p.wait(10)


def as_foreground() -> None:
    """``preexec_fn`` for a child that Ctrl-C must reach: a foreground process starts
    with SIGINT at its default, but one started from a background job (``cmd &`` in
    a script, as CI may be) inherits SIGINT ignored, and Python then keeps it ignored."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def reap(*procs: subprocess.Popen | None) -> None:
    """Kill and wait for every process still running (None entries: never started)."""
    for p in procs:
        if p is not None and p.poll() is None:
            p.kill()
        if p is not None:
            p.wait(10)


def start_sender(src, sdp, octet: int, *extra: str, duration: float = 40):
    """A running ``m2c send`` of ``src`` writing ``sdp``, on a group and port range of
    its own (``fresh_net(octet)``); returns the Popen once the description exists."""
    import sys

    group, port = fresh_net(octet)
    p = subprocess.Popen([sys.executable, "-m", "m2c", "send", str(src), "--sdp", str(sdp),
                          "--group", group, "--port", port, "--duration", str(duration), *extra],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(sdp)
    except BaseException:
        reap(p)
        raise
    return p


def roles_transfer(tmp_path, octet: int, size: int = 150_000):
    """The testbed experiments' sender and receiver roles (m2c/experiments/roles.py)
    on loopback: a sender thread for 4 s and a receiver into ``tmp_path/"out"``.
    Returns (source path, the receiver's ReceiveResult, the sender's results)."""
    import os
    import threading

    from m2c.aio.driver import SendResult, make_session
    from m2c.experiments import roles
    src = tmp_path / "src.bin"
    src.write_bytes(os.urandom(size))
    sd = make_session(str(src), group=f"239.{octet}.{1 + secrets.randbelow(250)}.1",
                      port=30000 + 100 * secrets.randbelow(300), interface="127.0.0.1",
                      min_rate=100.0, max_rate=2000.0, tsd=0.5, k=2)
    sdj = sd.to_json()
    sent: list[SendResult] = []
    snd = threading.Thread(target=lambda: sent.append(roles.send(sdj, str(src), 4.0)))
    snd.start()
    try:
        res = roles.receive(sdj, str(tmp_path / "out"), "127.0.0.1", 30.0, "m2c")
    finally:
        snd.join(30)
    return src, res, sent
