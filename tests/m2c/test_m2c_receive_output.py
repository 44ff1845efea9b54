"""m2c receive's output and failure reporting.

- ``-o`` onto a FIFO or a device writes into it (the verified file, copied from a
  temporary file in $TMPDIR) and never replaces it; a device that refuses the
  data (/dev/full) fails with one reason line; ``-o`` naming a Unix socket is
  refused at once, not retried for ever.
- A FIFO whose reader stalls: the receiver still honours SIGTERM while it copies
  the verified file into it, and removes its temporary file.
- A full disk: one reason line, temporary file removed, exit 1.
- ``-o -``: the file on stdout, the JSON on stderr (or ``--json FILE``).
- SIGTERM removes the temporary file like Ctrl-C (exit 143).
- Failure verdicts name their cause (no packet at all, timeout with counts).

Real sender and receiver processes on loopback multicast.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import stat
import subprocess
import sys
import threading
import time

import pytest
from m2c_support import fresh_net, reap, signal_and_wait, wait_for

from m2c.aio.driver import MulticastReceiver, MulticastSender, make_session


def m2c(*args: str, timeout: float = 60, env: dict | None = None,
        **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "m2c", *args], capture_output=True,
                          timeout=timeout, env=env, **kw)


def part_files(*dirs) -> list[str]:
    return sorted(n for d in dirs for n in os.listdir(d) if n.endswith(".part"))


@pytest.fixture
def tmpdir_env(tmp_path):
    """A private $TMPDIR, so temporary files left behind can be seen."""
    t = tmp_path / "tmpdir"
    t.mkdir()
    return t, {**os.environ, "TMPDIR": str(t)}


@pytest.fixture
def sender(tmp_path):
    """A running `m2c send` of a 200 kB file on a group and port range of its own."""
    src = tmp_path / "src.bin"
    src.write_bytes(os.urandom(200_000))
    sdp = tmp_path / "s.json"
    group = f"239.197.{1 + secrets.randbelow(250)}.1"
    port = str(20000 + 100 * secrets.randbelow(400))
    p = subprocess.Popen([sys.executable, "-m", "m2c", "send", str(src), "--sdp", str(sdp),
                          "--group", group, "--port", port, "--duration", "40"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            if sdp.exists() and sdp.stat().st_size:
                break
            time.sleep(0.05)
        yield src, sdp
    finally:
        p.kill()
        p.wait(10)


def net() -> tuple[str, str]:
    return fresh_net(190)


def test_fifo_output_is_written_into_not_replaced(sender, tmp_path, tmpdir_env):
    src, sdp = sender
    tdir, env = tmpdir_env
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = bytearray()

    def read() -> None:
        with open(fifo, "rb") as f:  # blocks until the receiver opens it for writing
            got.extend(f.read())

    t = threading.Thread(target=read, daemon=True)
    t.start()
    r = m2c("receive", str(sdp), "-o", str(fifo), "-q", "--timeout", "30", env=env)
    t.join(10)
    assert r.returncode == 0, r.stderr
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)  # still the FIFO
    assert bytes(got) == src.read_bytes()
    assert part_files(tmp_path, tdir) == []

@pytest.mark.root
def test_char_device_output_stays_a_device(sender, tmp_path, tmpdir_env):
    _, sdp = sender
    tdir, env = tmpdir_env
    null = tmp_path / "null"
    os.mknod(null, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # like /dev/null
    r = m2c("receive", str(sdp), "-o", str(null), "--timeout", "30", env=env)
    assert r.returncode == 0, r.stderr
    assert stat.S_ISCHR(os.stat(null).st_mode)
    assert os.stat(null).st_rdev == os.makedev(1, 3)
    assert b"ok, SHA-256 verified" in r.stderr
    assert part_files(tmp_path, tdir) == []

@pytest.mark.root
def test_device_that_is_full_fails_with_one_reason(sender, tmp_path, tmpdir_env):
    _, sdp = sender
    tdir, env = tmpdir_env
    full = tmp_path / "full"
    os.mknod(full, stat.S_IFCHR | 0o666, os.makedev(1, 7))  # like /dev/full: ENOSPC
    r = m2c("receive", str(sdp), "-o", str(full), "--timeout", "30", env=env)
    assert r.returncode == 1
    err = r.stderr.decode()
    assert "no space left on device writing" in err and str(full) in err, err
    assert "Traceback" not in err
    assert stat.S_ISCHR(os.stat(full).st_mode)
    assert part_files(tmp_path, tdir) == []

@pytest.mark.root
def test_disk_full_is_one_reason_line_and_no_temp_file(sender, tmp_path):
    _, sdp = sender
    mnt = tmp_path / "small"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], check=True)
    try:
        r = m2c("receive", str(sdp), "-o", str(mnt / "out.bin"), "-q", "--timeout", "30")
        listing = os.listdir(mnt)
    finally:
        subprocess.run(["umount", str(mnt)], check=True)
    assert r.returncode == 1
    err = r.stderr.decode()
    assert "no space left on device writing" in err, err
    assert "Traceback" not in err
    assert listing == []  # neither the output nor a temporary file
    assert json.loads(r.stdout)["ok"] is False

def test_dash_output_is_stdout_and_json_goes_elsewhere(sender, tmp_path, tmpdir_env):
    src, sdp = sender
    tdir, env = tmpdir_env
    r = m2c("receive", str(sdp), "-o", "-", "-q", "--timeout", "30", env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout == src.read_bytes()
    assert json.loads(r.stderr.decode().splitlines()[0])["ok"] is True
    assert not (tmp_path / "-").exists()
    res = tmp_path / "res.json"
    r = m2c("receive", str(sdp), "-o", "-", "--json", str(res), "--timeout", "30", env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout == src.read_bytes()
    assert json.loads(res.read_text())["metrics"]["gput"] > 0
    assert part_files(tmp_path, tdir) == []

def test_sigterm_removes_the_temporary_file(tmp_path):
    # a description whose sender never runs: the receiver waits with its temporary file
    src = tmp_path / "src.bin"
    src.write_bytes(os.urandom(100_000))
    sd = make_session(str(src), group=f"239.197.{1 + secrets.randbelow(250)}.9",
                      port=20000 + 100 * secrets.randbelow(400))
    sdp = tmp_path / "s.json"
    sdp.write_text(sd.to_json())
    p = subprocess.Popen([sys.executable, "-m", "m2c", "receive", str(sdp), "-o",
                          str(tmp_path / "out.bin"), "--timeout", "60"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        for _ in range(200):
            if part_files(tmp_path):
                break
            time.sleep(0.05)
        assert part_files(tmp_path), "the receiver never created its temporary file"
    finally:
        _, err = signal_and_wait(p, signal.SIGTERM)
    assert p.returncode == 143
    assert b"terminated" in err
    assert part_files(tmp_path) == []
    assert not (tmp_path / "out.bin").exists()


def _session(tmp_path, size=2_000_000):
    src = tmp_path / "src.bin"
    src.write_bytes(os.urandom(size))
    sd = make_session(str(src), group=f"239.197.{1 + secrets.randbelow(250)}.17",
                      port=20000 + 100 * secrets.randbelow(400), min_rate=20.0,
                      max_rate=200.0, tsd=0.5)
    return str(src), sd

async def test_no_packet_at_all_is_named(tmp_path):
    _, sd = _session(tmp_path)
    res = await MulticastReceiver(sd, str(tmp_path / "out"), idle_timeout=1.0).receive(timeout=20)
    assert not res.ok and res.packets == 0
    assert "no packet of this session arrived in 1 s" in res.end

async def test_timeout_names_blocks_and_packets(tmp_path):
    import asyncio

    src, sd = _session(tmp_path)
    stop = asyncio.Event()
    snd = asyncio.create_task(MulticastSender(sd, src).send(duration=10, stop=stop))
    try:
        res = await MulticastReceiver(sd, str(tmp_path / "out")).receive(timeout=1.5)
    finally:
        stop.set()
        await snd
    assert not res.ok and res.packets > 0
    assert "not complete after 1.5 s" in res.end
    assert f"decoded from {res.packets} packets" in res.end

def test_sha256_mismatch_verdict(sender, tmp_path):
    _, sdp = sender
    d = json.loads(sdp.read_text())
    d["sha256"] = "0" * 64
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(d))
    r = m2c("receive", str(bad), "-o", str(tmp_path / "out"), "-q", "--timeout", "30")
    assert r.returncode == 1
    assert b"does not match the session's SHA-256" in r.stderr
    assert not (tmp_path / "out").exists()

def test_sigterm_while_a_fifo_waits_for_its_reader(sender, tmp_path, tmpdir_env):
    _, sdp = sender
    tdir, env = tmpdir_env
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    p = subprocess.Popen([sys.executable, "-m", "m2c", "receive", str(sdp), "-o", str(fifo),
                          "-q", "--timeout", "60"], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        # verified and waiting: the temporary file exists, the receiver no longer holds it open
        deadline = time.monotonic() + 30
        waiting = False
        while time.monotonic() < deadline and not waiting:
            time.sleep(0.1)
            parts = part_files(tdir)
            if parts:
                held = {os.path.realpath(f"/proc/{p.pid}/fd/{fd}")
                        for fd in os.listdir(f"/proc/{p.pid}/fd")}
                waiting = str(tdir / parts[0]) not in held
        assert waiting, "the receiver never got to waiting for the FIFO's reader"
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=20)
    finally:
        p.kill()
        p.wait(10)
    assert p.returncode == 143, err
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert part_files(tmp_path, tdir) == []

def test_stdout_by_a_proc_link_and_a_symlink(sender, tmp_path, tmpdir_env):
    src, sdp = sender
    tdir, env = tmpdir_env
    dest = tmp_path / "redirected"
    with open(dest, "wb") as f:  # like `m2c receive ... -o /dev/fd/1 > redirected`
        r = subprocess.run([sys.executable, "-m", "m2c", "receive", str(sdp), "-o", "/dev/fd/1",
                            "-q", "--timeout", "30"], stdout=f, stderr=subprocess.PIPE,
                           env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    assert dest.read_bytes() == src.read_bytes()  # the JSON went to stderr
    assert json.loads(r.stderr.splitlines()[0])["ok"] is True
    # a symbolic link to a regular file: the target is replaced, the link stays
    target = tmp_path / "target.bin"
    target.write_bytes(b"old")
    link = tmp_path / "link.bin"
    link.symlink_to(target)
    r = m2c("receive", str(sdp), "-o", str(link), "-q", "--timeout", "30", env=env)
    assert r.returncode == 0, r.stderr
    assert link.is_symlink() and target.read_bytes() == src.read_bytes()
    assert part_files(tmp_path, tdir) == []

async def test_a_new_session_on_the_same_groups_is_named(tmp_path):
    # what a receiver sees when its sender restarts without --resume: another TSI
    import asyncio
    import dataclasses

    src, sd = _session(tmp_path)
    other = dataclasses.replace(sd, session=(sd.session + 1) & 0xFFFFFFFF)
    stop = asyncio.Event()
    snd = asyncio.create_task(MulticastSender(other, src).send(duration=10, stop=stop))
    try:
        res = await MulticastReceiver(sd, str(tmp_path / "out"), idle_timeout=1.5).receive(
            timeout=20)
    finally:
        stop.set()
        await snd
    assert not res.ok and res.packets == 0 and res.rejected > 0
    assert "no packet of this session arrived" in res.end
    assert f"{res.rejected} datagrams of another session" in res.end
    assert "--resume" in res.end


@pytest.mark.slow
def test_sigterm_reaches_a_receiver_blocked_on_a_stalled_fifo(tmp_path):
    tmpd = tmp_path / "tmp"
    tmpd.mkdir()
    src = tmp_path / "f.bin"
    src.write_bytes(os.urandom(600_000))  # far more than a pipe holds
    sdp = tmp_path / "s.json"
    fifo = tmp_path / "p"
    os.mkfifo(fifo)
    group, port = net()
    snd = subprocess.Popen([sys.executable, "-m", "m2c", "send", str(src), "--sdp", str(sdp),
                            "--group", group, "--port", port, "--duration", "40"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # a reader that opens the FIFO and never reads
    reader = subprocess.Popen([sys.executable, "-c",
                               f"import time; f = open({str(fifo)!r}, 'rb'); time.sleep(60)"])
    rx = None
    try:
        wait_for(sdp)
        rx = subprocess.Popen([sys.executable, "-m", "m2c", "receive", str(sdp), "-o", str(fifo),
                               "-q", "--timeout", "30"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "TMPDIR": str(tmpd)})
        t = time.monotonic() + 30
        # the transfer is over once the temporary file is complete and the copy stalls
        while time.monotonic() < t and rx.poll() is None:
            parts = list(tmpd.iterdir())
            if parts and parts[0].stat().st_size == 600_000:
                time.sleep(1.5)
                break
            time.sleep(0.1)
        assert rx.poll() is None, rx.communicate()
        rx.send_signal(signal.SIGTERM)
        out, err = rx.communicate(timeout=10)
    finally:
        reap(snd, reader, rx)
    assert rx.returncode == 143, err
    assert "terminated" in err
    assert list(tmpd.iterdir()) == []

def test_socket_output_is_refused(tmp_path):
    """With a live sender: refused before receiving (it used to complete the
    transfer, then retry opening the socket for ever)."""
    path = tmp_path / "out.sock"
    us = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    src = tmp_path / "f.bin"
    src.write_bytes(os.urandom(30_000))
    sdp = tmp_path / "s.json"
    group, port = net()
    snd = subprocess.Popen([sys.executable, "-m", "m2c", "send", str(src), "--sdp", str(sdp),
                            "--group", group, "--port", port, "--duration", "30"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        us.bind(str(path))
        us.listen()
        wait_for(sdp)
        r = subprocess.run([sys.executable, "-m", "m2c", "receive", str(sdp), "-o", str(path),
                            "-q", "--timeout", "20"], capture_output=True, text=True, timeout=30)
    finally:
        us.close()
        snd.kill()
        snd.wait(10)
    assert r.returncode == 1, r.stderr
    assert "Unix socket" in r.stderr and "Traceback" not in r.stderr
    assert '"packets": 0' in r.stdout
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".part")] == []
