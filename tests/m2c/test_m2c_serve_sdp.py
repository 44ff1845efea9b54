"""``m2c send --serve-sdp``: the session description over HTTP survives bad clients
(an endless request head, a client that says nothing and leaves, garbage): no
traceback, and the next client still gets the description."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

from m2c_support import fresh_net, reap, signal_and_wait, wait_for


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_bad_http_clients_do_not_disturb_the_description_server(tmp_path):
    src = tmp_path / "f.bin"
    src.write_bytes(os.urandom(20_000))
    sdp = tmp_path / "s.json"
    group, port = fresh_net(186)
    http = _free_port()
    p = subprocess.Popen([sys.executable, "-m", "m2c", "send", str(src), "--sdp", str(sdp),
                          "--group", group, "--port", port, "--serve-sdp", str(http),
                          "--duration", "60"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(sdp)
        for bad in (b"GET / HTTP/1.1\r\nX: " + b"a" * 200_000,  # a head without end
                    b"\x00\xff" * 100 + b"\r\n\r\n", b""):
            with socket.create_connection(("127.0.0.1", http), timeout=10) as c:
                try:
                    c.sendall(bad)
                    c.shutdown(socket.SHUT_WR)
                    c.recv(65536)
                except OSError:  # the server may reset a client it refused
                    pass
        time.sleep(0.3)
        with urllib.request.urlopen(f"http://127.0.0.1:{http}/", timeout=10) as r:
            served = json.loads(r.read())
        assert served == json.loads(sdp.read_text())
    finally:
        _, err = signal_and_wait(p, signal.SIGTERM)
        reap(p)
    assert p.returncode == 143, err
    assert "Traceback" not in err and "Unhandled exception" not in err, err
