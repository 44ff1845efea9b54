"""The METH_VARARGS functions of deliverykit/csrc/swift.c on the per-datagram
path (``recv_batch_ts``, ``decode_msgs``, ``uncle_stop``, ``merkle_uncles``,
``data_datagram``, ``seed_datagram``, ``ledbat_on_ack``) take METH_FASTCALL
since session 18 (docs/swift-perf.md, "Session 18: the leecher's
per-datagram overheads"): no argument tuple, no ``PyArg_ParseTuple``, their
arguments converted by one switch per argument as the old formats did.

Their results are the twins' (tests/swift/test_swift_fast.py and the
transfers); here, that every bad argument raises the exception type AND
message the ``PyArg_ParseTuple`` build raised (``EXPECTED`` was recorded from
that build, ba184a3, by running ``outcomes()`` against it), and
that a buffer taken before a later bad argument is released again."""

from __future__ import annotations

import hashlib
import socket
from collections.abc import Callable
from typing import Any

import pytest

from deliverykit import fastpath
from swift.core.binmap import Binmap
from swift.core.ledbat import Ledbat
from swift.core.merkle import MerkleTree

NAMES = ("recv_batch_ts", "decode_msgs", "uncle_stop", "merkle_uncles", "data_datagram",
         "seed_datagram", "ledbat_on_ack")
FNS = {n: getattr(fastpath.speedups, n, None) for n in NAMES}
pytestmark = pytest.mark.skipif(any(f is None for f in FNS.values()),
                                reason="C speedups not built")

# each function's old PyArg_ParseTuple format, one code per argument
FORMATS = {"recv_batch_ts": "Onn", "decode_msgs": "yninnO",
           "uncle_stop": "LLyyLLyyLL", "merkle_uncles": "yynLLLy",
           "data_datagram": "LyynLLLyyOLL", "seed_datagram": "LOLOOyOLL",
           "ledbat_on_ack": "OdLdO"}


class Idx:
    """An int through ``__index__`` ("L", "n" and "i" take it)."""

    def __index__(self) -> int:
        return 3


# bad values per format code ("O" takes anything)
BAD: dict[str, list[Any]] = {
    "L": ["x", 1.5, 1 << 70, -(1 << 70), None],
    "n": ["x", 1.5, 1 << 70, None],
    "i": ["x", 1.5, 1 << 31, -(1 << 31) - 1, 1 << 70],
    "d": ["x", None, b"1"],
    "y": ["x", 3, None, memoryview(bytes(16))[::2]],
}


def _summary(v: Any) -> Any:
    if isinstance(v, (bytes, bytearray)):
        return hashlib.sha1(v).hexdigest()[:16]
    if isinstance(v, (list, tuple)):
        return hashlib.sha1(repr(v).encode()).hexdigest()[:16]
    return repr(v)


def _outcome(f: Callable[..., Any], *args: Any) -> tuple[str, str]:
    try:
        return ("ok", _summary(f(*args)))
    except Exception as exc:  # noqa: BLE001  (the exception is the answer)
        return (type(exc).__name__, str(exc))


def _valid(sock: socket.socket) -> dict[str, tuple[Any, ...]]:
    """A call of each function that succeeds (recv_batch_ts reads nothing:
    the socket is empty, so it returns [] without blocking)."""
    data = bytes(range(256)) * 40
    t = MerkleTree.build([data[i:i + 1024] for i in range(0, len(data), 1024)],
                         chunk_size=1024)
    m = Binmap()
    m.set_range(0, 3)
    n = t.n_chunks or 0
    top = (5 ^ n).bit_length() - 1
    ts = (12345).to_bytes(8, "big")
    dd = FNS["data_datagram"]
    assert dd is not None
    dg = dd(7, t._hashes, t._known, t.hash_size, n, 5, top, t.zero, ts, data, 5 * 1024, 1024)
    return {
        "recv_batch_ts": (sock, 4, 2048),
        "decode_msgs": (dg, 4, 2, 32, 0, 1024),
        "uncle_stop": (5, top, m._h, m._deep, m.root, m.root_layer, m._h, m._deep, m.root,
                       m.root_layer),
        "merkle_uncles": (t._hashes, t._known, t.hash_size, n, 5, top, t.zero),
        "data_datagram": (7, t._hashes, t._known, t.hash_size, n, 5, top, t.zero, ts, data,
                          5 * 1024, 1024),
        "seed_datagram": (7, t, 5, m, m, ts, data, 5 * 1024, 1024),
        "ledbat_on_ack": (Ledbat(), 0.01, 1024, 1.0, None),
    }


