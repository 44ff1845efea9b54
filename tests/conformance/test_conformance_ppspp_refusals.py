"""A reply the suite cannot decode is reported as a decode failure, never as the refusal a case
expects.

Found with PyPPSPP (an RFC 7574 research peer): it answers a HANDSHAKE with one carrying an
unassigned option 10, which our codec cannot parse past; the refusal case counted that as "not
accepted" and passed, although the peer had in fact accepted a random swarm ID and SHA-512.

An accepting HANDSHAKE is recognised by the fixed fields that precede its options (destination
channel, type 0, a non-zero channel ID), so an accepting reply with undecodable options is
reported as an acceptance (naming what could not be decoded); any other undecodable reply as a
decode failure.

Here the implementation under test is a real UDP peer written below, run through the
conformance plugin like any other: it answers every HANDSHAKE with an *accepting* HANDSHAKE
that carries option 10 (``option10``), with bytes that are no PPSPP at all after the channel
ID (``garbage``), or not at all (``silent``, the control: a true refusal by silence still
passes).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PEER = textwrap.dedent('''
    """seed FILE --port P: a PPSPP 'seeder' that answers every HANDSHAKE as $MODE says."""
    import os, socket, struct, sys
    args = sys.argv[1:]
    if args[:1] != ["seed"]:
        sys.exit(127)
    port = int(args[args.index("--port") + 1])
    mode = os.environ["REPLY_MODE"]
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", port))
    print("READY " + "00" * 32, flush=True)
    while True:
        data, addr = s.recvfrom(65536)
        # a HANDSHAKE initiation: channel 0, type 0, the sender's channel ID (RFC 7574 sec. 8.4)
        if len(data) < 9 or data[:4] != bytes(4) or data[4] != 0 or mode == "silent":
            continue
        theirs = data[5:9]
        if mode == "garbage":
            s.sendto(theirs + bytes([0xEE]) + os.urandom(20), addr)
        else:  # accept: our channel, version 1, then the unassigned option 10 (as PyPPSPP sends it)
            ours = struct.pack(">I", 0x5EED)
            s.sendto(theirs + bytes([0]) + ours + bytes([0, 1, 1, 1, 10, 0, 0xFF]), addr)
''')


@pytest.mark.slow
def test_undecodable_replies_are_decode_failures_not_refusals(tmp_path):
    peer = tmp_path / "peer.py"
    peer.write_text(PEER)
    registry = tmp_path / "registry.json"
    registry.write_text(json.dumps({"implementations": [
        {"name": mode, "protocol": "ppspp", "roles": ["seeder"], "command": f"{{python}} {peer}",
         "env": {"REPLY_MODE": mode}} for mode in ("option10", "garbage", "silent")]}))
    out = tmp_path / "results.json"
    cp = subprocess.run(
        [sys.executable, "-m", "pytest", "--conformance", "ppspp", "--impl-registry", str(registry),
         "--impl", "option10", "--impl", "garbage", "--impl", "silent", "-k", "refuses",
         "--conformance-json", str(out), "-p", "no:cacheprovider", "-q"],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.exists(), cp.stdout[-3000:] + cp.stderr[-3000:]
    rows = {r["case"].split("::")[1]: r for r in json.loads(out.read_text())["results"]}
    expect = {"option10": "accepted", "garbage": "decode failure, not a refusal"}
    for mode, words in expect.items():
        for name in (f"test_refuses_unknown_swarm_and_mismatched_options[{mode}]",
                     f"test_refuses_unsupported_versions[{mode}-2-2]",
                     f"test_refuses_another_chunk_addressing_method[{mode}-bin32]"):
            row = rows[name]
            assert row["result"] == "fail", f"{name}: {row['result']} ({cp.stdout[-2000:]})"
            assert words in row["message"], row["message"]
    # the accepting HANDSHAKE is recognised by its fixed head; the undecodable rest is named
    case = "test_refuses_unknown_swarm_and_mismatched_options"
    assert "unknown option 10" in rows[f"{case}[option10]"]["message"]
    assert rows[f"{case}[silent]"]["result"] == "pass", cp.stdout[-2000:]
