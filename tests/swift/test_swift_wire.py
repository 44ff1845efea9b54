"""Codec vs scapy layers (RFC 7574 section 8) and decoder fuzzing."""

import socket

import pytest
from hypothesis import given, settings, strategies as st

from swift.wire import codec as C, layers as L
from swift.wire.constants import ChunkAddressing

CTXS = [C.WireContext(a, h, 64, cs) for a in ChunkAddressing for h in (20, 32)
        for cs in (1024, 0xFFFFFFFF)]


def _msgs(ctx: C.WireContext):
    mx = (1 << 64) - 1 if ctx.wide else (1 << 32) - 1

    def spec(cls, *extra):
        if ctx.is_bin:
            return st.integers(0, mx).flatmap(
                lambda b: st.tuples(*extra).map(lambda e: cls(b, b, *e))
            )
        return st.tuples(st.integers(0, mx), st.integers(0, mx), *extra).map(lambda t: cls(*t))

    u64 = st.integers(0, (1 << 64) - 1)
    opts = st.builds(
        C.HandshakeOptions,
        version=st.none() | st.integers(0, 255),
        min_version=st.none() | st.integers(0, 255),
        swarm_id=st.none() | st.binary(max_size=80),
        integrity=st.none() | st.integers(0, 255),
        hash_func=st.none() | st.integers(0, 255),
        sig_alg=st.none() | st.integers(0, 255),
        addressing=st.none() | st.sampled_from([int(a) for a in ChunkAddressing]),
        discard_window=st.none() | st.integers(0, (1 << 32) - 1),
        supported=st.none() | st.binary(max_size=32),
        chunk_size=st.none() | st.integers(0, (1 << 32) - 1),
    )
    small = st.one_of(
        st.builds(C.Handshake, st.integers(0, (1 << 32) - 1), opts),
        spec(C.Ack, u64),
        spec(C.Have),
        spec(C.Request),
        spec(C.Cancel),
        spec(C.Integrity, st.binary(min_size=ctx.hash_size, max_size=ctx.hash_size)),
        spec(C.SignedIntegrity, u64, st.binary(min_size=64, max_size=64)),
        st.just(C.Choke()),
        st.just(C.Unchoke()),
        st.just(C.PexReq()),
        st.builds(C.PexResV4, st.ip_addresses(v=4).map(str), st.integers(0, 65535)),
        st.builds(
            C.PexResV6,
            st.ip_addresses(v=6).map(lambda a: socket.inet_ntop(socket.AF_INET6, a.packed)),
            st.integers(0, 65535),
        ),
        st.builds(C.PexResCert, st.binary(max_size=300)),
    )
    if ctx.addressing == ChunkAddressing.BYTE64:
        data = st.tuples(st.integers(0, 1 << 40), u64, st.binary(min_size=1, max_size=1500)).map(
            lambda t: C.Data(t[0], t[0] + len(t[2]) - 1, t[1], t[2]))
    else:
        data = spec(C.Data, u64, st.binary(max_size=1500))
    return st.tuples(st.lists(small, max_size=6), st.none() | data).map(
        lambda t: t[0] + ([t[1]] if t[1] is not None else []))


def _fix_data(ctx, msgs):
    """A DATA message is the tail; with fixed chunks it carries one full chunk or less."""
    return msgs


@pytest.mark.parametrize(
    "ctx", CTXS, ids=lambda c: f"{c.addressing.name}-{c.hash_size}-{c.chunk_size}"
)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_codec_and_layers_agree(ctx, data) -> None:
    msgs = data.draw(_msgs(ctx))
    chan = data.draw(st.integers(0, (1 << 32) - 1))
    if msgs and isinstance(msgs[-1], C.Data) and ctx.chunk_size != 0xFFFFFFFF \
            and ctx.addressing != ChunkAddressing.BYTE64 and len(msgs[-1].payload) > ctx.chunk_size:
        d = msgs[-1]
        msgs[-1] = C.Data(d.start, d.end, d.timestamp, d.payload[:ctx.chunk_size])
    for m in msgs:  # discard window width follows the handshake's own CAM (7.9)
        if isinstance(m, C.Handshake) and m.options.discard_window is not None:
            cam = m.options.addressing if m.options.addressing is not None else ctx.addressing
            if cam not in (1, 3, 4):
                assert m.options.discard_window < 1 << 32
    raw = C.encode_datagram(ctx, chan, msgs)
    with L.use_context(ctx):
        assert bytes(L.from_codec(chan, msgs)) == raw
        dec = C.decode_datagram(raw, ctx)
        assert dec.error is None and dec.channel == chan and dec.messages == msgs
        assert L.to_codec(L.PPSPP(raw)) == (chan, msgs)


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=200), st.sampled_from(CTXS))
def test_decoder_fuzz(raw, ctx) -> None:
    try:
        dec = C.decode_datagram(raw, ctx)
    except C.DecodeError:
        assert len(raw) < 4
        return
    assert isinstance(dec, C.Decoded)
    if dec.error is None:  # a clean parse re-encodes to the same bytes
        assert C.encode_datagram(ctx, dec.channel, dec.messages) == raw


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_decoder_fuzz_mutations(data) -> None:
    ctx = data.draw(st.sampled_from(CTXS))
    msgs = data.draw(_msgs(ctx))
    raw = bytearray(C.encode_datagram(ctx, 1, msgs))
    for _ in range(data.draw(st.integers(1, 4))):
        if raw:
            raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(raw)))
    try:
        C.decode_datagram(bytes(raw[:cut]), ctx)
    except C.DecodeError:
        assert cut < 4


def test_rfc_examples() -> None:
    # section 8.2: a HAVE of bin 1 is "0300000001"
    ctx = C.WireContext(ChunkAddressing.BIN32)
    assert C.encode_message(ctx, C.Have(1, 1)).hex() == "0300000001"
    # section 8.16: the closing handshake to channel 8
    ctx = C.WireContext()
    assert (
        C.encode_datagram(ctx, 8, [C.Handshake(0)]).hex() == "00000008" + "00" + "00000000" + "ff"
    )
    # section 8.16: DATA with 32-bit chunk range 0,0 and "Hello world!"
    raw = bytes.fromhex("00000001" "01" "00000000" "00000000" "0004e94180b7db44") + b"Hello world!"
    dec = C.decode_datagram(raw, ctx)
    assert dec.messages == [C.Data(0, 0, 0x0004E94180B7DB44, b"Hello world!")]
    # section 7.10: all but ACK and PEX -> 11011001 11110000
    sup = C.supported_bitmap({0, 1, 3, 4, 7, 8, 9, 10, 11})
    assert sup == bytes([0b11011001, 0b11110000])
    assert C.supported_set(sup) == {0, 1, 3, 4, 7, 8, 9, 10, 11}


def test_unknown_message_stops_parse() -> None:
    ctx = C.WireContext()
    raw = C.encode_datagram(ctx, 3, [C.Have(0, 1)]) + b"\x0e" + C.encode_message(ctx, C.Have(2, 3))
    dec = C.decode_datagram(raw, ctx)
    assert dec.messages == [C.Have(0, 1)] and "unknown" in dec.error
    assert C.decode_datagram(b"\0\0\0\7", ctx).is_keepalive
    with pytest.raises(C.DecodeError):
        C.decode_datagram(b"\0\0", ctx)
