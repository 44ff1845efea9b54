"""The CLI signal contract for every long-running ppspp role (issue 13 item 16):
Ctrl-C (SIGINT) and SIGTERM stop it cleanly, print the same final counters line
as an end by itself, and exit 130 / 143 (0 when it ends by itself); progress
goes to stderr only (item 18)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from swift_support import SwiftProcess

pytestmark = pytest.mark.timeout(90)

COUNTERS = ("verified ", "rejected ", "sent_data ", "malformed ", "refused ", "unknown_channel ")


def _start(argv: list[str], marker: str = " on ", **kw) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-m", "swift", *argv], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT,
                                                          signal.default_int_handler),
                         **kw)
    deadline = time.monotonic() + 30
    line = ""
    while marker not in line and time.monotonic() < deadline:
        line = p.stderr.readline()
        if not line:
            break
    assert marker in line, line
    return p


def _stop(p: subprocess.Popen, sig: int) -> tuple[str, str]:
    time.sleep(0.3)
    p.send_signal(sig)
    try:
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    return out, err


def _final_json(out: str, role: str, why: str) -> dict:
    """The counters as one JSON object, the last line on stdout."""
    import json
    got = json.loads(out.strip().splitlines()[-1])
    assert got["role"] == role and why in got["stopped"], got
    for c in COUNTERS:
        assert c.strip() in got["stats"], got
    return got


def _final_line(err: str, role: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.startswith(f"ppspp {role}: ")]
    assert len(lines) == 1, err
    for c in COUNTERS:
        assert c in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def content(tmp_path):
    f = tmp_path / "v.bin"
    f.write_bytes(os.urandom(100_000))
    return f


SIGNALS = [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")]


@pytest.mark.parametrize("sig,code,word", SIGNALS)
def test_seed_stops_on_a_signal_with_its_counters(content, sig, code, word):
    p = _start(["seed", str(content), "--host", "127.0.0.1", "--port", "0"])
    out, err = _stop(p, sig)
    assert p.returncode == code, err
    assert "Traceback" not in err
    assert word in _final_line(err, "seed")
    _final_json(out, "seed", word)


def test_seed_ending_by_itself_prints_the_same_line(content):
    r = subprocess.run([sys.executable, "-m", "swift", "seed", str(content), "--host", "127.0.0.1",
                        "--port", "0", "--duration", "0.5"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    assert "--duration reached" in _final_line(r.stderr, "seed")
    _final_json(r.stdout, "seed", "--duration reached")


@pytest.mark.parametrize("sig,code,word", SIGNALS)
def test_tracker_stops_on_a_signal(sig, code, word):
    p = _start(["tracker", "11" * 32, "--host", "127.0.0.1", "--port", "0"])
    out, err = _stop(p, sig)
    assert p.returncode == code, err
    assert word in _final_line(err, "tracker")
    _final_json(out, "tracker", word)


@pytest.mark.parametrize("sig,code,word", SIGNALS)
def test_live_source_on_an_idle_pipe_stops_on_a_signal(sig, code, word):
    """stdin open and silent: no thread stuck in read() may hold the exit back."""
    r, w = os.pipe()
    try:
        p = _start(["live-source", "--host", "127.0.0.1", "--port", "0"], marker="live source on",
                   stdin=r)
        out, err = _stop(p, sig)
    finally:
        os.close(r)
        os.close(w)
    assert p.returncode == code, err
    assert word in _final_line(err, "live-source")
    _final_json(out, "live-source", word)


@pytest.mark.parametrize("sig,code,word", SIGNALS)
def test_live_view_stops_on_a_signal(tmp_path, content, sig, code, word):
    src = SwiftProcess(["live-source", "--input", str(content), "--host", "127.0.0.1", "--port",
                        "0", "--rate", "50000", "--linger", "30"], marker="live source on")
    try:
        p = subprocess.Popen([sys.executable, "-m", "swift", "live-view", src.id,
                              "--peer", src.peer, "-o", str(tmp_path / "v.out")],
                             stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True,
                             preexec_fn=lambda: signal.signal(signal.SIGINT,
                                                              signal.default_int_handler))
        deadline = time.monotonic() + 20
        out = tmp_path / "v.out.part"  # the recording until the viewer stops
        while time.monotonic() < deadline and (not out.exists() or out.stat().st_size < 2000):
            time.sleep(0.05)
        _, err = _stop(p, sig)
    finally:
        src.stop()
    assert p.returncode == code, err
    assert word in _final_line(err, "live-view")
    assert (tmp_path / "v.out").stat().st_size >= 2000  # stopped: the recording is kept
    assert not out.exists()


def test_download_progress_goes_to_stderr_only(tmp_path, content):
    seed = SwiftProcess(["seed", str(content), "--host", "127.0.0.1", "--port", "0"])
    try:
        r = subprocess.run([sys.executable, "-m", "swift", "download", seed.id, "--peer", seed.peer,
                            "-o", str(tmp_path / "r.bin"), "--progress", "--timeout", "30"],
                           capture_output=True, text=True, timeout=60)
    finally:
        seed.stop()
    assert r.returncode == 0, r.stderr
    assert r.stdout == ""
    assert "━" in r.stderr and "100.0/100.0 kB" in r.stderr, r.stderr
    assert "100000 bytes verified" in r.stderr


def test_download_draws_its_bar_on_a_terminal_stderr_only(tmp_path, content):
    """stderr a terminal (a pty), stdout a pipe: the bar goes to the terminal, stdout
    stays empty; with stderr not a terminal and no --progress, no bar at all."""
    import pty
    seed = SwiftProcess(["seed", str(content), "--host", "127.0.0.1", "--port", "0"])
    master, slave = pty.openpty()
    try:
        r = subprocess.run([sys.executable, "-m", "swift", "download", seed.id, "--peer",
                            seed.peer, "-o", str(tmp_path / "r.bin"), "--timeout", "30"],
                           stdout=subprocess.PIPE, stderr=slave, timeout=60)
        os.close(slave)
        slave = -1
        tty = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the terminal's other side is closed
                break
            if not chunk:
                break
            tty += chunk
        plain = subprocess.run([sys.executable, "-m", "swift", "download", seed.id, "--peer",
                                seed.peer, "-o", str(tmp_path / "p.bin"), "--timeout", "30"],
                               capture_output=True, text=True, timeout=60)
    finally:
        seed.stop()
        os.close(master)
        if slave >= 0:
            os.close(slave)
    assert r.returncode == 0 and r.stdout == b""
    assert "━".encode() in tty and b"bytes verified" in tty
    assert plain.returncode == 0 and plain.stdout == ""
    assert "━" not in plain.stderr and "100000 bytes verified" in plain.stderr


def test_download_without_a_bar_does_not_load_rich(tmp_path, content):
    """No bar to draw (stderr not a terminal, no --progress): rich is never imported. Its
    ~4 MB were most of a non-interactive leecher's peak RSS above an idle seeder's
    (bench_swift_transfer, issue 17); -X importtime lists every module the process loads."""
    seed = SwiftProcess(["seed", str(content), "--host", "127.0.0.1", "--port", "0"])
    try:
        runs = [subprocess.run([sys.executable, "-X", "importtime", "-m", "swift", "download",
                                seed.id, "--peer", seed.peer, "-o", str(tmp_path / f"{i}.bin"),
                                "--timeout", "30", *extra],
                               capture_output=True, text=True, timeout=60)
                for i, extra in enumerate(([], ["--progress"]))]
    finally:
        seed.stop()
    loaded = [{line.rsplit("|", 1)[1].strip() for line in r.stderr.splitlines()
               if line.startswith("import time:")} for r in runs]
    assert all(r.returncode == 0 for r in runs), runs[0].stderr[-500:]
    assert not any(m.split(".")[0] == "rich" for m in loaded[0])
    assert "rich.progress" in loaded[1]  # the search sees rich when a bar is drawn


HELP_CMDS = [[], ["seed"], ["download"], ["tracker"], ["hash"], ["live-source"], ["live-view"],
             ["demo"], ["experiment", "vod-swarm"], ["experiment", "flashcrowd"]]


@pytest.mark.parametrize("cmd", HELP_CMDS, ids=lambda c: " ".join(c) or "ppspp")
def test_help_is_plain_text_with_a_description(cmd):
    """Issue 13 item 20: no RST/Markdown markup, no issue numbers, every command says
    what it does, every option of an experiment has a help text."""
    r = subprocess.run([sys.executable, "-m", "swift", *cmd, "--help"], capture_output=True,
                       text=True, timeout=60, env=dict(os.environ, COLUMNS="100"))
    assert r.returncode == 0, r.stderr
    text = r.stdout
    for bad in ("``", "`", ":class:", ":func:", "issue ", "see the docstring", "{'", "None)"):
        assert bad not in text, (bad, text)
    head, _, rest = text.partition("\n\n")
    assert head.startswith("usage: ppspp")
    assert rest.strip() and not rest.lstrip().startswith(("options:", "positional")), text
    if cmd[:1] == ["experiment"]:
        opts = [ln for ln in text.splitlines() if ln.startswith("  --")]
        assert opts and all(len(ln.split(None, 2)) >= 2 for ln in opts), text
        assert "  --quick\n" not in text and "  --leechers LEECHERS\n" not in text


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_seed_stops_while_it_hashes_a_large_file(tmp_path, sig, code):
    """The hash of a big file runs before the event loop waits for signals:
    Ctrl-C there must not wait for the whole file (a sparse 200 GB file takes
    minutes to hash), and no half-written hash tree is left."""
    big = tmp_path / "big.bin"
    with open(big, "wb") as f:
        f.truncate(200 << 30)
    p = subprocess.Popen([sys.executable, "-m", "swift", "seed", str(big), "--chunk-size",
                          str(1 << 20), "--host", "127.0.0.1", "--port", "0"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT,
                                                          signal.default_int_handler))
    time.sleep(1.5)
    out, err = _stop(p, sig)
    assert p.returncode == code, err
    assert out == "" and "Traceback" not in err
    assert sorted(os.listdir(tmp_path)) == ["big.bin"]