def outcomes() -> dict[str, tuple[str, str]]:
    """Every case's outcome: the valid call, too few and too many arguments,
    each argument in turn replaced by each bad value for its code and by an
    ``__index__`` object for the integer codes."""
    out: dict[str, tuple[str, str]] = {}
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.setblocking(False)
        for name, args in _valid(sock).items():
            f = FNS[name]
            assert f is not None
            fmt = FORMATS[name]
            assert len(fmt) == len(args), name
            out[f"{name} valid"] = _outcome(f, *args)
            out[f"{name} short"] = _outcome(f, *args[:-1])
            out[f"{name} long"] = _outcome(f, *args, 0)
            out[f"{name} none"] = _outcome(f)
            for k, code in enumerate(fmt):
                subs = list(BAD.get(code, []))
                if code in "Lni":
                    subs.append(Idx())
                for j, bad in enumerate(subs):
                    a = list(args)
                    a[k] = bad
                    out[f"{name} arg{k} bad{j}"] = _outcome(f, *a)
    return out


def test_bad_arguments_raise_what_parse_tuple_raised() -> None:
    got = outcomes()
    assert set(got) == set(EXPECTED)
    diff = {k: (got[k], EXPECTED[k]) for k in got if got[k] != EXPECTED[k]}
    assert not diff


