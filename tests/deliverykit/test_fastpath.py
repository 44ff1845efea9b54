"""The C fast paths and their pure-Python twins give identical results."""

from __future__ import annotations

import socket

import pytest
from hypothesis import given, settings, strategies as st

from deliverykit import fastpath

C = fastpath.speedups
needs_c = pytest.mark.skipif(C is None, reason="C extension not built (no compiler?)")

IMPLS = [pytest.param(fastpath.py_xor_into, id="twin")]
if C is not None:
    IMPLS.append(pytest.param(C.xor_into, id="c"))


@needs_c
@given(st.integers(0, 3000).flatmap(lambda n: st.tuples(st.binary(min_size=n, max_size=n),
                                                          st.binary(min_size=n, max_size=n))))
def test_xor_into_matches_twin(pair):
    a, b = pair
    d_c, d_py = bytearray(a), bytearray(a)
    C.xor_into(d_c, b)
    fastpath.py_xor_into(d_py, b)
    assert d_c == d_py == bytes(x ^ y for x, y in zip(a, b))


@pytest.mark.parametrize("xor", IMPLS)
def test_xor_into_rejects_length_mismatch_and_readonly(xor):
    with pytest.raises(ValueError):
        xor(bytearray(3), b"ab")
    with pytest.raises(BufferError):
        xor(b"abc", b"abc")  # bytes are immutable


@pytest.mark.parametrize("xor", IMPLS)
def test_xor_into_memoryview_slice(xor):
    buf = bytearray(range(16))
    xor(memoryview(buf)[4:8], b"\xff\xff\xff\xff")
    assert buf[4:8] == bytes(255 - i for i in range(4, 8))
    assert buf[:4] == bytes(range(4)) and buf[8:] == bytes(range(8, 16))


def _pair(family=socket.AF_INET):
    host = "127.0.0.1" if family == socket.AF_INET else "::1"
    rx = socket.socket(family, socket.SOCK_DGRAM)
    tx = socket.socket(family, socket.SOCK_DGRAM)
    rx.bind((host, 0))
    tx.bind((host, 0))
    rx.setblocking(False)
    tx.setblocking(False)
    return rx, tx


def _drain_all(recv, rx, size, expected, rounds=200):
    got = []
    for _ in range(rounds):
        batch = recv(rx, 16, size)
        got.extend(batch)
        if len(got) >= expected:
            break
    return got


@needs_c
@settings(max_examples=30, deadline=None)
@given(payloads=st.lists(st.binary(min_size=0, max_size=1500), min_size=1, max_size=40),
       size=st.sampled_from([16, 1500, 65536]),
       v6=st.booleans())
def test_send_and_recv_batch_match_twin(payloads, size, v6):
    """Send the same datagrams with C and twin; both receivers see the same list."""
    fam = socket.AF_INET6 if v6 else socket.AF_INET
    results = []
    for send, recv in ((C.send_batch, C.recv_batch),
                       (fastpath.py_send_batch, fastpath.py_recv_batch)):
        rx, tx = _pair(fam)
        try:
            dst = rx.getsockname()
            n = send(tx, [(p, dst[:2]) for p in payloads])
            assert n == len(payloads)
            got = _drain_all(recv, rx, size, len(payloads))
            assert recv(rx, 4, size) == []  # nothing more, and it does not block
            results.append([d for d, _ in got])
            assert all(a[:2] == tx.getsockname()[:2] for _, a in got)
        finally:
            rx.close()
            tx.close()
    assert results[0] == results[1]
    assert results[0] == [p[:size] for p in payloads]


@pytest.mark.parametrize("impl", ["c", "twin"])
def test_send_batch_connected_socket_and_errors(impl):
    if impl == "c" and C is None:
        pytest.skip("C extension not built")
    send = C.send_batch if impl == "c" else fastpath.py_send_batch
    recv = C.recv_batch if impl == "c" else fastpath.py_recv_batch
    rx, tx = _pair()
    try:
        tx.connect(rx.getsockname())
        assert send(tx, [(b"one", None), (b"two", None)]) == 2
        assert [d for d, _ in _drain_all(recv, rx, 100, 2)] == [b"one", b"two"]
        with pytest.raises((ValueError, OSError, TypeError)):
            send(tx, [(b"x", ("not-an-address", 1))])
        with pytest.raises(ValueError):
            recv(rx, 0, 100)
    finally:
        rx.close()
        tx.close()


def test_load_honours_pure_env(monkeypatch):
    import importlib
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c",
         "from deliverykit import fastpath; print(fastpath.have_c(), fastpath.xor_into.__name__)"],
        env={"DELIVERYKIT_PURE": "1", "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, check=True,
    )
    assert out.stdout.split() == ["False", "py_xor_into"]
    assert importlib.import_module("deliverykit.fastpath").load("nope", len) is len
