"""The paper's Fig. 1 in namespaces: unmodified clients, nftables REDIRECT to the proxy,
tbf-shaped origin link."""

from __future__ import annotations

from pathlib import Path

import pytest
from vmc_support import engine_args


@pytest.mark.root
@pytest.mark.tool("nginx")
@pytest.mark.tool("nft")
@pytest.mark.tool("curl")
@pytest.mark.slow
def test_transparent_vmc_router_saves_origin_bytes(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import tempfile

    from vmc.experiments.testbed import run

    # the run's temporary files in a folder of this test's own, to see that it cleans up
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    res = run(quick=True, scenario="high-vhigh", n=40, link_mbit=40.0)
    assert not list(tmp_path.glob("vmc-www-*")), "the run left the origin's files behind"
    normal, vmc = res["normal"], res["vmc"]
    assert normal["failed"] == 0 and vmc["failed"] == 0
    # Every request reached nginx directly in the Normal arm; the VMC arm went through the proxy
    # without the clients knowing (they addressed the origin): the proxy counted joins.
    assert vmc["proxy"] is not None and vmc["proxy"]["joins"] >= 1
    assert vmc["origin_body_MB"] < normal["origin_body_MB"]
    assert vmc["origin_link_MB"] < normal["origin_link_MB"]
    assert res["table2"]["bandwidth %"] > 0
    assert vmc["proxy"]["transparent"] >= 40  # every request was routed by its original destination


@pytest.mark.root
@pytest.mark.tool("nft")
@pytest.mark.tool("curl")
def test_transparent_mode_goes_only_to_the_original_destination() -> None:
    """A REDIRECTed connection is served from its original destination; Host cannot steer it
    elsewhere."""
    import subprocess
    import sys

    from deliverykit.testbed import Testbed
    from vmc.aio.origin import expected
    from vmc.experiments.testbed import C_IP, NFT_RULES, O_IP, PROXY_PORT, R_C_IP, R_O_IP

    O6 = "fd61:2::2"
    with Testbed(prefix="vmct") as tb:
        c, r, o = tb.host("c"), tb.host("r", forwarding=True), tb.host("o")
        l1 = tb.link(c, r, f"{C_IP}/24", f"{R_C_IP}/24")
        l2 = tb.link(r, o, f"{R_O_IP}/24", f"{O_IP}/24")
        tb.route(c, "default", via=R_C_IP)
        tb.route(o, "default", via=R_O_IP)
        tb.address(c, l1.a, "fd61:1::1/64")
        tb.address(r, l1.b, "fd61:1::2/64")
        tb.address(r, l2.a, "fd61:2::1/64")
        tb.address(o, l2.b, f"{O6}/64")
        tb.route(c, "default", via="fd61:1::2")
        tb.route(o, "default", via="fd61:2::1")
        tb.sysctl(r, "net.ipv6.conf.all.forwarding", "1")
        origin = tb.popen(o, [sys.executable, "-m", "vmc", "origin", "--listen", f"{O_IP}:80"],
                          stdout=subprocess.PIPE, text=True)
        assert "vmc origin" in origin.stdout.readline()
        origin6 = tb.popen(o, [sys.executable, "-m", "vmc", "origin", "--listen", f"[{O6}]:80"],
                           stdout=subprocess.PIPE, text=True)
        assert "vmc origin" in origin6.stdout.readline()
        proxy = tb.popen(r, [sys.executable, "-m", "vmc", "proxy",
                             "--listen", f"0.0.0.0:{PROXY_PORT}", "--upstream", f"{O_IP}:80",
                             "--transparent", "--status-allow", "10.61.0.0/16", *engine_args()],
                         stdout=subprocess.PIPE, text=True)
        assert "vmc proxy" in proxy.stdout.readline()
        proxy6 = tb.popen(r, [sys.executable, "-m", "vmc", "proxy",
                              "--listen", f"[::]:{PROXY_PORT}", "--upstream", f"[{O6}]:80",
                              "--transparent", "--status-allow", "fd61::/16", *engine_args()],
                          stdout=subprocess.PIPE, text=True)
        assert "vmc proxy" in proxy6.stdout.readline()
        assert tb.exec(r, ["nft", "-f", "-"], input=NFT_RULES).returncode == 0
        ok = tb.exec(c, ["curl", "-sS", "-D", "-", "-o", "/dev/null", f"http://{O_IP}/t.bin?size=5000"])
        assert ok.returncode == 0 and ok.stdout.startswith("HTTP/1.1 200")
        assert "1.1 vmc" in ok.stdout.lower()
        body = subprocess.run(["ip", "netns", "exec", c.ns, "curl", "-sS", f"http://{O_IP}/t.bin?size=5000"],
                              capture_output=True, timeout=30).stdout
        assert body == expected("/t.bin", 5000)
        # Aimed at the router itself (port 80, redirected too) with an allowed Host: refused.
        bad = tb.exec(c, ["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}",
                          "-H", f"Host: {O_IP}", f"http://{R_C_IP}/t.bin?size=5000"])
        assert bad.stdout == "403"
        st = tb.exec(c, ["curl", "-sS", f"http://{R_C_IP}:{PROXY_PORT}/_vmc/status"])
        assert '"transparent": 3' in st.stdout
        # The same over IPv6 (IP6T_SO_ORIGINAL_DST): an ip6 nat table and v6 addresses.
        ok6 = tb.exec(r, ["nft", "-f", "-"],
                      input=NFT_RULES.replace("table ip vmc", "table ip6 vmc6"))
        assert ok6.returncode == 0, ok6.stderr
        v6 = tb.exec(c, ["curl", "-sS", "-g", "-o", "/dev/null", "-w", "%{http_code}",
                         f"http://[{O6}]/t6.bin?size=700"])
        assert v6.stdout == "200", v6.stderr
        st = tb.exec(c, ["curl", "-sS", "-g", f"http://[fd61:1::2]:{PROXY_PORT}/_vmc/status?recent=1"])
        assert '"transparent": 1' in st.stdout and f"http://[{O6}]/t6.bin" in st.stdout
