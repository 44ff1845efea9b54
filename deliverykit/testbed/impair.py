"""Userspace netem: impair one interface's egress where the kernel lacks sch_netem.

Some kernels (e.g. minimal VM kernels) ship tbf and htb but no netem. There
the testbed installs, on the shaped interface ``DEV``::

    htb root 1: (default class 1:1) -- class 1:1 -- [tbf 2: if a rate is asked]
    filter: classic BPF "skb->mark != MARK" -> mirred egress redirect to tap TAP

so every frame leaving ``DEV`` is handed to this process through the tap;
it applies the impairments (loss, Gilbert-Elliott loss, delay and jitter,
duplication, reordering, corruption, netem's queue limit and rate) and sends
the survivors back out of ``DEV`` through a packet socket with ``SO_MARK =
MARK``, which the filter lets through to class 1:1 (and its tbf). Semantics
follow tc-netem(8): a jittered delay is uniform in [delay - jitter, delay +
jitter] and frames leave in time order (so jitter reorders, as in netem);
``reorder`` sends that share of frames at once, undelayed; ``corrupt`` flips
one random bit past the Ethernet header.

Runs as ``python -m deliverykit.testbed.impair ...`` inside the namespace;
stdlib only. Prints ``ready`` once the tap and socket are set up; exits when
its stdin closes (the testbed went away) or on SIGTERM, printing a JSON line
of counters.
"""

from __future__ import annotations

import argparse
import fcntl
import heapq
import json
import os
import random
import select
import signal
import socket
import struct
import sys
import time

TUNSETIFF = 0x400454CA
IFF_TAP = 0x0002
IFF_NO_PI = 0x1000
ETH_HLEN = 14
TAP_QUEUE = 10_000  # frames the tap holds before the impairer reads them


class GilbertElliott:
    """Two-state loss (tc-netem "loss gemodel p r 1-h 1-k"), all in percent.

    Each frame first moves the chain (good->bad with p, bad->good with r),
    then is lost with ``bad_loss`` in the bad state or ``good_loss`` in the good state.
    """

    def __init__(self, p: float, r: float, bad_loss: float, good_loss: float) -> None:
        self.p, self.r = p / 100, r / 100
        self.bad_loss, self.good_loss = bad_loss / 100, good_loss / 100
        self.bad = False

    def lose(self, rng: random.Random) -> bool:
        if self.bad:
            if rng.random() < self.r:
                self.bad = False
        elif rng.random() < self.p:
            self.bad = True
        return rng.random() < (self.bad_loss if self.bad else self.good_loss)


class Impairer:
    """The per-frame decisions, separate from I/O: ``admit(frame, now)`` -> [(when, frame)]."""

    def __init__(self, a: argparse.Namespace) -> None:
        self.rng = random.Random(a.seed)
        self.delay = a.delay_ms / 1000
        self.jitter = a.jitter_ms / 1000
        self.loss = a.loss_pct / 100
        self.ge = GilbertElliott(*a.gemodel) if a.gemodel else None
        self.dup = a.duplicate_pct / 100
        self.reorder = a.reorder_pct / 100
        self.corrupt = a.corrupt_pct / 100
        self.rate = a.rate_bps
        self.limit = a.limit_pkts
        self.link_free = 0.0
        self.stats = {"in": 0, "lost": 0, "overlimit": 0, "duplicated": 0, "corrupted": 0,
                      "reordered": 0, "sent": 0, "send_errors": 0}

    def lost(self) -> bool:
        if self.ge is not None:
            return self.ge.lose(self.rng)
        return self.loss > 0 and self.rng.random() < self.loss

    def when(self, now: float, size: int) -> float:
        if self.reorder and self.rng.random() < self.reorder:
            self.stats["reordered"] += 1
            t = now
        else:
            d = self.delay
            if self.jitter:
                d += self.rng.uniform(-self.jitter, self.jitter)
            t = now + max(0.0, d)
        if self.rate:
            t = max(t, self.link_free)
            self.link_free = t + size * 8 / self.rate
        return t

    def admit(self, frame: bytes, now: float, queued: int) -> list[tuple[float, bytes]]:
        self.stats["in"] += 1
        if self.lost():
            self.stats["lost"] += 1
            return []
        copies = 2 if self.dup and self.rng.random() < self.dup else 1
        self.stats["duplicated"] += copies - 1
        out: list[tuple[float, bytes]] = []
        for _ in range(copies):
            if queued + len(out) >= self.limit:
                self.stats["overlimit"] += 1
                continue
            data = frame
            if self.corrupt and len(frame) > ETH_HLEN and self.rng.random() < self.corrupt:
                buf = bytearray(frame)
                buf[self.rng.randrange(ETH_HLEN, len(buf))] ^= 1 << self.rng.randrange(8)
                data = bytes(buf)
                self.stats["corrupted"] += 1
            out.append((self.when(now, len(data)), data))
        return out


