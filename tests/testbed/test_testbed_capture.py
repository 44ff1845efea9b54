"""Capture: tcpdump is listening before the body runs and the pcap holds exactly what was sent."""

from __future__ import annotations

import socket

import pytest

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
        assert cap.captured == 25
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
