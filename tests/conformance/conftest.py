"""Parametrized fixtures over the test-vector corpus (tests/vectors/<proto>/)."""

from __future__ import annotations

from pathlib import Path

import pytest

VECTORS = Path(__file__).resolve().parents[1] / "vectors"


def _fec_files() -> list[Path]:
    return sorted((VECTORS / "fec").glob("*.vec"))


@pytest.fixture(params=_fec_files(), ids=lambda p: p.stem)
def fec_vector(request) -> dict:
    """One stored FEC vector, parsed (see m2c.conformance.vectors)."""
    from m2c.conformance.vectors import parse

    v = parse(request.param.read_text())
    v["path"] = request.param
    return v
