"""tshark with dissectors/m2c.lua reads the LCT CCI as the M2C CCI (WEBRC-like,
docs/wire-m2c.md): slot mod 256 | group | PSN mod 2^16, the same values the codec
wrote, through the UDP port preference and through Wireshark's own ALC
(postdissector path); a CCI that disagrees with EXT_M2C is flagged."""

from __future__ import annotations

import json
import struct
import subprocess
import zlib
from pathlib import Path

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw
from scapy.utils import wrpcap

from m2c.wire import codec

LUA = Path(__file__).resolve().parents[2] / "dissectors" / "m2c.lua"
PORT = 41003

PACKETS = [codec.AlcPacket(0xBEEF, 0, 3, 1000 + g, g, 70000 + g, 4, 0, 0, g, b"\x05" * 8)
           for g in (0, 1, 128, 255)]


def _broken_cci(wire: bytes) -> bytes:
    """The packet with another group in the CCI and a CRC that matches again."""
    b = bytearray(wire)
    b[5] ^= 0x01
    crc_at = b.index(bytes([121, 2])) + 4  # EXT_M2C_CRC: HET 121, HEL 2
    b[crc_at:crc_at + 4] = b"\0\0\0\0"
    struct.pack_into("!I", b, crc_at, zlib.crc32(bytes(b)))
    return bytes(b)


def _tshark(pcap: Path, *opts: str) -> list[dict]:
    out = subprocess.run(
        ["tshark", "-X", f"lua_script:{LUA}", "-r", str(pcap), *opts, "-T", "json",
         "-e", "m2c.cci", "-e", "m2c.cci_slot", "-e", "m2c.cci_group", "-e", "m2c.cci_psn",
         "-e", "m2c.group", "-e", "_ws.expert.message"],
        capture_output=True, text=True, timeout=120, check=True)
    assert "Lua Error" not in out.stderr, out.stderr
    return [r["_source"]["layers"] for r in json.loads(out.stdout)]


@pytest.mark.tool("tshark")
@pytest.mark.parametrize("how", ["port", "postdissector"])
def test_lua_reads_the_m2c_cci(tmp_path, how):
    wires = [codec.encode(p) for p in PACKETS]
    wires.append(_broken_cci(wires[-1]))
    with pytest.raises(codec.DecodeError, match="CCI"):
        codec.decode(wires[-1])
    pcap = tmp_path / "cci.pcap"
    wrpcap(str(pcap), [Ether() / IP(src="127.0.0.1", dst="239.255.7.1")
                       / UDP(sport=41000, dport=PORT) / Raw(w) for w in wires])
    opts = (("-o", f"m2c.udp_ports:{PORT}") if how == "port" else
            ("-o", "m2c.udp_ports:", "--disable-heuristic", "m2c_udp",
             "-d", f"udp.port=={PORT},alc"))
    rows = _tshark(pcap, *opts)
    assert len(rows) == len(wires)
    for p, w, r in zip(PACKETS, wires, rows):
        assert int(r["m2c.cci"][0], 0) == int.from_bytes(w[4:8], "big")
        assert r["m2c.cci_slot"] == [str(p.slot % 256)]
        assert r["m2c.cci_group"] == [str(p.group)] == r["m2c.group"]
        assert r["m2c.cci_psn"] == [str(p.psn % 65536)]
        assert not any("CCI" in m for m in r.get("_ws.expert.message", []))
    last = rows[-1]
    assert last["m2c.cci_group"] == ["254"] and last["m2c.group"] == ["255"]
    assert any("CCI" in m for m in last.get("_ws.expert.message", [])), last
