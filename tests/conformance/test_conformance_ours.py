"""CI proof: the conformance suite, run through the plugin against our own implementations.

Each protocol's cases run in a pytest subprocess (``--conformance P --impl
ours-P``), our implementation started as external processes by the plugin,
exactly as someone else's would be. Every case must pass (findings are
properties, not failures). A deliberately broken implementation must fail, so
the cases can fail.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run_suite(tmp_path: Path, *args: str, timeout: float = 600) -> tuple[subprocess.CompletedProcess, dict, ET.ElementTree]:
    out, junit = tmp_path / "results.json", tmp_path / "junit.xml"
    cp = subprocess.run(
        [sys.executable, "-m", "pytest", *args, "--conformance-json", str(out), "--junitxml", str(junit),
         "-p", "no:cacheprovider", "-q", "-rfEs"],
        cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    assert out.exists(), cp.stdout[-3000:] + cp.stderr[-3000:]
    return cp, json.loads(out.read_text()), ET.parse(junit)


def _assert_all_pass(cp, res) -> None:
    bad = [r for r in res["results"] if r["result"] != "pass"]
    assert not bad, f"{bad}\n{cp.stdout[-4000:]}"
    assert cp.returncode == 0, cp.stdout[-4000:]


@pytest.mark.slow
def test_fec_suite_passes_on_ours(tmp_path):
    cp, res, _ = run_suite(tmp_path, "--conformance", "fec", "--impl", "ours-fec")
    _assert_all_pass(cp, res)
    assert res["counts"]["pass"] >= 30
    sections = {r["section"] for r in res["results"]}
    assert any("RFC 5170" in s for s in sections) and any("RFC 5510" in s for s in sections)


MUTANT = textwrap.dedent('''
    import subprocess, sys
    args = sys.argv[1:]
    if args[1:2] == ["rs"]:
        sys.exit(127)                               # claims no RS support
    cp = subprocess.run([sys.executable, "-m", "m2c.conformance.adapter", *args],
                        input=sys.stdin.buffer.read(), capture_output=True)
    out = bytearray(cp.stdout)
    if args[0] == "encode" and len(out) > 3:
        out[-1] ^= 0x01                             # a bit slip in the last repair symbol
    if args[0] == "decode" and cp.returncode == 1:
        out = bytearray(int(args[2]) * int(args[-1]))   # "decodes" to zeros instead of giving up
        cp.returncode = 0
    sys.stdout.buffer.write(out)
    sys.exit(cp.returncode)
''')


@pytest.mark.slow
def test_fec_suite_catches_a_broken_implementation(tmp_path):
    script = tmp_path / "mutant.py"
    script.write_text(MUTANT)
    cp, res, junit = run_suite(tmp_path, "--conformance", "fec", "--impl-cmd", f"{sys.executable} {script}",
                               "--impl-protocol", "fec", "--impl-name", "mutant",
                               "-k", "repair_symbols_bit_identical or too_few or rs_any or rs_repair")
    by = {}
    for r in res["results"]:
        by.setdefault(r["case"].split("::")[1].split("[")[0], set()).add(r["result"])
    assert by["test_ldpc_repair_symbols_bit_identical"] == {"fail"}
    assert by["test_ldpc_too_few_symbols_fails_cleanly"] == {"fail"}
    assert by["test_rs_repair_matches_zfec"] == {"unsupported"}
    assert by["test_rs_any_k_symbols_decode"] == {"unsupported"}
    assert cp.returncode == 1
    props = {(p.get("name"), p.get("value")) for p in junit.iter("property")}
    assert ("implementation", "mutant") in props
