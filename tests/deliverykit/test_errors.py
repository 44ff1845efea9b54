"""deliverykit.errors: one hierarchy, and every package's decoder raises into it."""

from __future__ import annotations

import pytest

from deliverykit import errors as E


def test_hierarchy_separates_remote_from_local_faults() -> None:
    assert issubclass(E.ProtocolError, ValueError)
    assert issubclass(E.RemoteProtocolError, E.ProtocolError)
    assert issubclass(E.LocalProtocolError, E.ProtocolError)
    assert issubclass(E.DecodeError, E.RemoteProtocolError)
    assert not issubclass(E.LocalProtocolError, E.RemoteProtocolError)
    assert not issubclass(E.RemoteProtocolError, E.LocalProtocolError)
    assert not issubclass(E.DecodeError, E.LocalProtocolError)


def test_package_decode_errors_join_the_hierarchy() -> None:
    from corecast.wire import codec as cc_codec, ip as cc_ip, lispctl
    from m2c.fec import DecodeError as FecDecodeError
    from m2c.fec.errors import DecodeError as M2cDecodeError
    from m2c.wire.codec import DecodeError as M2cWireDecodeError
    from swift.wire.codec import DecodeError as SwiftDecodeError

    assert FecDecodeError is M2cDecodeError is M2cWireDecodeError
    assert cc_codec.DecodeError is cc_ip.DecodeError is lispctl.DecodeError
    for cls in (cc_codec.DecodeError, M2cDecodeError, SwiftDecodeError):
        assert issubclass(cls, E.DecodeError), cls
        assert issubclass(cls, ValueError), cls


GARBAGE = [b"", b"\x01", b"\xff\xff\xff", b"\x00" * 3]


@pytest.mark.parametrize("data", GARBAGE)
def test_corecast_decoders_raise_a_decode_error_on_garbage(data: bytes) -> None:
    from corecast.wire.codec import decode_cc, decode_ip, decode_lisp_data
    from corecast.wire.lispctl import decode_control

    for decode in (decode_cc, decode_ip, decode_lisp_data, decode_control):
        with pytest.raises(E.DecodeError):
            decode(data)


@pytest.mark.parametrize("data", GARBAGE)
def test_m2c_decoders_raise_a_decode_error_on_garbage(data: bytes) -> None:
    from m2c.fec.payload_id import decode_ext_fti
    from m2c.wire.codec import decode

    with pytest.raises(E.DecodeError):
        decode(data)
    with pytest.raises(E.DecodeError):
        decode_ext_fti(data)


@pytest.mark.parametrize("data", GARBAGE)
def test_swift_decoder_raises_a_decode_error_on_garbage(data: bytes) -> None:
    from swift.wire.codec import WireContext, decode_raw

    with pytest.raises(E.DecodeError):
        decode_raw(data, WireContext())
