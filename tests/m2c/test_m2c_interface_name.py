"""``--interface`` takes an interface name as well as an address (issue 13, item 19a):
the README's ``m2c receive ... --interface lo`` works as written; an unknown name is
one clear line and exit 2, never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from m2c_support import reap, start_sender

from m2c.aio.netif import interface_address


def m2c(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "m2c", *args], capture_output=True, text=True,
                          timeout=timeout)


def test_receive_joins_on_an_interface_given_by_name(tmp_path):
    src = tmp_path / "f.bin"
    src.write_bytes(os.urandom(60_000))
    sdp = tmp_path / "s.json"
    p = start_sender(src, sdp, 189)
    try:
        r = m2c("receive", str(sdp), "-o", str(tmp_path / "out"), "--interface", "lo", "-q",
                "--timeout", "30")
    finally:
        reap(p)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out").read_bytes() == src.read_bytes()
    assert json.loads(r.stdout)["ok"] is True


def test_send_from_an_interface_given_by_name(tmp_path):
    src = tmp_path / "f.bin"
    src.write_bytes(os.urandom(5_000))
    sdp = tmp_path / "s.json"
    r = m2c("send", str(src), "--interface", "lo", "--sdp", str(sdp), "--duration", "0.5",
            "--group", "239.189.250.1", "--port", "41000")
    assert r.returncode == 0, r.stderr
    d = json.loads(sdp.read_text())
    assert d["source"] == d["interface"] == "127.0.0.1"


@pytest.mark.parametrize("cmd", ["send", "receive"])
def test_unknown_interface_name_is_one_line(tmp_path, cmd):
    f = tmp_path / "f.bin"
    f.write_bytes(b"x" * 100)
    args = ["send", str(f)] if cmd == "send" else ["receive", str(f), "-o", str(tmp_path / "o")]
    r = m2c(*args, "--interface", "nosuch0")
    assert r.returncode == 2, r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith(f"m2c {cmd}: error: argument --interface: no network interface "
                           f"named 'nosuch0' (this host has: lo"), r.stderr
    assert "Traceback" not in r.stderr


def test_interface_address_of_names_and_addresses():
    assert interface_address("lo") == "127.0.0.1"
    assert interface_address("127.0.0.1") == "127.0.0.1"
    with pytest.raises(ValueError, match="no network interface named"):
        interface_address("nosuch0")
