"""TxBatch (C) and PyTxBatch (twin): datagrams held without a Python object each,
sent grouped by destination with UDP GSO, over real loopback sockets; what the
kernel does not take is handed back, never lost or sent twice."""

from __future__ import annotations

import errno
import socket

import pytest
from hypothesis import given, settings, strategies as st

from deliverykit import fastpath

C = fastpath.speedups
MAKERS = [pytest.param(fastpath.py_tx_batch, id="twin")]
if C is not None:
    MAKERS.append(pytest.param(C.tx_batch, id="c"))
needs_c = pytest.mark.skipif(C is None, reason="C extension not built (no compiler?)")
SO_NO_CHECK = 11


def _receivers(families: list[int]) -> list[socket.socket]:
    out = []
    for fam in families:
        s = socket.socket(fam, socket.SOCK_DGRAM)
        s.bind(("127.0.0.1" if fam == socket.AF_INET else "::1", 0))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        s.setblocking(False)
        out.append(s)
    return out


def _drain(rx: socket.socket) -> list[bytes]:
    got: list[bytes] = []
    for _ in range(200):  # bounded; loopback delivers within the send call
        batch = fastpath.py_recv_batch(rx, 64, 65536)
        if not batch:
            break
        got += [d for d, _ in batch]
    return got


ITEM = st.tuples(st.integers(0, 2), st.sampled_from([0, 1, 64, 1200, 1260]), st.integers(0, 255))


@needs_c
@settings(max_examples=40, deadline=None)
@given(spec=st.lists(ITEM, max_size=120), max_segs=st.sampled_from([1, 3, 64]))
def test_c_and_twin_send_the_same_datagrams_to_each_receiver(spec, max_segs):
    results = []
    for make in (C.tx_batch, fastpath.py_tx_batch):
        rx = _receivers([socket.AF_INET] * 3)
        tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            addrs = [("127.0.0.1", r.getsockname()[1]) for r in rx]
            items = [(bytes([fill]) * n, addrs[k]) for k, n, fill in spec]
            b = make()
            for it in items:
                b.append(it)
            assert len(b) == len(items) and b.items() == items
            counts: dict = {}
            for d, (h, _) in items:
                p, n = counts.get(h, (0, 0))
                counts[h] = (p + 1, n + len(d))
            assert b.counts() == counts
            assert b.send(tx, max_segs) == len(items) and b.last_errno == 0
            assert b.take_rest() == [] and len(b) == 0
            got = [_drain(r) for r in rx]
            assert got == [[d for d, a in items if a == addrs[k]] for k in range(3)]
            results.append(got)
        finally:
            tx.close()
            for r in rx:
                r.close()
    assert results[0] == results[1]


@pytest.mark.parametrize("make", MAKERS)
def test_ipv6_destinations(make):
    (rx,) = _receivers([socket.AF_INET6])
    tx = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    try:
        dst = ("::1", rx.getsockname()[1])
        items = [(bytes([i]) * 1200, dst) for i in range(5)] + [(b"end", dst)]
        b = make()
        for it in items:
            b.append(it)
        assert b.send(tx, 64) == 6 and b.take_rest() == []
        assert _drain(rx) == [d for d, _ in items]
    finally:
        tx.close()
        rx.close()


@pytest.mark.parametrize("make", MAKERS)
def test_a_refused_destination_stops_the_send_and_the_rest_comes_back(make):
    """255.255.255.255 without SO_BROADCAST: EACCES.  Grouped by destination, the
    good destination's datagrams go first; the refused ones come back from take_rest
    in order, nothing sent twice."""
    (rx,) = _receivers([socket.AF_INET])
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        good, bad = ("127.0.0.1", rx.getsockname()[1]), ("255.255.255.255", 9)
        items = [(bytes([i]) * 100, good if i % 2 == 0 else bad) for i in range(10)]
        b = make()
        for it in items:
            b.append(it)
        assert b.send(tx, 64) == 5
        assert b.last_errno == errno.EACCES
        assert b.take_rest() == [it for it in items if it[1] == bad]
        assert len(b) == 0
        assert _drain(rx) == [d for d, a in items if a == good]
    finally:
        tx.close()
        rx.close()


@pytest.mark.parametrize("make", MAKERS)
def test_a_refused_gso_message_comes_back_whole(make):
    (rx,) = _receivers([socket.AF_INET])
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        tx.setsockopt(socket.SOL_SOCKET, SO_NO_CHECK, 1)
        dst = ("127.0.0.1", rx.getsockname()[1])
        items = [(b"x" * 50, dst)] * 4
        b = make()
        for it in items:
            b.append(it)
        assert b.send(tx, 64) == 0 and b.last_errno == errno.EINVAL
        assert b.take_rest() == items
        assert _drain(rx) == []
        for it in items:  # without GSO the same socket sends them
            b.append(it)
        assert b.send(tx, 1) == 4 and b.take_rest() == []
        assert _drain(rx) == [d for d, _ in items]
    finally:
        tx.close()
        rx.close()


@pytest.mark.parametrize("make", MAKERS)
def test_bad_input_is_a_clear_error(make):
    b = make()
    with pytest.raises(TypeError):
        b.append(b"no address")
    with pytest.raises(TypeError):
        b.append(("text", ("127.0.0.1", 9)))
    with pytest.raises(ValueError, match="not an address"):
        b.append((b"x", ("example.org", 9)))
    with pytest.raises(ValueError, match="not an address"):
        b.append((b"x", ("127.0.0.1", 70000)))
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        with pytest.raises(ValueError, match="max_segs"):
            b.send(tx, 0)
        assert b.send(tx, 8) == 0  # empty
    finally:
        tx.close()
    assert len(b) == 0
