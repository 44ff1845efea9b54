"""Receive progress counts symbols, not blocks (issue 13, item 18, m2c part).

A 50 MB file is a dozen LDPC blocks of 3,000 symbols, all received at once:
counting decoded blocks showed ``0/12 blocks`` for 24 of 25 s.  The receiver
now reports the source symbols it holds against the file's (and %), the
receive rate and the layers joined: a bar on stderr when stderr is a terminal,
one line every interval when asked (``--progress``), nothing on stdout, and
the final summary line as before.
"""

from __future__ import annotations

import hashlib
import json
import os
import pty
import re
import subprocess
import sys
import threading

from m2c_support import reap, start_sender

from m2c.core.filetx import FileReceiver, FileSender, RateLadder, SessionDescription, default_fec
from m2c.core.groups import WaveSchedule
from m2c.wire import codec


def test_progress_counts_symbols_before_any_block_is_decoded():
    data = os.urandom(200_000)
    sched = WaveSchedule(20.0, 2000.0, tsd=0.5, k=2)
    sd = SessionDescription(7, 0, "f", len(data), hashlib.sha256(data).hexdigest(),
                            default_fec(len(data), "ldpc", 100, max_block_length=500),
                            RateLadder.of(sched), [["239.1.1.1", 4000]] * (sched.channels + 1))
    fs = FileSender(sd, lambda off, n: data[off:off + n])
    fr = FileReceiver(sd)
    total = sd.partition().total_symbols
    assert fr.progress().symbols == 0 and fr.progress().needed == total
    seen = []
    while not fr.complete:
        for _pdu, pkt in fs.next_pdus():
            fr.feed(pkt, len(codec.encode(pkt)))
            seen.append((fr.progress().symbols, len(fr.done)))
    # symbols move long before the first block is decoded, never back, and end at the total
    assert any(sym > total // 10 and blocks == 0 for sym, blocks in seen)
    assert all(a[0] <= b[0] for a, b in zip(seen, seen[1:]))
    assert fr.progress().symbols == total and fr.progress().percent == 100.0


def _transfer(tmp_path, *args: str, stderr_tty: bool = False):
    src = tmp_path / "f.bin"
    src.write_bytes(os.urandom(1_500_000))
    sdp = tmp_path / "s.json"
    snd = start_sender(src, sdp, 187, "--max-rate", "6000", "--min-rate", "500")
    cmd = [sys.executable, "-m", "m2c", "receive", str(sdp), "-o", str(tmp_path / "out"),
           "--timeout", "60", *args]
    try:
        if not stderr_tty:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=90, check=False)
            return src, r.returncode, r.stdout, r.stderr
        master, slave = pty.openpty()
        chunks: list[bytes] = []

        def drain() -> None:
            while True:
                try:
                    b = os.read(master, 4096)
                except OSError:
                    return
                if not b:
                    return
                chunks.append(b)

        env = {**os.environ, "COLUMNS": "120", "TERM": "xterm"}
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=slave, env=env)
        os.close(slave)
        t = threading.Thread(target=drain, daemon=True)
        t.start()
        try:
            out, _ = p.communicate(timeout=90)
        finally:
            reap(p)
            t.join(5)
            os.close(master)
        return src, p.returncode, out.decode(), b"".join(chunks).decode(errors="replace")
    finally:
        reap(snd)


def test_progress_lines_when_asked_on_a_pipe(tmp_path):
    _src, rc, out, err = _transfer(tmp_path, "--progress")
    assert rc == 0, err
    assert json.loads(out)["ok"] is True  # stdout: the JSON only
    lines = [ln for ln in err.splitlines() if " symbols " in ln]
    assert lines, err
    pat = re.compile(r"(\d+)/(\d+) symbols \(([\d.]+) %\), ([\d.]+) kbit/s, (\d+) layers?")
    got = [pat.search(ln) for ln in lines]
    assert all(got), lines
    counts = [int(m.group(1)) for m in got]
    needed = int(got[0].group(2))
    assert counts == sorted(counts) and counts[-1] == needed
    assert any(0 < c < needed for c in counts), lines  # seen while under way
    assert max(int(m.group(5)) for m in got) >= 1
    assert "ok, SHA-256 verified" in err.splitlines()[-1]


def test_no_progress_on_a_pipe_unless_asked(tmp_path):
    _src, rc, _out, err = _transfer(tmp_path)
    assert rc == 0, err
    assert " symbols " not in err
    assert len(err.strip().splitlines()) == 1 and "ok, SHA-256 verified" in err


def test_progress_bar_on_a_terminal_shows_symbols(tmp_path):
    _src, rc, out, err = _transfer(tmp_path, stderr_tty=True)
    assert rc == 0, err
    assert json.loads(out)["ok"] is True
    assert "symbols" in err and "kbit/s" in err and "layer" in err, err
    assert "blocks" not in err


def test_sender_reports_progress_when_asked(tmp_path):
    """The sender runs until stopped: with --progress (or on a terminal) it says how
    much it sent and how fast; the counters' JSON stays the last line."""
    src = tmp_path / "f.bin"
    src.write_bytes(os.urandom(100_000))
    base = [sys.executable, "-m", "m2c", "send", str(src), "--sdp", str(tmp_path / "s.json"),
            "--group", f"239.187.{os.getpid() % 250 + 1}.9", "--port", "43500",
            "--duration", "5"]
    r = subprocess.run([*base, "--progress"], capture_output=True, text=True, timeout=60,
                       check=False)
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("m2c send: f.bin:")]
    pat = re.compile(r"m2c send: f\.bin: (\d+) packets, ([\d.]+) kbit/s, (\d+) s")
    assert len(lines) >= 2 and all(pat.match(ln) for ln in lines), r.stderr
    sent = [int(pat.match(ln).group(1)) for ln in lines]
    assert sent == sorted(sent) and sent[-1] > 0
    assert json.loads(r.stderr.splitlines()[-1])["packets"] >= sent[-1]
    quiet = subprocess.run(base, capture_output=True, text=True, timeout=60, check=False)
    assert quiet.returncode == 0 and "m2c send: f.bin:" not in quiet.stderr
