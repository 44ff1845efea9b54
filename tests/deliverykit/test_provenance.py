"""deliverykit.provenance: the commit is the package's own tree's, wherever the run starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import deliverykit
from deliverykit.provenance import git_commit, run_metadata

ROOT = Path(deliverykit.__file__).resolve().parents[1]


def test_commit_of_the_source_tree_from_any_directory(tmp_path):
    if subprocess.run(["git", "-C", str(ROOT), "rev-parse"], capture_output=True).returncode:
        import pytest
        pytest.skip("not running from a git checkout")
    want = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
    code = ("import json, deliverykit.provenance as p, vmc; "
            "print(json.dumps(p.run_metadata('vmc', n=3)))")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                         check=True, env={**os.environ, "PYTHONPATH": str(ROOT)}).stdout
    meta = json.loads(out)
    assert meta["commit"].split("+")[0] == want
    assert meta["params"] == {"n": 3} and meta["package"] == "vmc" and meta["cpus"] >= 1


def test_outside_git_there_is_no_commit(tmp_path):
    assert git_commit(tmp_path) is None
    assert run_metadata("not-imported")["commit"] is None
