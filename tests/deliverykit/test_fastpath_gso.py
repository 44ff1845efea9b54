"""UDP GSO sends (send_gso) and destination grouping: C and twin agree, on real
loopback sockets, and every datagram arrives as its own datagram."""

from __future__ import annotations

import errno
import socket

import pytest
from hypothesis import given, settings, strategies as st

from deliverykit import fastpath

C = fastpath.speedups
SENDERS = [pytest.param(fastpath.py_send_gso, id="twin")]
GROUPERS = [pytest.param(fastpath.py_group_by_destination, id="twin")]
if C is not None:
    SENDERS.append(pytest.param(C.send_gso, id="c"))
    GROUPERS.append(pytest.param(C.group_by_destination, id="c"))
needs_c = pytest.mark.skipif(C is None, reason="C extension not built (no compiler?)")
SO_NO_CHECK = 11  # asm-generic/socket.h: UDP without checksums, which GSO refuses


def _receivers(n: int) -> list[socket.socket]:
    out = []
    for _ in range(n):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("127.0.0.1", 0))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        s.setblocking(False)
        out.append(s)
    return out


def _drain(rx: socket.socket, expected: int) -> list[bytes]:
    got: list[bytes] = []
    for _ in range(200):  # bounded: loopback delivers within the send call
        batch = fastpath.py_recv_batch(rx, 64, 65536)
        got += [d for d, _ in batch]
        if len(got) >= expected and not batch:
            break
    return got


# (receiver index, payload length, fill byte) per datagram: few lengths and few
# receivers, so that runs (same address, same length) are common
ITEM = st.tuples(st.integers(0, 2), st.sampled_from([0, 1, 100, 1200, 1201, 1472]),
                 st.integers(0, 255))


@needs_c
@settings(max_examples=40, deadline=None)
@given(spec=st.lists(ITEM, min_size=1, max_size=150), max_segs=st.sampled_from([1, 2, 7, 64]))
def test_send_gso_delivers_every_datagram_like_the_twin(spec, max_segs):
    """Both send the same items; each receiver gets exactly its datagrams, in order."""
    results = []
    for send in (C.send_gso, fastpath.py_send_gso):
        rx = _receivers(3)
        tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            addrs = [r.getsockname() for r in rx]
            items = [(bytes([fill]) * n, addrs[k]) for k, n, fill in spec]
            assert send(tx, items, max_segs) == len(items)
            got = [_drain(r, sum(1 for k, _, _ in spec if k == i)) for i, r in enumerate(rx)]
            results.append(got)
            want = [[d for d, a in items if a == addrs[i]] for i in range(3)]
            assert got == want
        finally:
            tx.close()
            for r in rx:
                r.close()
    assert results[0] == results[1]


def test_gso_runs_cut_where_address_length_count_or_bytes_change():
    a, b = ("127.0.0.1", 1), ("127.0.0.1", 2)
    items = ([(b"x" * 100, a)] * 3 + [(b"y" * 50, a)] + [(b"z" * 100, a)]  # short one ends a run
             + [(b"w" * 100, b)] * 2 + [(b"v" * 200, b)])  # a longer one starts a new run
    assert fastpath.gso_runs(items, 64) == [(0, 4), (4, 1), (5, 2), (7, 1)]
    assert fastpath.gso_runs(items, 2) == [(0, 2), (2, 2), (4, 1), (5, 2), (7, 1)]
    big = [(b"q" * 30000, a)] * 3  # 65,507 bytes per message at most
    assert fastpath.gso_runs(big, 64) == [(0, 2), (2, 1)]
    assert fastpath.gso_runs([(b"", a)] * 2, 64) == [(0, 1), (1, 1)]  # no empty segments
    assert fastpath.gso_runs([(b"x", a), (b"", a)], 64) == [(0, 1), (1, 1)]


@pytest.mark.parametrize("send", SENDERS)
def test_send_gso_bad_arguments_are_clear_errors(send):
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        with pytest.raises(ValueError, match="max_segs"):
            send(tx, [(b"x", ("127.0.0.1", 9))], 0)
        with pytest.raises(TypeError, match="address"):
            send(tx, [(b"x", None)], 8)
        with pytest.raises((ValueError, OSError, TypeError)):
            send(tx, [(b"x", ("not-an-address", 1))], 8)
    finally:
        tx.close()


@pytest.mark.parametrize("send", SENDERS)
def test_a_kernel_refusal_of_gso_raises_only_when_nothing_went(send):
    """A socket without UDP checksums cannot use GSO: the kernel refuses the first
    multi-segment message with EINVAL.  Raised when it is the first; otherwise the
    count of what went before it (a prefix), so no datagram is sent twice."""
    (rx,) = _receivers(1)
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        tx.setsockopt(socket.SOL_SOCKET, SO_NO_CHECK, 1)
        dst = rx.getsockname()
        with pytest.raises(OSError) as exc:
            send(tx, [(b"a" * 10, dst)] * 3, 64)
        assert exc.value.errno == errno.EINVAL
        assert _drain(rx, 0) == []
        items = [(b"first", dst)] + [(b"b" * 10, dst)] * 3
        assert send(tx, items, 64) == 1
        assert _drain(rx, 1) == [b"first"]
    finally:
        tx.close()
        rx.close()


@pytest.mark.parametrize("group", GROUPERS)
def test_group_by_destination_is_stable(group):
    a, b, c = ("10.0.0.1", 1), ("10.0.0.2", 1), ("10.0.0.1", 2)
    items = [(b"1", a), (b"2", b), (b"3", a), (b"4", c), (b"5", b), (b"6", a)]
    assert group(items) == [(b"1", a), (b"3", a), (b"6", a), (b"2", b), (b"5", b), (b"4", c)]
    assert group([]) == []
    assert group(items[:1]) == items[:1]
    with pytest.raises(TypeError):
        group([b"not a pair"])


@needs_c
@given(st.lists(st.tuples(st.binary(max_size=3), st.sampled_from(
    [("10.0.0.1", 1), ("10.0.0.2", 1), ("::1", 7, 0, 0)])), max_size=60))
def test_group_by_destination_matches_twin(items):
    assert C.group_by_destination(items) == fastpath.py_group_by_destination(items)