def open_tap(name: str, like: str) -> int:
    """Create tap ``name`` with the MTU of interface ``like``, IPv6 off, up; return its fd."""
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TAP | IFF_NO_PI))
    with open(f"/proc/sys/net/ipv6/conf/{name}/disable_ipv6", "w") as fh:
        fh.write("1")  # the kernel must not send anything of its own through the tap
    # bring it up (SIOCSIFFLAGS) without pulling in pyroute2
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        mtu = struct.unpack("16si20x", fcntl.ioctl(  # SIOCGIFMTU of the shaped interface
            s, 0x8921, struct.pack("16si20x", like.encode(), 0)))[1]
        fcntl.ioctl(s, 0x8922, struct.pack("16si20x", name.encode(), mtu))  # SIOCSIFMTU
        # a deep queue (SIOCSIFTXQLEN) so a burst survives the impairer waiting for a CPU
        fcntl.ioctl(s, 0x8943, struct.pack("16si20x", name.encode(), TAP_QUEUE))
        ifreq = fcntl.ioctl(s, 0x8913, struct.pack("16sh22x", name.encode(), 0))  # SIOCGIFFLAGS
        flags = struct.unpack("16sh22x", ifreq)[1] | 0x1  # IFF_UP
        fcntl.ioctl(s, 0x8914, struct.pack("16sh22x", name.encode(), flags))  # SIOCSIFFLAGS
    finally:
        s.close()
    return fd


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m deliverykit.testbed.impair", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dev", required=True, help="interface whose egress is impaired")
    p.add_argument("--tap", required=True, help="tap name to create (the filter redirects to it)")
    p.add_argument("--mark", type=int, required=True, help="SO_MARK of frames sent back out")
    p.add_argument("--delay-ms", type=float, default=0.0)
    p.add_argument("--jitter-ms", type=float, default=0.0)
    p.add_argument("--loss-pct", type=float, default=0.0)
    p.add_argument("--gemodel", type=float, nargs=4, metavar=("P", "R", "BAD_LOSS", "GOOD_LOSS"))
    p.add_argument("--duplicate-pct", type=float, default=0.0)
    p.add_argument("--reorder-pct", type=float, default=0.0)
    p.add_argument("--corrupt-pct", type=float, default=0.0)
    p.add_argument("--limit-pkts", type=int, default=1000)
    p.add_argument("--rate-bps", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=None)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    a = parse(argv)
    try:
        # a link emulator should not wait behind the experiment it delays: like the
        # kernel's netem (softirq), get ahead of ordinary processes, without real-time
        # priority (a flood must not starve the machine)
        os.nice(-10)
    except OSError:
        pass
    imp = Impairer(a)
    tap = open_tap(a.tap, a.dev)
    out = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
    out.setsockopt(socket.SOL_SOCKET, socket.SO_MARK, a.mark)
    out.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    out.bind((a.dev, 0))
    out.setblocking(False)
    stop = False

    def on_term(signum: int, frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    print("ready", flush=True)
    stdin = sys.stdin.fileno()
    heap: list[tuple[float, int, bytes]] = []
    seq = 0
    while not stop:
        now = time.monotonic()
        while heap and heap[0][0] <= now:
            _, _, frame = heapq.heappop(heap)
            try:
                out.send(frame)
                imp.stats["sent"] += 1
            except OSError:  # ENOBUFS: the tbf queue behind us is full, as a qdisc drop
                imp.stats["send_errors"] += 1
        timeout = max(0.0, heap[0][0] - time.monotonic()) if heap else 1.0
        try:
            ready, _, _ = select.select([tap, stdin], [], [], timeout)
        except InterruptedError:
            continue
        if stdin in ready and not os.read(stdin, 4096):
            break  # the testbed closed our stdin: it is gone
        if tap in ready:
            now = time.monotonic()
            for _ in range(256):
                try:
                    frame = os.read(tap, 65536)
                except BlockingIOError:
                    break
                for when, data in imp.admit(frame, now, len(heap)):
                    heapq.heappush(heap, (when, seq, data))
                    seq += 1
    print(json.dumps(imp.stats), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
