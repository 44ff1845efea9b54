"""``m2c``: wrong arguments and unusable paths are one clear line and a non-zero exit, never a
traceback; a sender whose every packet is dropped says so and fails."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def m2c(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "m2c", *args], capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture
def small(tmp_path):
    f = tmp_path / "f.bin"
    f.write_bytes(bytes(range(256)) * 64)
    return f


@pytest.mark.parametrize("args, message", [
    (("send", "/nonexistent"), "no such file"),
    (("send", "{f}", "--port", "70000"), "outside 1..65535"),
    (("send", "{f}", "--port", "65530"), "leaves no room"),
    (("send", "{f}", "--group", "10.0.0.1"), "not an IPv4 multicast address"),
    (("send", "{f}", "--group", "notanip"), "not an IPv4 or IPv6 address"),
    (("send", "{f}", "--min-rate", "1000", "--max-rate", "10"), "must be below --max-rate"),
    (("send", "{f}", "--min-rate", "0"), "positive"),
    (("send", "{f}", "--k", "0"), "positive"),
    (("send", "{f}", "--symbol-size", "0"), "positive"),
    (("send", "{f}", "--symbol-size", "70000"), "does not fit"),
    (("send", "{f}", "--interface", "999.9.9.9"), "not an IPv4 or IPv6 address"),
    (("send", "{f}", "--sdp", "/nonexistent/x.json"), "no such directory"),
    (("receive", "/nonexistent.json", "-o", "{tmp}/out"), "cannot read the session description"),
    (("receive", "{f}", "-o", "/nonexistent/out"), "no such directory"),
    (("experiment", "bogus"), "unknown experiment 'bogus'"),
])
def test_bad_input_is_one_clear_line(small, tmp_path, args, message):
    args = [a.format(f=small, tmp=tmp_path) for a in args]
    r = m2c(*args)
    assert r.returncode == 2, r.stderr
    assert message in r.stderr
    assert "Traceback" not in r.stderr


def test_experiment_lists_and_hands_over_help():
    r = m2c("experiment")
    assert r.returncode == 2 and "hetero" in r.stdout and "fig5" in r.stdout
    r = m2c("experiment", "fig5", "--help")
    assert r.returncode == 0 and r.stdout.startswith("usage: m2c experiment fig5")


def test_sender_that_drops_everything_fails(small, tmp_path):
    # 192.0.2.1 (TEST-NET-1) is nobody's interface here: IP_MULTICAST_IF refuses it or every
    # send fails; either way the command must not report success.
    r = m2c("send", str(small), "--interface", "192.0.2.1", "--sdp", str(tmp_path / "s.json"),
            "--duration", "1")
    assert r.returncode != 0
    assert "Traceback" not in r.stderr
    assert "error" in r.stderr


def test_receive_prints_a_one_line_summary(small, tmp_path):
    # a group and port range of its own (the default group and a fixed port collide
    # with any other sender on the machine); stderr is not read, so not piped
    import secrets

    sdp = tmp_path / "s.json"
    group = f"239.196.{1 + secrets.randbelow(250)}.1"
    port = str(20000 + 100 * secrets.randbelow(400))
    sender = subprocess.Popen([sys.executable, "-m", "m2c", "send", str(small), "--sdp", str(sdp),
                               "--group", group, "--port", port, "--duration", "30"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            if sdp.exists() and sdp.stat().st_size:
                break
            subprocess.run(["sleep", "0.1"], check=True)
        # not -q: quiet drops the summary line (the JSON stays on stdout)
        r = m2c("receive", str(sdp), "-o", str(tmp_path / "out"), "--timeout", "30")
    finally:
        sender.kill()
        sender.wait(10)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out").read_bytes() == small.read_bytes()
    summary = [ln for ln in r.stderr.splitlines() if ln.startswith("m2c receive:")]
    assert len(summary) == 1 and "ok, SHA-256 verified" in summary[0]
    assert json.loads(r.stdout)["ok"] is True


def _valid_sdp(tmp_path) -> dict:
    from m2c.aio.driver import make_session

    f = tmp_path / "v.bin"
    f.write_bytes(b"x" * 5000)
    return json.loads(make_session(str(f)).to_json())


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d.pop("fec"), "lacks fec"),
    (lambda d: d.pop("rates"), "lacks rates"),
    (lambda d: d["fec"].pop("max_n"), "fec lacks 'max_n'"),
    (lambda d: d["rates"].pop("tsd"), "rates lack 'tsd'"),
    (lambda d: d.__setitem__("groups", d["groups"][:2]), "groups needed"),
    (lambda d: d["fec"].__setitem__("scheme", "raptor"), "unknown FEC scheme"),
    (lambda d: d["fec"].__setitem__("max_n", d["fec"]["max_block_length"] + 1), "FEC parameters"),
    (lambda d: d.__setitem__("size", -1), "size"),
    (lambda d: d.__setitem__("bogus", 1), "unknown keys bogus"),
])
def test_receive_with_an_incomplete_sdp_is_one_clear_line(tmp_path, mutate, message):
    """review item 7: a KeyError or IndexError traceback before; now ValueError at
    SessionDescription.from_json, reported as one line with exit 2"""
    from m2c.core.filetx import SessionDescription

    d = _valid_sdp(tmp_path)
    mutate(d)
    with pytest.raises(ValueError, match=message):
        SessionDescription.from_json(json.dumps(d))
    sdp = tmp_path / "bad.json"
    sdp.write_text(json.dumps(d))
    r = m2c("receive", str(sdp), "-o", str(tmp_path / "out"), "--timeout", "1")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert message in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()
