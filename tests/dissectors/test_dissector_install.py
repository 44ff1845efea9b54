"""dissectors/README.md: installed into the personal Lua plugins folder, all
three load together and decode without -X (a HOME of our own, so the user's
real Wireshark configuration is never touched)."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from scapy.layers.inet import IP, UDP
from scapy.packet import Raw
from scapy.utils import wrpcap
from wslua_support import DISSECTORS, scratch

from corecast.wire import codec as cc_codec
from m2c.wire import codec as m2c_codec
from swift.wire import codec as pp_codec


@pytest.mark.tool("tshark")
def test_personal_plugins_folder_install():
    with scratch() as home:
        plugins = home / ".local" / "lib" / "wireshark" / "plugins"
        plugins.mkdir(parents=True)
        for f in ("ppspp.lua", "corecast.lua", "m2c.lua"):
            shutil.copy(DISSECTORS / f, plugins / f)
        env = {**os.environ, "HOME": str(home), "LC_ALL": "C"}
        listed = subprocess.run(["tshark", "-G", "plugins"], capture_output=True, text=True,
                                env=env, timeout=60, check=True).stdout
        for f in ("ppspp.lua", "corecast.lua", "m2c.lua"):
            assert f"{plugins / f}" in listed
        pkts = [
            IP(src="127.0.0.1", dst="127.0.0.1") / UDP(sport=40000, dport=6778)
            / Raw(pp_codec.encode_datagram(pp_codec.WireContext(), 5, [pp_codec.Choke()])),
            IP(src="127.0.0.1", dst="127.0.0.1") / UDP(sport=54341, dport=54341)
            / Raw(cc_codec.encode_cc_payload(1, b"chunk")),
            IP(src="127.0.0.1", dst="239.1.2.3") / UDP(sport=40001, dport=47000)
            / Raw(m2c_codec.encode(m2c_codec.AlcPacket(1, 1, 3, 2, 0, 7, 0, 0, 0, 0, b"s"))),
        ]
        wrpcap(str(home / "c.pcap"), pkts)
        out = subprocess.run(["tshark", "-r", str(home / "c.pcap"), "-T", "fields",
                              "-e", "frame.protocols"], capture_output=True, text=True,
                             env=env, timeout=60, check=True)
    assert "Lua Error" not in out.stdout + out.stderr
    protos = out.stdout.split()
    assert protos[0].endswith(":ppspp")
    assert ":corecast" in protos[1]  # (then the corecast.payload table: rtp/data)
    assert ":alc" in protos[2] and "m2c" in protos[2]


@pytest.mark.tool("tshark")
def test_decode_as_on_any_port():
    """`-d udp.port==N,<proto>` (Analyze > Decode As) with the heuristics off."""
    pkts = [
        IP(src="127.0.0.1", dst="127.0.0.1") / UDP(sport=50001, dport=50000)
        / Raw(pp_codec.encode_datagram(pp_codec.WireContext(), 5, [pp_codec.Unchoke()])),
        IP(src="127.0.0.1", dst="127.0.0.1") / UDP(sport=50002, dport=50003)
        / Raw(cc_codec.encode_cc_header(1, bytes(20), bytes(4), 80)),
        IP(src="127.0.0.1", dst="239.1.2.3") / UDP(sport=50004, dport=50005)
        / Raw(m2c_codec.encode(m2c_codec.AlcPacket(1, 1, 3, 2, 0, 7, 0, 0, 0, 0, b"s"))),
    ]
    argv = ["tshark"]
    for f in ("ppspp.lua", "corecast.lua", "m2c.lua"):
        argv += ["-X", f"lua_script:{DISSECTORS / f}"]
    for h in ("ppspp_udp", "corecast_udp", "m2c_udp"):
        argv += ["--disable-heuristic", h]
    argv += ["-d", "udp.port==50000,ppspp", "-d", "udp.port==50003,corecast",
             "-d", "udp.port==50005,m2c", "-T", "fields", "-e", "frame.protocols"]
    with scratch() as d:
        wrpcap(str(d / "c.pcap"), pkts)
        out = subprocess.run([*argv, "-r", str(d / "c.pcap")], capture_output=True, text=True,
                             timeout=60, check=True)
    assert "Lua Error" not in out.stdout + out.stderr
    protos = out.stdout.split()
    assert protos[0].endswith(":ppspp") and protos[1].endswith(":corecast")
    assert ":m2c:alc" in protos[2]
