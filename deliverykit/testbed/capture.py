"""pcap capture of one interface inside a namespace, with tcpdump.

``Capture.start`` returns only once tcpdump has reported "listening on"
(the pcap handle is active), so traffic sent by the ``with`` body is
captured; ``stop`` sends SIGINT so tcpdump flushes the file and prints its
counters. Packets are written unbuffered (``-U``) and delivered without
batching (``--immediate-mode``); ``-Z root`` keeps tcpdump from dropping to
its own user before opening the output path.
"""

from __future__ import annotations

import os
import re
import select
import shutil
import signal
import struct
import subprocess
import time
from pathlib import Path

from .errors import TestbedError


class Capture:
    """A running (or finished) tcpdump; see ``Testbed.capture``."""

    def __init__(self, ns: str, ifname: str, path: str | os.PathLike[str],
                 filter: str | None = None, snaplen: int = 262144) -> None:
        self.ns = ns
        self.ifname = ifname
        self.path = Path(path)
        self.filter = filter
        self.snaplen = snaplen
        self.proc: subprocess.Popen[bytes] | None = None
        self.stderr = ""
        #: packets tcpdump reported captured (after ``stop``), else None
        self.captured: int | None = None
        self.dropped: int | None = None

    def start(self, timeout: float = 10.0) -> Capture:
        if shutil.which("tcpdump") is None:
            raise TestbedError("capture needs tcpdump (Debian package tcpdump)")
        argv = ["ip", "netns", "exec", self.ns, "tcpdump", "-i", self.ifname, "-w", str(self.path),
                "-U", "-n", "-s", str(self.snaplen), "--immediate-mode", "-Z", "root"]
        if self.filter:
            argv.append(self.filter)
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, start_new_session=True)
        assert self.proc.stderr is not None
        fd = self.proc.stderr.fileno()
        deadline = time.monotonic() + timeout
        buf = b""
        while b"listening on" not in buf:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([fd], [], [], max(0.0, left))
            chunk = os.read(fd, 4096) if ready else b""
            if not chunk:
                self.stderr = buf.decode(errors="replace")
                self.stop()
                why = "exited" if ready else f"not listening after {timeout} s"
                raise TestbedError(f"tcpdump on {self.ifname} in {self.ns} {why}: {self.stderr}")
            buf += chunk
        self.stderr = buf.decode(errors="replace")
        return self

    def _drain(self, timeout: float) -> None:
        """Wait until tcpdump has written everything it received.

        SIGINT makes tcpdump drop what is still in its ring ("25 packets
        received by filter", "1 packet captured" on a loaded machine), so stop
        only once it sleeps (in poll: its ring is empty) and the file has
        stopped growing for two looks in a row, or after ``timeout``.
        """
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        last, calm = -1, 0
        while time.monotonic() < deadline and calm < 2:
            try:
                with open(f"/proc/{self.proc.pid}/stat") as fh:
                    state = fh.read().rsplit(")", 1)[1].split()[0]
                size = self.path.stat().st_size
            except (OSError, IndexError):
                return
            calm = calm + 1 if (state == "S" and size == last) else 0
            last = size
            time.sleep(0.05)

    def stop(self, timeout: float = 10.0) -> None:
        """Let tcpdump drain, stop it (SIGINT, then SIGKILL), read its counters. Idempotent."""
        proc = self.proc
        if proc is None or proc.returncode is not None:
            return
        if proc.poll() is None:
            self._drain(min(timeout, 3.0))
            try:
                os.killpg(proc.pid, signal.SIGINT)
            except ProcessLookupError:
                pass
        try:
            _, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            _, err = proc.communicate()
        self.stderr += err.decode(errors="replace")
        m = re.search(r"(\d+) packets? captured", self.stderr)
        self.captured = int(m.group(1)) if m else None
        m = re.search(r"(\d+) packets? dropped by kernel", self.stderr)
        self.dropped = int(m.group(1)) if m else None

    def __enter__(self) -> Capture:
        return self if self.proc is not None else self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def read_pcap(path: str | os.PathLike[str]) -> list[tuple[float, bytes]]:
    """(timestamp, frame) for every record of a classic pcap file (as tcpdump -w writes)."""
    data = Path(path).read_bytes()
    if len(data) < 24:
        raise TestbedError(f"{path}: not a pcap file (too short)")
    magic = data[:4]
    order = {b"\xd4\xc3\xb2\xa1": "<", b"\xa1\xb2\xc3\xd4": ">",
             b"\x4d\x3c\xb2\xa1": "<", b"\xa1\xb2\x3c\x4d": ">"}.get(magic)
    if order is None:
        raise TestbedError(f"{path}: not a classic pcap file (magic {magic.hex()})")
    frac = 1e-9 if magic in (b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d") else 1e-6
    out, pos = [], 24
    while pos + 16 <= len(data):
        sec, sub, incl, _ = struct.unpack_from(order + "IIII", data, pos)
        pos += 16
        if pos + incl > len(data):
            break  # a record cut short (the writer was killed): keep the complete ones
        out.append((sec + sub * frac, data[pos : pos + incl]))
        pos += incl
    return out
