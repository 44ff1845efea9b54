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


def _ppspp_params() -> list:
    from swift.conformance.vectors import parse

    out = []
    for p in sorted((VECTORS / "ppspp").glob("*.vec")):
        v = parse(p.read_text())
        out += [pytest.param((p, v, name), id=f"{p.stem}-{name}") for name in v["vectors"]]
    return out


@pytest.fixture(params=_ppspp_params())
def ppspp_vector(request) -> dict:
    """One stored PPSPP datagram: {"file", "addressing", "name", "bytes", "comments"}."""
    path, v, name = request.param
    return {"file": path, "addressing": v["addressing"], "name": name, "bytes": v["vectors"][name],
            "comments": v["comments"]}


def _lisp_params() -> list:
    from corecast.conformance.vectors import parse

    p = VECTORS / "lisp" / "lisp.vec"
    if not p.exists():
        return []
    v = parse(p.read_text())
    return [pytest.param((kind, name, b, v["psk"], v["comments"]), id=f"{kind}-{name}")
            for kind, name, b in v["vectors"]]


@pytest.fixture(params=_lisp_params())
def lisp_vector(request) -> dict:
    """One stored LISP/CoreCast vector: {"kind", "name", "bytes", "psk", "comments"}."""
    kind, name, b, psk, comments = request.param
    return {"kind": kind, "name": name, "bytes": b, "psk": psk, "comments": comments}


def _http_params() -> list:
    from vmc.conformance.vectors import SETS, parse

    out = []
    for name in SETS:
        p = VECTORS / "http" / f"{name}.vec"
        if p.exists():
            vectors = parse(p.read_text())["vectors"]
            out += [pytest.param((name, v), id=f"{name}-{v['name']}") for v in vectors]
    return out


@pytest.fixture(params=_http_params())
def http_vector(request) -> dict:
    """One stored HTTP vector: {"set", plus the vector's own keys (name, source, expect, ...)}."""
    name, v = request.param
    return {"set": name, **v}
