"""A busy unicast port is an error, never a silent share (issue 13, item 3, m2c part).

The sender's socket is unicast (its interface address, a port the kernel picks):
with SO_REUSEADDR the kernel would hand it a port another role already holds
with SO_REUSEADDR, and unicast datagrams for that role could go to the m2c
sender instead.  In a network namespace whose ephemeral range is one port,
held by such a role, ``m2c send`` must fail with one line and exit 1.  The
``--serve-sdp`` TCP port: tests/m2c/test_m2c_send_cli.py::test_busy_serve_sdp_port_is_named.
Receivers of one group share its port on purpose (SO_REUSEADDR on the group
address): two receivers on one host both complete (python -m m2c.demo,
tests/m2c/test_m2c_loopback.py).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

SCRIPT = r"""
import json, socket, subprocess, sys
subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
with open("/proc/sys/net/ipv4/ip_local_port_range", "w") as f:
    f.write("40000 40000")  # this namespace's ephemeral range: one port
role = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)  # another role, holding it
role.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
role.bind(("127.0.0.1", 40000))
r = subprocess.run([sys.executable, "-m", "m2c", "send", sys.argv[1], "--sdp", sys.argv[2],
                    "--duration", "0.5"], capture_output=True, text=True, timeout=60)
print(json.dumps({"rc": r.returncode, "stderr": r.stderr}))
"""


@pytest.mark.root
@pytest.mark.tool("unshare")
def test_sender_never_shares_a_busy_unicast_port(tmp_path):
    src = tmp_path / "f.bin"
    src.write_bytes(b"x" * 5000)
    sdp = tmp_path / "s.json"
    # a new network namespace of its own (unshare -n): no route out, gone when it exits
    r = subprocess.run(["unshare", "-n", sys.executable, "-c", SCRIPT, str(src), str(sdp)],
                       capture_output=True, text=True, timeout=90, check=False)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["rc"] == 1, got["stderr"]
    lines = got["stderr"].strip().splitlines()
    assert len(lines) == 1 and "Address already in use" in lines[0], lines
    assert "Traceback" not in got["stderr"]
    assert not sdp.exists()
