"""A UDP role whose port is taken is one error line and exit 1, never a silent share
(issue 13 item 3)."""

from __future__ import annotations

import random
import subprocess
import sys

PY = [sys.executable, "-m", "corecast"]


def _ready(p: subprocess.Popen) -> str:
    """The role's ready line on stderr (it prints one once its sockets are bound)."""
    line = p.stderr.readline()
    assert " ready" in line, line + p.stderr.read()
    return line


def _stop(p: subprocess.Popen) -> None:
    if p.poll() is None:
        p.terminate()
    p.communicate(timeout=15)


def test_second_mapserver_on_the_same_address_fails_with_one_line():
    addr = f"127.81.{random.randint(1, 250)}.3"
    args = ["mapserver", "--addr", addr, "--site", "as1:10.1.0.0/16:1:k", "--duration", "20"]
    first = subprocess.Popen(PY + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _ready(first)
        second = subprocess.run(PY + args, capture_output=True, text=True, timeout=30)
        assert second.returncode == 1, second.stderr
        lines = second.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("corecast: error: ")
        assert "in use" in lines[0] and f"{addr}:4342" in lines[0], lines
        assert first.poll() is None  # the first one keeps its port
    finally:
        _stop(first)


def test_second_etr_on_the_same_rloc_fails_instead_of_registering():
    b = random.randint(1, 250)
    etr = ["etr", "--rloc", f"127.82.{b}.1", "--prefix", "10.1.0.0/16",
           "--cc-range", "10.255.0.0/16", "--trust-rloc", "127.82.0.2", "--duration", "20"]
    first = subprocess.Popen(PY + etr, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _ready(first)
        second = subprocess.run(PY + etr, capture_output=True, text=True, timeout=30)
        assert second.returncode == 1, second.stderr
        assert second.stderr.count("\n") == 1 and "in use" in second.stderr
        assert f"127.82.{b}.1:4341" in second.stderr
    finally:
        _stop(first)


def test_udp_sockets_share_a_port_only_for_a_multicast_group_or_when_asked():
    """The root (deliverykit.aio.make_udp_socket): no SO_REUSEADDR on a unicast bind, so a busy
    port is EADDRINUSE; receivers of one multicast group still share its port (m2c)."""
    import errno

    import pytest

    from deliverykit.aio import make_udp_socket

    first = make_udp_socket(("127.0.0.1", 0))
    try:
        with pytest.raises(OSError) as info:
            make_udp_socket(first.getsockname())
        assert info.value.errno == errno.EADDRINUSE
    finally:
        first.close()
    shared = make_udp_socket(("127.0.0.1", 0), reuse_addr=True)  # both ask: they share
    try:
        make_udp_socket(shared.getsockname(), reuse_addr=True).close()
    finally:
        shared.close()
    group = make_udp_socket(("239.255.77.1", 0))
    try:
        make_udp_socket(group.getsockname()).close()
    finally:
        group.close()
