"""`m2c receive` session handling as a user sees it (issue 5 review, items 1, 3, 7,
11, 12): real `m2c send` / `m2c receive` subprocesses on loopback multicast."""

from __future__ import annotations

import http.server
import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time

import pytest

from m2c.cli import SDP_LIMIT, load_sdp


def fresh_net() -> tuple[str, int]:
    return f"239.199.{1 + secrets.randbelow(250)}.1", 20000 + 100 * secrets.randbelow(90)


def start_sender(tmp_path, size, *extra):
    src = tmp_path / "src.bin"
    src.write_bytes(os.urandom(size))
    sdp = tmp_path / "s.json"
    group, port = fresh_net()
    snd = subprocess.Popen(
        [sys.executable, "-m", "m2c", "send", str(src), "--sdp", str(sdp), "--group", group,
         "--port", str(port), "--tsd", "0.5", *extra], stderr=subprocess.PIPE)
    deadline = time.monotonic() + 20
    while True:
        try:
            json.loads(sdp.read_text())
            break
        except (OSError, ValueError):
            pass
        if snd.poll() is not None or time.monotonic() > deadline:
            snd.kill()
            raise AssertionError(snd.stderr.read().decode())
        time.sleep(0.05)
    return src, sdp, snd


def stop(snd):
    if snd.poll() is None:
        snd.terminate()
    snd.wait(timeout=10)
    snd.stderr.close()


def receive(sdp, out, *extra, timeout=60):
    return subprocess.run([sys.executable, "-m", "m2c", "receive", str(sdp), "-o", str(out),
                           "-q", *extra], capture_output=True, text=True, timeout=timeout)


def test_receive_interface_option_and_no_trace_by_default(tmp_path):
    """Item 1: --interface names the local join interface; item 11: the per-epoch
    trace is printed only with --trace."""
    src, sdp, snd = start_sender(tmp_path, 100_000, "--min-rate", "400", "--max-rate",
                                 "30000", "--duration", "30")
    try:
        r = receive(sdp, tmp_path / "out", "--interface", "127.0.0.1", "--timeout", "25")
        assert r.returncode == 0, r.stderr
        res = json.loads(r.stdout)
        assert res["ok"] and "trace" not in res
        assert (tmp_path / "out").read_bytes() == src.read_bytes()
        r = receive(sdp, tmp_path / "out2", "--trace", "--timeout", "25")
        assert r.returncode == 0, r.stderr
        res = json.loads(r.stdout)
        assert res["trace"] and len(res["trace"][0]) == 8
    finally:
        stop(snd)


def test_receive_rejects_a_bad_interface(tmp_path):
    r = receive(tmp_path / "s.json", tmp_path / "o", "--interface", "nowhere")
    assert r.returncode == 2 and "nowhere" in r.stderr and "Traceback" not in r.stderr


def test_sender_stopping_ends_the_session_for_receivers(tmp_path):
    """Item 7: `m2c send --duration` closes the session (A = 1); an incomplete
    receiver fails at once with one clear line and exit 1, no output file."""
    _, sdp, snd = start_sender(tmp_path, 4_000_000, "--min-rate", "200", "--max-rate",
                               "600", "--duration", "2.5")
    try:
        r = receive(sdp, tmp_path / "out", "--timeout", "120", timeout=60)
    finally:
        stop(snd)
    assert r.returncode == 1
    errors = [ln for ln in r.stderr.splitlines() if "error" in ln]
    assert len(errors) == 1 and "closed the session" in errors[0], r.stderr
    assert not (tmp_path / "out").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".part")]


@pytest.mark.slow
def test_vanished_sender_exceptional_timeout(tmp_path):
    """Item 3 (RFC 3738 3.2.3.8, MUST): the sender dies without closing the session:
    the receiver leaves after max(10, TSD) s without packets, well before --timeout,
    with one clear line and exit 1."""
    _, sdp, snd = start_sender(tmp_path, 4_000_000, "--min-rate", "200", "--max-rate",
                               "600", "--duration", "60")
    rx = subprocess.Popen([sys.executable, "-m", "m2c", "receive", str(sdp), "-o",
                           str(tmp_path / "out"), "-q", "--timeout", "300"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1.5)
        snd.send_signal(signal.SIGKILL)  # no close-session packets
        out, err = rx.communicate(timeout=60)
    finally:
        if rx.poll() is None:
            rx.kill()
            rx.communicate()
        stop(snd)
    assert rx.returncode == 1
    errors = [ln for ln in err.splitlines() if "error" in ln]
    assert len(errors) == 1 and "RFC 3738 3.2.3.8" in errors[0], err
    res = json.loads(out)
    assert res["metrics"]["gput"] is None and not res["ok"]
    assert not (tmp_path / "out").exists()


def test_http_session_description_limit(tmp_path):
    """Item 12: the HTTP session description is read with a 1 MiB limit."""
    body = {"/big": b"{" + b" " * (SDP_LIMIT + 10) + b"}", "/ok": b"{}"}

    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            b = body[self.path]
            self.send_response(200)
            self.send_header("Content-Length", str(len(b)))
            self.end_headers()
            try:
                self.wfile.write(b)
            except ConnectionError:
                pass

        def log_message(self, *a):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    url = f"http://127.0.0.1:{srv.server_address[1]}"
    try:
        assert SDP_LIMIT == 1 << 20
        with pytest.raises(ValueError, match="1 MiB"):
            load_sdp(url + "/big")
        with pytest.raises(ValueError, match="not an M2C session"):
            load_sdp(url + "/ok")  # under the limit: parsed as before
        r = receive(url + "/big", tmp_path / "o", timeout=30)
        assert r.returncode == 2 and "1 MiB" in r.stderr and "Traceback" not in r.stderr
    finally:
        srv.shutdown()
        srv.server_close()
