"""Every benchmark runs in --quick mode and writes its JSON, so none can rot.

A benchmark module may declare ``REQUIRES = {"root": True, "tools": ["nginx"]}``;
without them the case skips with a reason (a failure under CI=true).

Figures are not checked here (speed is never asserted in a test); only that the
benchmark ran, measured something, and wrote a well-formed result.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.harness import RESULTS, available  # noqa: E402
from deliverykit.testing import require_root, require_tool  # noqa: E402


@pytest.mark.slow
@pytest.mark.parametrize("name", available())
def test_benchmark_quick_mode_runs(name):
    import importlib

    needs = getattr(importlib.import_module(f"bench.bench_{name}"), "REQUIRES", {})
    if needs.get("root"):
        require_root()
    require_tool(*needs.get("tools", ()))
    out = subprocess.run(
        [sys.executable, "-m", "bench.harness", "--quick", name],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads((RESULTS / f"{name}.json").read_text())
    assert result["quick"] is True and result["name"] == name
    assert result["rows"], "a benchmark must measure something"
    assert result["machine"]["cores"] >= 1
    assert f"### {result['title']}" in out.stdout  # the markdown table was printed
