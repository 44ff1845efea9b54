"""Without a working C compiler the package still builds, warns, and runs on the twins."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_build_without_compiler_warns_and_uses_twins(tmp_path):
    src = tmp_path / "src"
    # A clean copy of the sources (no built extension lying around).
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(
        ".venv", ".git", "build", "*.so", "*.egg-info", "__pycache__", ".hypothesis", "bench",
        "tests"))
    target = tmp_path / "site"
    env = {**os.environ, "CC": "/bin/false", "LDSHARED": "/bin/false"}
    build = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-v", "--no-deps", "--no-build-isolation",
         "--target", str(target), str(src)],
        capture_output=True, text=True, env=env, timeout=300,
    )
    assert build.returncode == 0, build.stdout[-2000:] + build.stderr[-2000:]
    assert "deliverykit._speedups was not built" in build.stdout + build.stderr
    assert not list(target.glob("deliverykit/_speedups*.so"))
    probe = subprocess.run(
        [sys.executable, "-S", "-W", "always", "-c",  # -S: no site, so not the editable install
         "from deliverykit import fastpath as f\n"
         "b = bytearray(b'ab'); f.xor_into(b, b'ab')\n"
         "print(f.have_c(), f.xor_into.__name__, bytes(b).hex())"],
        capture_output=True, text=True, cwd=tmp_path, timeout=60,
        env={**os.environ, "PYTHONPATH": str(target)},
    )
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.split() == ["False", "py_xor_into", "0000"]
    assert "pure-Python twins" in probe.stderr  # the RuntimeWarning at import
