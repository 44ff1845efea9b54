"""The CLI contract for every corecast role (issue 13 items 16, 18, 20): SIGINT/SIGTERM stop it
cleanly with the same counters (exit 130/143), a ready line on stderr, one JSON document on
stdout, and help texts without raw markup."""

from __future__ import annotations

import json
import random
import re
import signal
import subprocess
import sys

import pytest

PY = [sys.executable, "-m", "corecast"]
SUBCOMMANDS = ["mapserver", "etr", "itr", "source", "client", "plan", "deploy"]


def _role(b: int, role: str) -> list[str]:
    pre = f"127.89.{b}"
    return {
        "mapserver": ["mapserver", "--addr", f"{pre}.3", "--site", "as1:10.1.0.0/16:1:k"],
        "etr": ["etr", "--rloc", f"{pre}.1", "--prefix", "10.1.0.0/16",
                "--cc-range", "10.255.0.0/16", "--trust-rloc", f"{pre}.2"],
        "itr": ["itr", "--rloc", f"{pre}.2", "--inside", f"{pre}.2:9341",
                "--cc-range", "10.255.0.0/16"],
        "source": ["source", "--eid", f"{pre}.4", "--channel", "10.255.0.1",
                   "--itr", f"{pre}.2:9341", "--wait-subscribers", "1"],
        "client": ["client", "--eid", f"{pre}.11", "--etr", f"{pre}.1"],
    }[role]


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)],
                         ids=["INT", "TERM"])
@pytest.mark.parametrize("role", ["mapserver", "etr", "itr", "source", "client"])
def test_signal_stops_a_role_with_its_counters(role, sig, code):
    p = subprocess.Popen(PY + _role(random.randint(1, 250), role), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        ready = p.stderr.readline()
        assert ready.startswith(f"corecast {role}: ready {{"), ready + p.stderr.read()
        json.loads(ready.partition(" ready ")[2])
        p.send_signal(sig)
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate(timeout=5)
    assert p.returncode == code, err
    assert "Traceback" not in err
    assert json.loads(out)["role"] == role  # stdout: exactly one JSON document


@pytest.mark.parametrize("cmd", [None, *SUBCOMMANDS])
def test_help_texts_are_plain(cmd):
    r = subprocess.run(PY + ([cmd] if cmd else []) + ["--help"], capture_output=True, text=True,
                       timeout=60, check=False)
    assert r.returncode == 0, r.stderr
    text = r.stdout
    assert "``" not in text and ":class:" not in text and ":func:" not in text
    assert not re.search(r"\bissue \d+", text, re.I)
    assert "usage: corecast" in text and len(text.splitlines()) > 5


def test_a_reader_that_leaves_stdout_is_not_an_error():
    """`corecast plan | head -1`: the rest of the output has nowhere to go; no traceback."""
    p = subprocess.Popen(PY + ["plan"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout is not None and p.stderr is not None
    p.stdout.readline()
    p.stdout.close()
    err = p.stderr.read().decode()
    p.wait(timeout=30)
    assert "Traceback" not in err and "Exception ignored" not in err
    assert p.returncode in (0, 141)
