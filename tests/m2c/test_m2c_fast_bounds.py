"""C fast paths vs twins at the edges (issue 5 review, item 8): a symbol size
E so large that m*E, n*E or count*E overflows Py_ssize_t must raise ValueError
in C as in the twin, never wrap to a small size and write out of bounds
(E = 2^62 with m = n = count = 4 was a SIGSEGV).  Both also refuse E above
RFC 5170 4.2.4.1's 16-bit symbol length, which bounds the elimination's work
space (nu*E bytes).  Read-only state buffers raise the same exception class
(BufferError) in both."""

from __future__ import annotations

import json
import subprocess
import sys
from array import array

import pytest
from hypothesis import given, settings, strategies as st

from deliverykit.fastpath import speedups
from m2c import _fast

pytestmark = pytest.mark.skipif(
    speedups is None or not hasattr(speedups, "m2c_ldpc_eliminate"),
    reason="C extension not built (setup.py build_ext --inplace)")

HUGE = [2**62, 2**61, 2**63 - 1, 2**63 // 3 + 1, 2**32, 2**31, 0xFFFF, 0x10000]


def u32(*xs: int) -> bytes:
    return array("I", xs).tobytes()


def wrapped(count: int, E: int) -> int:
    """What count*E becomes in 64-bit arithmetic, if it is a plausible length."""
    w = (count * E) % 2**64
    return w if w < 1 << 16 else 0


def cases(E: int, m: int, n: int, count: int) -> dict[str, tuple]:
    """Argument tuples per function whose buffers match the wrapped products."""
    k = min(2, n)
    state = (u32(*[0] * (m + 1)), b"", u32(*[0] * (n + 1)), b"")
    mut = (bytearray(4 * m), bytearray(wrapped(m, E)), bytearray(wrapped(n, E)), bytearray(n))
    return {
        "m2c_ldpc_add_many": (k, E, *state, *mut, u32(*[i % max(n, 1) for i in range(count)]),
                              bytes(wrapped(count, E))),
        "m2c_ldpc_add": (k, E, *state, *mut, 0, bytes(wrapped(1, E))),
        "m2c_ldpc_eliminate": (k, E, state[0], b"", bytes(4 * m), bytes(wrapped(m, E)),
                               bytes(n), True),
        "m2c_ldpc_encode": (b"", E, u32(*[0] * (m + 1)), b""),
    }


def outcome(fn, args) -> str:
    try:
        fn(*args)
        return "ok"
    except Exception as exc:  # noqa: BLE001 - the class is what is compared
        return type(exc).__name__


CRASHERS = [(E, c) for E, c in ((2**62, 4), (2**61, 8), (2**63 // 3 + 1, 3)) ]

SCRIPT = """
import json, sys
sys.path.insert(0, {path!r})
from deliverykit.fastpath import speedups
from test_m2c_fast_bounds import cases, outcome
out = []
for E, c in {crashers!r}:
    for name, args in cases(E, c, c, c).items():
        out.append(outcome(getattr(speedups, name), args))
        print(name, E, out[-1], file=sys.stderr, flush=True)
print(json.dumps(out))
"""


def test_overflowing_symbol_size_is_a_value_error_not_a_crash():
    import os

    script = SCRIPT.format(path=os.path.dirname(__file__), crashers=CRASHERS)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, f"C extension crashed (rc {r.returncode}): {r.stderr[-400:]}"
    got = json.loads(r.stdout)
    want = [outcome(getattr(_fast, name), args)
            for E, c in CRASHERS for name, args in cases(E, c, c, c).items()]
    assert got == want
    assert set(got) == {"ValueError"}


@settings(max_examples=300, deadline=None)
@given(E=st.sampled_from(HUGE) | st.integers(-2, 9), m=st.integers(0, 8), n=st.integers(0, 8),
       count=st.integers(0, 8), name=st.sampled_from(
           ["m2c_ldpc_add_many", "m2c_ldpc_add", "m2c_ldpc_eliminate", "m2c_ldpc_encode"]))
def test_any_symbol_size_c_equals_twin(E, m, n, count, name):
    args = cases(E, m, n, count)[name]
    c = outcome(getattr(speedups, name), args)
    py = outcome(getattr(_fast, name), cases(E, m, n, count)[name])
    assert c == py
    if E > 0xFFFF:  # RFC 5170 4.2.4.1: E is 16 bits; and no product may overflow
        assert c == "ValueError"


@settings(max_examples=300, deadline=None)
@given(name=st.sampled_from(["m2c_ldpc_add_many", "m2c_ldpc_add"]),
       frozen=st.lists(st.booleans(), min_size=4, max_size=4),
       junk=st.sampled_from([None, 0, "x", b"ab"]), where=st.integers(-1, 11),
       E=st.integers(1, 3))
def test_read_only_or_foreign_buffers_raise_the_same_class(name, frozen, junk, where, E):
    """C's PyObject_GetBuffer(PyBUF_WRITABLE) raises BufferError on bytes; the twin
    does too (it raised TypeError); a non-buffer is TypeError in both; checks run
    in the same order, so the first bad argument decides in both."""
    from m2c.fec.ldpc import _graph

    k, n = 3, 9
    g = _graph(k, n, 3, 7)
    m = n - k

    def build():
        mut = [bytearray(g.degrees), bytearray(m * E), bytearray(n * E), bytearray(n)]
        mut = [bytes(b) if f else b for b, f in zip(mut, frozen)]
        last = (u32(0, 4), bytes(2 * E)) if name == "m2c_ldpc_add_many" else (4, bytes(E))
        args = [k, E, g.eq_ptr, g.eq_vars, g.var_ptr, g.var_eqs, *mut, *last]
        if 0 <= where < len(args) and where >= 2:
            args[where] = junk
        return args

    assert outcome(getattr(speedups, name), build()) == outcome(getattr(_fast, name), build())