def test_buffers_released_after_a_later_bad_argument() -> None:
    """For every buffer argument and every later argument that can fail: a
    bytearray in the buffer's place, the later one bad, three times; then
    the bytearray must resize (BufferError if an export were left)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.setblocking(False)
        checked = 0
        for name, args in _valid(sock).items():
            f = FNS[name]
            assert f is not None
            fmt = FORMATS[name]
            for k, code in enumerate(fmt):
                if code != "y":
                    continue
                for j in range(k + 1, len(fmt)):
                    if fmt[j] == "O":
                        continue
                    a = list(args)
                    ba = bytearray(bytes(a[k]))
                    a[k] = ba
                    a[j] = "x"
                    for _ in range(3):
                        assert _outcome(f, *a)[0] == "TypeError", (name, k, j)
                    ba.append(0)
                    checked += 1
        assert checked > 30


# recorded from the PyArg_ParseTuple build (messages that recur as M0...)
M0 = "'str' object cannot be interpreted as an integer"
M1 = "'float' object cannot be interpreted as an integer"
M2 = "'NoneType' object cannot be interpreted as an integer"
M3 = "a bytes-like object is required, not 'str'"
M4 = "a bytes-like object is required, not 'int'"
M5 = "a bytes-like object is required, not 'NoneType'"
M6 = 'memoryview: underlying buffer is not C-contiguous'
M7 = 'Python int too large to convert to C ssize_t'
M8 = 'must be real number, not str'
M9 = 'must be real number, not NoneType'
M10 = 'must be real number, not bytes'

EXPECTED: dict[str, tuple[str, str]] = {
    'recv_batch_ts valid': ('ok', '97d170e1550eee4a'),
    'recv_batch_ts short': ('TypeError', 'recv_batch_ts() takes exactly 3 arguments (2 given)'),
    'recv_batch_ts long': ('TypeError', 'recv_batch_ts() takes exactly 3 arguments (4 given)'),
    'recv_batch_ts none': ('TypeError', 'recv_batch_ts() takes exactly 3 arguments (0 given)'),
    'recv_batch_ts arg1 bad0': ('TypeError', M0),
    'recv_batch_ts arg1 bad1': ('TypeError', M1),
    'recv_batch_ts arg1 bad2': ('OverflowError', M7),
    'recv_batch_ts arg1 bad3': ('TypeError', M2),
    'recv_batch_ts arg1 bad4': ('ok', '97d170e1550eee4a'),
    'recv_batch_ts arg2 bad0': ('TypeError', M0),
    'recv_batch_ts arg2 bad1': ('TypeError', M1),
    'recv_batch_ts arg2 bad2': ('OverflowError', M7),
    'recv_batch_ts arg2 bad3': ('TypeError', M2),
    'recv_batch_ts arg2 bad4': ('ok', '97d170e1550eee4a'),
    'decode_msgs valid': ('ok', '758a0955f398d856'),
    'decode_msgs short': ('TypeError', 'decode_msgs() takes exactly 6 arguments (5 given)'),
    'decode_msgs long': ('TypeError', 'decode_msgs() takes exactly 6 arguments (7 given)'),
    'decode_msgs none': ('TypeError', 'decode_msgs() takes exactly 6 arguments (0 given)'),
    'decode_msgs arg0 bad0': ('TypeError', M3),
    'decode_msgs arg0 bad1': ('TypeError', M4),
    'decode_msgs arg0 bad2': ('TypeError', M5),
    'decode_msgs arg0 bad3': ('BufferError', M6),
    'decode_msgs arg1 bad0': ('TypeError', M0),
    'decode_msgs arg1 bad1': ('TypeError', M1),
    'decode_msgs arg1 bad2': ('OverflowError', M7),
    'decode_msgs arg1 bad3': ('TypeError', M2),
    'decode_msgs arg1 bad4': ('ok', '108122fb4602b0d8'),
    'decode_msgs arg2 bad0': ('TypeError', M0),
    'decode_msgs arg2 bad1': ('TypeError', M1),
    'decode_msgs arg2 bad2': ('OverflowError', 'signed integer is greater than maximum'),
    'decode_msgs arg2 bad3': ('OverflowError', 'signed integer is less than minimum'),
    'decode_msgs arg2 bad4': ('OverflowError', 'Python int too large to convert to C long'),
    'decode_msgs arg2 bad5': ('ok', '1bbc54fe0f94eb08'),
    'decode_msgs arg3 bad0': ('TypeError', M0),
    'decode_msgs arg3 bad1': ('TypeError', M1),
    'decode_msgs arg3 bad2': ('OverflowError', M7),
    'decode_msgs arg3 bad3': ('TypeError', M2),
    'decode_msgs arg3 bad4': ('ok', 'f27d871addc963ef'),
    'decode_msgs arg4 bad0': ('TypeError', M0),
    'decode_msgs arg4 bad1': ('TypeError', M1),
    'decode_msgs arg4 bad2': ('OverflowError', M7),
    'decode_msgs arg4 bad3': ('TypeError', M2),
    'decode_msgs arg4 bad4': ('ok', '758a0955f398d856'),
    'uncle_stop valid': ('ok', '3'),
    'uncle_stop short': ('TypeError', 'uncle_stop() takes exactly 10 arguments (9 given)'),
    'uncle_stop long': ('TypeError', 'uncle_stop() takes exactly 10 arguments (11 given)'),
    'uncle_stop none': ('TypeError', 'uncle_stop() takes exactly 10 arguments (0 given)'),
    'uncle_stop arg0 bad0': ('TypeError', M0),
    'uncle_stop arg0 bad1': ('TypeError', M1),
    'uncle_stop arg0 bad2': ('OverflowError', 'int too big to convert'),
    'uncle_stop arg0 bad3': ('OverflowError', 'int too big to convert'),
    'uncle_stop arg0 bad4': ('TypeError', M2),
    'uncle_stop arg0 bad5': ('ok', '1'),
    'uncle_stop arg1 bad0': ('TypeError', M0),
    'uncle_stop arg1 bad1': ('TypeError', M1),
    'uncle_stop arg1 bad2': ('OverflowError', 'int too big to convert'),
    'uncle_stop arg1 bad3': ('OverflowError', 'int too big to convert'),
    'uncle_stop arg1 bad4': ('TypeError', M2),
    'uncle_stop arg1 bad5': ('ok', '3'),
    'uncle_stop arg2 bad0': ('TypeError', M3),
    'uncle_stop arg2 bad1': ('TypeError', M4),
    'uncle_stop arg2 bad2': ('TypeError', M5),
    'uncle_stop arg2 bad3': ('BufferError', M6),
    'uncle_stop arg3 bad0': ('TypeError', M3),
    'uncle_stop arg3 bad1': ('TypeError', M4),
    'uncle_stop arg3 bad2': ('TypeError', M5),
    'uncle_stop arg3 bad3': ('BufferError', M6),
    'uncle_stop arg4 bad0': ('TypeError', M0),
    'uncle_stop arg4 bad1': ('TypeError', M1),
    'uncle_stop arg4 bad2': ('OverflowError', 'int too big to convert'),
    'uncle_stop arg4 bad3': ('OverflowError', 'int too big to convert'),
    'uncle_stop arg4 bad4': ('TypeError', M2),
    'uncle_stop arg4 bad5': ('ValueError', 'uncle_stop: bad arguments'),
    'uncle_stop arg5 bad0': ('TypeError', M0),
    'uncle_stop arg5 bad1': ('TypeError', M1),
    'uncle_stop arg5 bad2': ('OverflowError', 'int too big to convert'),
    'uncle_stop arg5 bad3': ('OverflowError', 'int too big to convert'),
    'uncle_stop arg5 bad4': ('TypeError', M2),
    'uncle_stop arg5 bad5': ('ok', '1'),
    'uncle_stop arg6 bad0': ('TypeError', M3),
    'uncle_stop arg6 bad1': ('TypeError', M4),
    'uncle_stop arg6 bad2': ('TypeError', M5),
    'uncle_stop arg6 bad3': ('BufferError', M6),
    'uncle_stop arg7 bad0': ('TypeError', M3),
    'uncle_stop arg7 bad1': ('TypeError', M4),
    'uncle_stop arg7 bad2': ('TypeError', M5),
    'uncle_stop arg7 bad3': ('BufferError', M6),
    'uncle_stop arg8 bad0': ('TypeError', M0),
    'uncle_stop arg8 bad1': ('TypeError', M1),
    'uncle_stop arg8 bad2': ('OverflowError', 'int too big to convert'),
    'uncle_stop arg8 bad3': ('OverflowError', 'int too big to convert'),
    'uncle_stop arg8 bad4': ('TypeError', M2),
    'uncle_stop arg8 bad5': ('ValueError', 'uncle_stop: bad arguments'),
    'uncle_stop arg9 bad0': ('TypeError', M0),
    'uncle_stop arg9 bad1': ('TypeError', M1),
    'uncle_stop arg9 bad2': ('OverflowError', 'int too big to convert'),
    'uncle_stop arg9 bad3': ('OverflowError', 'int too big to convert'),
    'uncle_stop arg9 bad4': ('TypeError', M2),
    'uncle_stop arg9 bad5': ('ok', '1'),
    'merkle_uncles valid': ('ok', 'fc47c59ecac797b6'),
    'merkle_uncles short': ('TypeError', 'merkle_uncles() takes exactly 7 arguments (6 given)'),
    'merkle_uncles long': ('TypeError', 'merkle_uncles() takes exactly 7 arguments (8 given)'),
    'merkle_uncles none': ('TypeError', 'merkle_uncles() takes exactly 7 arguments (0 given)'),
    'merkle_uncles arg0 bad0': ('TypeError', M3),
    'merkle_uncles arg0 bad1': ('TypeError', M4),
    'merkle_uncles arg0 bad2': ('TypeError', M5),
    'merkle_uncles arg0 bad3': ('BufferError', M6),
    'merkle_uncles arg1 bad0': ('TypeError', M3),
    'merkle_uncles arg1 bad1': ('TypeError', M4),
    'merkle_uncles arg1 bad2': ('TypeError', M5),
    'merkle_uncles arg1 bad3': ('BufferError', M6),
    'merkle_uncles arg2 bad0': ('TypeError', M0),
    'merkle_uncles arg2 bad1': ('TypeError', M1),
    'merkle_uncles arg2 bad2': ('OverflowError', M7),
    'merkle_uncles arg2 bad3': ('TypeError', M2),
    'merkle_uncles arg2 bad4': ('ValueError', 'merkle_uncles: bad arguments'),
    'merkle_uncles arg3 bad0': ('TypeError', M0),
    'merkle_uncles arg3 bad1': ('TypeError', M1),
    'merkle_uncles arg3 bad2': ('OverflowError', 'int too big to convert'),
    'merkle_uncles arg3 bad3': ('OverflowError', 'int too big to convert'),
    'merkle_uncles arg3 bad4': ('TypeError', M2),
    'merkle_uncles arg3 bad5': ('ok', '0433d60008ff37a0'),
    'merkle_uncles arg4 bad0': ('TypeError', M0),
    'merkle_uncles arg4 bad1': ('TypeError', M1),
    'merkle_uncles arg4 bad2': ('OverflowError', 'int too big to convert'),
    'merkle_uncles arg4 bad3': ('OverflowError', 'int too big to convert'),
    'merkle_uncles arg4 bad4': ('TypeError', M2),
    'merkle_uncles arg4 bad5': ('ok', '5b6fb1826b652320'),
    'merkle_uncles arg5 bad0': ('TypeError', M0),
    'merkle_uncles arg5 bad1': ('TypeError', M1),
    'merkle_uncles arg5 bad2': ('OverflowError', 'int too big to convert'),
    'merkle_uncles arg5 bad3': ('OverflowError', 'int too big to convert'),
    'merkle_uncles arg5 bad4': ('TypeError', M2),
    'merkle_uncles arg5 bad5': ('ok', 'fc47c59ecac797b6'),
    'merkle_uncles arg6 bad0': ('TypeError', M3),
    'merkle_uncles arg6 bad1': ('TypeError', M4),
    'merkle_uncles arg6 bad2': ('TypeError', M5),
    'merkle_uncles arg6 bad3': ('BufferError', M6),
    'data_datagram valid': ('ok', 'cd96a06ac9d11509'),
    'data_datagram short': ('TypeError', 'data_datagram() takes exactly 12 arguments (11 given)'),
    'data_datagram long': ('TypeError', 'data_datagram() takes exactly 12 arguments (13 given)'),
    'data_datagram none': ('TypeError', 'data_datagram() takes exactly 12 arguments (0 given)'),
    'data_datagram arg0 bad0': ('TypeError', M0),
    'data_datagram arg0 bad1': ('TypeError', M1),
    'data_datagram arg0 bad2': ('OverflowError', 'int too big to convert'),
    'data_datagram arg0 bad3': ('OverflowError', 'int too big to convert'),
    'data_datagram arg0 bad4': ('TypeError', M2),
    'data_datagram arg0 bad5': ('ok', 'a40a142dc63044b7'),
    'data_datagram arg1 bad0': ('TypeError', M3),
    'data_datagram arg1 bad1': ('TypeError', M4),
    'data_datagram arg1 bad2': ('TypeError', M5),
    'data_datagram arg1 bad3': ('BufferError', M6),
    'data_datagram arg2 bad0': ('TypeError', M3),
    'data_datagram arg2 bad1': ('TypeError', M4),
    'data_datagram arg2 bad2': ('TypeError', M5),
    'data_datagram arg2 bad3': ('BufferError', M6),
    'data_datagram arg3 bad0': ('TypeError', M0),
    'data_datagram arg3 bad1': ('TypeError', M1),
    'data_datagram arg3 bad2': ('OverflowError', M7),
    'data_datagram arg3 bad3': ('TypeError', M2),
    'data_datagram arg3 bad4': ('ValueError', 'data_datagram: bad arguments'),
    'data_datagram arg4 bad0': ('TypeError', M0),
    'data_datagram arg4 bad1': ('TypeError', M1),
    'data_datagram arg4 bad2': ('OverflowError', 'int too big to convert'),
    'data_datagram arg4 bad3': ('OverflowError', 'int too big to convert'),
    'data_datagram arg4 bad4': ('TypeError', M2),
    'data_datagram arg4 bad5': ('ok', 'c59787b0c93fa12f'),
    'data_datagram arg5 bad0': ('TypeError', M0),
    'data_datagram arg5 bad1': ('TypeError', M1),
    'data_datagram arg5 bad2': ('OverflowError', 'int too big to convert'),
    'data_datagram arg5 bad3': ('OverflowError', 'int too big to convert'),
    'data_datagram arg5 bad4': ('TypeError', M2),
    'data_datagram arg5 bad5': ('ok', '2d0d0571841ec5a0'),
    'data_datagram arg6 bad0': ('TypeError', M0),
    'data_datagram arg6 bad1': ('TypeError', M1),
    'data_datagram arg6 bad2': ('OverflowError', 'int too big to convert'),
    'data_datagram arg6 bad3': ('OverflowError', 'int too big to convert'),
    'data_datagram arg6 bad4': ('TypeError', M2),
    'data_datagram arg6 bad5': ('ok', 'cd96a06ac9d11509'),
    'data_datagram arg7 bad0': ('TypeError', M3),
    'data_datagram arg7 bad1': ('TypeError', M4),
    'data_datagram arg7 bad2': ('TypeError', M5),
    'data_datagram arg7 bad3': ('BufferError', M6),
    'data_datagram arg8 bad0': ('TypeError', M3),
    'data_datagram arg8 bad1': ('TypeError', M4),
    'data_datagram arg8 bad2': ('TypeError', M5),
    'data_datagram arg8 bad3': ('BufferError', M6),
    'data_datagram arg10 bad0': ('TypeError', M0),
    'data_datagram arg10 bad1': ('TypeError', M1),
    'data_datagram arg10 bad2': ('OverflowError', 'int too big to convert'),
    'data_datagram arg10 bad3': ('OverflowError', 'int too big to convert'),
    'data_datagram arg10 bad4': ('TypeError', M2),
    'data_datagram arg10 bad5': ('ok', '9c1f67ab666d0739'),
    'data_datagram arg11 bad0': ('TypeError', M0),
    'data_datagram arg11 bad1': ('TypeError', M1),
    'data_datagram arg11 bad2': ('OverflowError', 'int too big to convert'),
    'data_datagram arg11 bad3': ('OverflowError', 'int too big to convert'),
    'data_datagram arg11 bad4': ('TypeError', M2),
    'data_datagram arg11 bad5': ('ok', 'a45d2af8178efc12'),
    'seed_datagram valid': ('ok', 'cd96a06ac9d11509'),
    'seed_datagram short': ('TypeError', 'seed_datagram() takes exactly 9 arguments (8 given)'),
    'seed_datagram long': ('TypeError', 'seed_datagram() takes exactly 9 arguments (10 given)'),
    'seed_datagram none': ('TypeError', 'seed_datagram() takes exactly 9 arguments (0 given)'),
    'seed_datagram arg0 bad0': ('TypeError', M0),
    'seed_datagram arg0 bad1': ('TypeError', M1),
    'seed_datagram arg0 bad2': ('OverflowError', 'int too big to convert'),
    'seed_datagram arg0 bad3': ('OverflowError', 'int too big to convert'),
    'seed_datagram arg0 bad4': ('TypeError', M2),
    'seed_datagram arg0 bad5': ('ok', 'a40a142dc63044b7'),
    'seed_datagram arg2 bad0': ('TypeError', M0),
    'seed_datagram arg2 bad1': ('TypeError', M1),
    'seed_datagram arg2 bad2': ('OverflowError', 'int too big to convert'),
    'seed_datagram arg2 bad3': ('OverflowError', 'int too big to convert'),
    'seed_datagram arg2 bad4': ('TypeError', M2),
    'seed_datagram arg2 bad5': ('ok', '824bb399284505ac'),
    'seed_datagram arg5 bad0': ('TypeError', M3),
    'seed_datagram arg5 bad1': ('TypeError', M4),
    'seed_datagram arg5 bad2': ('TypeError', M5),
    'seed_datagram arg5 bad3': ('BufferError', M6),
    'seed_datagram arg7 bad0': ('TypeError', M0),
    'seed_datagram arg7 bad1': ('TypeError', M1),
    'seed_datagram arg7 bad2': ('OverflowError', 'int too big to convert'),
    'seed_datagram arg7 bad3': ('OverflowError', 'int too big to convert'),
    'seed_datagram arg7 bad4': ('TypeError', M2),
    'seed_datagram arg7 bad5': ('ok', '9c1f67ab666d0739'),
    'seed_datagram arg8 bad0': ('TypeError', M0),
    'seed_datagram arg8 bad1': ('TypeError', M1),
    'seed_datagram arg8 bad2': ('OverflowError', 'int too big to convert'),
    'seed_datagram arg8 bad3': ('OverflowError', 'int too big to convert'),
    'seed_datagram arg8 bad4': ('TypeError', M2),
    'seed_datagram arg8 bad5': ('ok', 'a45d2af8178efc12'),
    'ledbat_on_ack valid': ('ok', 'None'),
    'ledbat_on_ack short': ('TypeError', 'ledbat_on_ack() takes exactly 5 arguments (4 given)'),
    'ledbat_on_ack long': ('TypeError', 'ledbat_on_ack() takes exactly 5 arguments (6 given)'),
    'ledbat_on_ack none': ('TypeError', 'ledbat_on_ack() takes exactly 5 arguments (0 given)'),
    'ledbat_on_ack arg1 bad0': ('TypeError', M8),
    'ledbat_on_ack arg1 bad1': ('TypeError', M9),
    'ledbat_on_ack arg1 bad2': ('TypeError', M10),
    'ledbat_on_ack arg2 bad0': ('TypeError', M0),
    'ledbat_on_ack arg2 bad1': ('TypeError', M1),
    'ledbat_on_ack arg2 bad2': ('OverflowError', 'int too big to convert'),
    'ledbat_on_ack arg2 bad3': ('OverflowError', 'int too big to convert'),
    'ledbat_on_ack arg2 bad4': ('TypeError', M2),
    'ledbat_on_ack arg2 bad5': ('ok', 'None'),
    'ledbat_on_ack arg3 bad0': ('TypeError', M8),
    'ledbat_on_ack arg3 bad1': ('TypeError', M9),
    'ledbat_on_ack arg3 bad2': ('TypeError', M10),
}
