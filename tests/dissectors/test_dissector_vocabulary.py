"""One vocabulary: every scapy field of each wire layer is a registered
Wireshark field ``<proto>.<scapy field name>`` of our Lua dissector, and each
protocol registers its expert items (so malformed input has somewhere to go)."""

from __future__ import annotations

import subprocess

import pytest
from scapy.fields import ConditionalField
from wslua_support import DISSECTORS

from corecast.wire import layers as cc_layers
from m2c.wire import layers as m2c_layers
from swift.wire import layers as pp_layers


def _names(classes) -> set[str]:
    out = set()
    for cls in classes:
        for fld in cls.fields_desc:
            out.add((fld.fld if isinstance(fld, ConditionalField) else fld).name)
    return out


CASES = {
    "ppspp": (["ppspp.lua"], [pp_layers.PPSPP, *pp_layers._MSGS.values(),
                              *pp_layers._OPTS.values()]),
    "corecast": (["corecast.lua"], [cc_layers.CoreCastPayload, cc_layers.CoreCastHeader]),
    "m2c": (["m2c.lua"], [m2c_layers.ExtM2C, m2c_layers.ExtM2CCRC, m2c_layers.ExtFTI]),
}


def _registered(scripts: list[str]) -> tuple[set[str], str]:
    argv = ["tshark", "-G", "fields"]
    for s in scripts:
        argv += ["-X", f"lua_script:{DISSECTORS / s}"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=True)
    assert "Lua Error" not in out.stderr, out.stderr
    names = {line.split("\t")[2] for line in out.stdout.splitlines()
             if line.startswith("F\t") and line.count("\t") >= 3}
    return names, out.stdout


@pytest.mark.tool("tshark")
@pytest.mark.parametrize("proto", sorted(CASES))
def test_every_scapy_field_is_a_wireshark_field(proto):
    scripts, classes = CASES[proto]
    registered, _ = _registered(scripts)
    want = {f"{proto}.{n}" for n in _names(classes)}
    assert want <= registered, sorted(want - registered)
    experts = {n for n in registered if n.startswith(proto + ".")} - want
    assert experts, "no expert items or generated fields registered"


@pytest.mark.tool("tshark")
def test_all_three_load_together():
    registered, _ = _registered(["ppspp.lua", "corecast.lua", "m2c.lua"])
    for proto in CASES:
        assert any(n.startswith(proto + ".") for n in registered)
