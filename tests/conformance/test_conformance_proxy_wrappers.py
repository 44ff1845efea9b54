"""The example proxy wrappers (nginx, Varnish, Squid): a request goes through to the upstream,
and on SIGTERM the proxy's processes are reaped and its temporary directory is removed."""

from __future__ import annotations

import glob
import os
import tempfile
from pathlib import Path

import pytest

from deliverykit.conformance import load_registry
from vmc.conformance.harness import RecordingUpstream, fetch, free_port

_WRAPPER_TOOLS = (
    ("nginx-plain", "nginx", "conformance-nginx-"),
    ("nginx-cache-lock", "nginx", "conformance-nginx-"),
    ("varnish", "varnishd", "conformance-varnish-"),
    ("squid-collapsed", "squid", "conformance-squid-"),
)
WRAPPERS = [pytest.param(name, prefix, id=name, marks=pytest.mark.tool(tool))
            for name, tool, prefix in _WRAPPER_TOOLS]


def _processes_mentioning(text: str) -> list[str]:
    out = []
    for cmdline in glob.glob("/proc/[0-9]*/cmdline"):
        try:
            args = Path(cmdline).read_bytes().split(b"\0")
        except OSError:
            continue
        if any(text.encode() in a for a in args):
            out.append(b" ".join(args).decode(errors="replace"))
    return out


@pytest.mark.parametrize("name,prefix", WRAPPERS)
def test_wrapper_proxies_then_cleans_up(name, prefix):
    impl = load_registry()[name]
    before = set(glob.glob(os.path.join(tempfile.gettempdir(), prefix + "*")))
    with RecordingUpstream() as up:
        port = free_port()
        with impl.start("proxy", "--listen", f"127.0.0.1:{port}", "--upstream", up.authority,
                        ready_line="READY", ready_timeout=20) as proc:
            work = set(glob.glob(os.path.join(tempfile.gettempdir(), prefix + "*"))) - before
            assert len(work) == 1, f"{name}: temporary directories {work}"
            (workdir,) = work
            r = fetch(("127.0.0.1", port), "/through/the/proxy?x=1", timeout=10)
            assert r.status == 200 and r.complete and r.body == b"ok", (r.status, r.error)
            assert any(t.startswith("/through/the/proxy") for t, _, _ in up.snapshot()[0])
            assert _processes_mentioning(workdir), f"{name}: no process runs from {workdir}"
        assert proc.returncode is not None
    assert not os.path.exists(workdir), f"{name}: {workdir} left behind"
    left = _processes_mentioning(workdir)
    assert not left, f"{name}: still running: {left}"
