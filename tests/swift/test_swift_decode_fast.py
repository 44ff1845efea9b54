"""The C message scanner (deliverykit/csrc/swift.c ``decode_msgs``) against its
Python twin (swift/_fast.py ``py_decode_msgs``), and decode_raw built on either."""

import pytest
from hypothesis import given, settings, strategies as st

from deliverykit import fastpath
from swift._fast import py_decode_msgs
from swift.wire import codec as C
from swift.wire.constants import ChunkAddressing, HashFunc, SigAlg

c_decode = getattr(fastpath.speedups, "decode_msgs", None)
needs_c = pytest.mark.skipif(c_decode is None, reason="C speedups not built")


def _outcome(f, *args):
    try:
        return f(*args)
    except (ValueError, OverflowError) as exc:
        return type(exc).__name__


@needs_c
@settings(max_examples=600, deadline=None)
@given(st.binary(max_size=300), st.integers(-2, 310), st.integers(-1, 5), st.integers(-1, 70),
       st.integers(-1, 300), st.one_of(st.integers(-5, 2000), st.just(0xFFFFFFFF),
                                       st.just(1 << 64), st.integers(0, (1 << 64) - 1)))
def test_decode_msgs_garbage_same_outcome(data, pos, addressing, hs, sigs, cs) -> None:
    """Arbitrary bytes and arguments: same messages, stop position and error, or
    the same exception class."""
    assert _outcome(c_decode, data, pos, addressing, hs, sigs, cs) == \
        _outcome(py_decode_msgs, data, pos, addressing, hs, sigs, cs)


def _ctx(addressing: int, sha1: bool, sig: int, cs: int) -> C.WireContext:
    sig_alg = (SigAlg.ECDSAP256SHA256, SigAlg.ECDSAP384SHA384, SigAlg.RSASHA256)[sig]
    return C.WireContext.make(
        ChunkAddressing(addressing), HashFunc.SHA1 if sha1 else HashFunc.SHA256, sig_alg, cs
    )


def _spec(ctx: C.WireContext, draw) -> tuple[int, int]:
    top = 0xFFFFFFFF if not ctx.wide else (1 << 64) - 1
    a = draw(st.integers(0, top))
    if ctx.is_bin:
        return a, a
    return a, draw(st.integers(a, min(top, a + 5000)))


@st.composite
def _datagram(draw):
    ctx = _ctx(draw(st.integers(0, 4)), draw(st.booleans()), draw(st.integers(0, 2)),
               draw(st.sampled_from([1024, 16, 8192, 0xFFFFFFFF])))
    msgs = []
    for _ in range(draw(st.integers(0, 6))):
        k = draw(st.sampled_from(["data", "ack", "have", "int", "sig", "req", "cancel", "choke",
                                  "unchoke", "pexreq", "pex4", "hs"]))
        if k == "data":
            if ctx.addressing == ChunkAddressing.BYTE64:
                s = draw(st.integers(0, 1 << 40))
                ln = draw(st.integers(1, 40))
                msgs.append(C.Data(s, s + ln - 1, draw(st.integers(0, (1 << 64) - 1)), bytes(ln)))
            else:
                s, e = _spec(ctx, draw)
                n = ctx.chunk_size if ctx.chunk_size != 0xFFFFFFFF else draw(st.integers(0, 50))
                n = min(n, 64)
                msgs.append(
                    C.Data(
                        s,
                        e,
                        draw(st.integers(0, (1 << 64) - 1)),
                        draw(st.binary(min_size=n, max_size=n)),
                    )
                )
                if ctx.chunk_size != n:
                    break  # a short or variable-size chunk takes the rest of the datagram
        elif k == "ack":
            msgs.append(C.Ack(*_spec(ctx, draw), draw(st.integers(0, (1 << 64) - 1))))
        elif k == "have":
            msgs.append(C.Have(*_spec(ctx, draw)))
        elif k == "int":
            msgs.append(C.Integrity(*_spec(ctx, draw), draw(st.binary(min_size=ctx.hash_size,
                                                                       max_size=ctx.hash_size))))
        elif k == "sig":
            msgs.append(C.SignedIntegrity(*_spec(ctx, draw), draw(st.integers(0, (1 << 64) - 1)),
                                          bytes(ctx.sig_size)))
        elif k == "req":
            msgs.append(C.Request(*_spec(ctx, draw)))
        elif k == "cancel":
            msgs.append(C.Cancel(*_spec(ctx, draw)))
        elif k == "choke":
            msgs.append(C.Choke())
        elif k == "unchoke":
            msgs.append(C.Unchoke())
        elif k == "pexreq":
            msgs.append(C.PexReq())
        elif k == "pex4":
            msgs.append(C.PexResV4("10.1.2.3", draw(st.integers(0, 65535))))
        else:
            msgs.append(C.Handshake(draw(st.integers(1, 0xFFFFFFFF)),
                                    C.HandshakeOptions(version=1, chunk_size=1024)))
    return ctx, msgs


@needs_c
@settings(max_examples=400, deadline=None)
@given(_datagram(), st.integers(0, 40))
def test_decode_raw_c_equals_python_on_valid_datagrams(dg, cut) -> None:
    """Encoded datagrams (whole, and cut short): decode_raw gives the same
    5-tuples and errors with the C scanner and with its twin, and a whole
    datagram decodes back to its messages."""
    ctx, msgs = dg
    raw = C.encode_datagram(ctx, 7, msgs)
    for data in (raw, raw[:max(4, len(raw) - cut)]):
        c_res = C.decode_raw(data, ctx)
        saved = C.decode_msgs
        try:
            C.decode_msgs = py_decode_msgs
            py_res = C.decode_raw(data, ctx)
        finally:
            C.decode_msgs = saved
        assert c_res == py_res
        a = int(ctx.addressing)
        assert c_decode(data, 4, a, ctx.hash_size, ctx.sig_size, ctx.chunk_size) == \
            py_decode_msgs(data, 4, a, ctx.hash_size, ctx.sig_size, ctx.chunk_size)
    dec = C.decode_datagram(raw, ctx)
    assert dec.error is None and dec.channel == 7
    assert dec.messages == msgs


def test_decode_msgs_stops_at_messages_left_to_python() -> None:
    """HANDSHAKE, PEX_RES* and unknown types end the scan at their type octet,
    with no error: decode_raw parses them (both implementations)."""
    ctx = C.WireContext()
    have = C.encode_message(ctx, C.Have(1, 2))
    hs = C.encode_message(ctx, C.Handshake(5, C.HandshakeOptions(version=1)))
    data = b"\0\0\0\1" + have + hs + have
    for f in filter(None, (c_decode, py_decode_msgs)):
        msgs, pos, err = f(data, 4, 2, 32, 64, 1024)
        assert msgs == [(3, 1, 2, None, None)] and pos == 4 + len(have) and err is None
        assert f(data + b"\x0e", 4 + len(have) + len(hs) + len(have), 2, 32, 64, 1024)[1:] == \
            (len(data), None)
    ch, out, err = C.decode_raw(data + b"\x0e", ctx)
    assert [m[0] for m in out] == [3, 0, 3] and err == "unknown message type 14"
