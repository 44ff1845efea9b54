"""Capture: tcpdump is listening before the body runs and the pcap holds exactly what was sent."""

from __future__ import annotations

import socket
import struct

import pytest
from hypothesis import given, settings, strategies as st

from deliverykit.testbed import Testbed, TestbedError, read_pcap


def blast(dst: str, port: int, count: int) -> int:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for i in range(count):
        s.sendto(b"dk" + i.to_bytes(4, "big"), (dst, port))
    return count


@pytest.mark.root
@pytest.mark.tool("tcpdump")
def test_capture_holds_every_frame_sent_in_the_body(tmp_path) -> None:
    path = tmp_path / "b.pcap"
    with Testbed() as tb:
        a, b = tb.host("a"), tb.host("b")
        link = tb.link(a, b, "10.0.1.1/24", "10.0.1.2/24")
        with tb.capture(b, link.b, path, filter="udp port 7200") as cap:
            tb.run(a, blast, "10.0.1.2", 7200, 25)  # the very first frame must be in the file
        assert cap.captured == 25, cap.stderr
        frames = read_pcap(path)
        assert [f[42:48] for _, f in frames] == [b"dk" + i.to_bytes(4, "big") for i in range(25)]
        with pytest.raises(TestbedError, match="tcpdump"):
            with tb.capture(b, "no-such-if", tmp_path / "x.pcap"):
                pass


def test_read_pcap_rejects_other_files(tmp_path) -> None:
    bad = tmp_path / "bad.pcap"
    bad.write_bytes(b"\x00" * 40)
    with pytest.raises(TestbedError):
        read_pcap(bad)


@settings(deadline=None)  # file writes on a loaded VM can exceed the default 200 ms
@given(st.binary(max_size=300))
def test_read_pcap_fuzz(tmp_path_factory, blob: bytes) -> None:
    """Arbitrary bytes, with or without a pcap magic in front: records or TestbedError."""
    path = tmp_path_factory.mktemp("fuzz") / "x.pcap"
    for data in (blob, b"\xd4\xc3\xb2\xa1" + blob, b"\xa1\xb2\x3c\x4d" + blob):
        path.write_bytes(data)
        try:
            records = read_pcap(path)
        except TestbedError:
            continue
        assert all(isinstance(ts, float) and isinstance(f, bytes) for ts, f in records)
        assert sum(16 + len(f) for _, f in records) <= len(data) - 24


def test_read_pcap_known_file(tmp_path) -> None:
    header = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
    rec = struct.pack("<IIII", 10, 500000, 3, 3) + b"abc"
    (tmp_path / "k.pcap").write_bytes(header + rec + rec[:10])  # last record cut short
    assert read_pcap(tmp_path / "k.pcap") == [(10.5, b"abc")]
