"""LEDBAT's window stays below what a libswift leecher's socket holds
(Ledbat.MAX_CWND; docs/swift-perf.md "The stall of a libswift leecher"):
PPSPP has no receive window, and slow start on loopback had grown the window
to 1 MB within 30 ms, past the ~1 MB of datagrams libswift's 1 MiB SO_RCVBUF
takes, so a leecher descheduled for a few ms lost a burst."""

from __future__ import annotations

import socket

from swift.core.ledbat import Ledbat


def _socket_holds(payload: int) -> int:
    """Bytes of ``payload``-byte datagrams the kernel here keeps in a socket
    with libswift's SO_RCVBUF (1 MiB) that nobody reads."""
    r = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        r.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        r.bind(("127.0.0.1", 0))
        r.setblocking(False)
        for _ in range(4000):  # it fills, then drops
            s.sendto(b"x" * payload, r.getsockname())
        held = 0
        while True:
            try:
                r.recv(65536)
            except BlockingIOError:
                return held * payload
            held += 1
    finally:
        r.close()
        s.close()


def test_slow_start_on_an_empty_path_stays_below_a_libswift_socket() -> None:
    # DATA datagrams of 1 and 8 KiB chunks (channel, DATA header, timestamp, a hash)
    room = min(_socket_holds(1024 + 60), _socket_holds(8192 + 60))
    for mss in (1084, 8252):
        led = Ledbat(mss=mss, slow_start=True, init_cwnd=4)
        now = 0.0
        for _ in range(300):  # every window acknowledged at once, no queuing delay
            now += 0.0002
            n = int(led.cwnd) // mss
            for _ in range(n):
                led.on_send(mss, now)
            for _ in range(n):
                led.on_ack(0.0001, mss, now + 0.0001, 0.0002)
            assert led.cwnd < room, (mss, led.cwnd, room)
        assert led.cwnd == Ledbat.MAX_CWND  # it got there: the cap, not the path, stopped it
