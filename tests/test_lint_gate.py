"""The type gate's own inputs stay true: the C extension's stub, the py.typed
markers, and the ratchet list in pyproject.toml (docs/typing.md).

`make lint` (run by `make test`) runs mypy and ruff themselves; these tests
check what those tools cannot: that ``deliverykit/_speedups.pyi`` describes the
extension that is actually built, and that the ratchet names only modules that
exist.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import re
import shutil
import subprocess
import sys
import tokenize
from pathlib import Path
from typing import Any

import pytest

from deliverykit import fastpath
from deliverykit.testing import in_ci

ROOT = Path(__file__).resolve().parent.parent
STUB = ROOT / "deliverykit" / "_speedups.pyi"
PACKAGES = ("deliverykit", "corecast", "m2c", "vmc", "swift")

# Each C function's pure-Python twin: (module, attribute).
TWINS = {
    "xor_into": ("deliverykit.fastpath", "py_xor_into"),
    "recv_batch": ("deliverykit.fastpath", "py_recv_batch"),
    "send_batch": ("deliverykit.fastpath", "py_send_batch"),
    "send_gso": ("deliverykit.fastpath", "py_send_gso"),
    "group_by_destination": ("deliverykit.fastpath", "py_group_by_destination"),
    "tx_batch": ("deliverykit.fastpath", "py_tx_batch"),
    "cc_parse": ("corecast._fast", "py_cc_parse"),
    "cc_trie_lookup": ("corecast._fast", "py_cc_trie_lookup"),
    "cc_itr_table": ("corecast._fast", "py_cc_itr_table"),
    "cc_ring_read": ("corecast._fast", "py_cc_ring_read"),
    "cc_blast": ("corecast._fast", "py_cc_blast"),
    "m2c_ldpc_matrix": ("m2c._fast", "m2c_ldpc_matrix"),
    "m2c_ldpc_graph": ("m2c._fast", "m2c_ldpc_graph"),
    "m2c_ldpc_alloc": ("m2c._fast", "m2c_ldpc_alloc"),
    "m2c_ldpc_encode": ("m2c._fast", "m2c_ldpc_encode"),
    "m2c_ldpc_add": ("m2c._fast", "m2c_ldpc_add"),
    "m2c_ldpc_add_many": ("m2c._fast", "m2c_ldpc_add_many"),
    "m2c_ldpc_peeler": ("m2c._fast", "m2c_ldpc_peeler"),
    "m2c_ldpc_eliminate": ("m2c._fast", "m2c_ldpc_eliminate"),
    "recv_batch_ts": ("swift._fast", "py_recv_batch_ts"),
    "decode_msgs": ("swift._fast", "py_decode_msgs"),
    "binmap_find": ("swift._fast", "py_binmap_find"),
    "binmap_set1": ("swift._fast", "py_binmap_set1"),
    "uncle_stop": ("swift._fast", "py_uncle_stop"),
    "merkle_walk": ("swift._fast", "py_merkle_walk"),
    "merkle_uncles": ("swift._fast", "py_merkle_uncles"),
    "data_datagram": ("swift._fast", "py_data_datagram"),
    "seed_datagram": ("swift._fast", "py_seed_datagram"),
    "ledbat_on_ack": ("swift._fast", "py_ledbat_on_ack"),
    "sendside_recv": ("swift._fast", "py_sendside_recv"),
    "picker_next_wanted": ("swift._fast", "py_next_wanted"),
    "sim_heap": ("deliverykit.sim.scheduler", "py_sim_heap"),
}


def stub_functions() -> dict[str, ast.FunctionDef]:
    tree = ast.parse(STUB.read_text(), str(STUB))
    return {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}


def exported() -> set[str]:
    c = fastpath.speedups
    if c is None:
        if in_ci():
            pytest.fail("deliverykit._speedups is not built (CI=true: the stub must be checked)")
        pytest.skip("deliverykit._speedups is not built (no compiler?)")
    return {n for n in dir(c) if not n.startswith("_") and callable(getattr(c, n))}


def test_stub_names_exactly_what_the_extension_exports():
    names = exported()
    in_stub = set(stub_functions())
    assert sorted(names - in_stub) == [], "exported by the C extension but missing in the .pyi"
    assert sorted(in_stub - names) == [], "in the .pyi but not exported by the C extension"


def test_every_exported_function_has_a_known_twin():
    assert sorted(exported() - set(TWINS)) == [], "add the new function's twin to TWINS"


@pytest.mark.parametrize("name", sorted(TWINS))
def test_stub_takes_the_twins_arguments_positionally(name):
    fn = stub_functions().get(name)
    assert fn is not None, f"{name} missing in the .pyi"
    args = fn.args
    # METH_VARARGS: positional only, nothing else; optional trailing arguments
    # (PyArg_ParseTuple's "|") exactly where the twin has defaults.
    assert args.args == [] and args.kwonlyargs == [] and args.vararg is None
    assert args.kwarg is None
    stub_params = [a.arg for a in args.posonlyargs]
    module, attr = TWINS[name]
    twin = getattr(importlib.import_module(module), attr)
    params = inspect.signature(twin).parameters.values()
    twin_params = [p.name for p in params]
    assert len(stub_params) == len(twin_params), (stub_params, twin_params)
    optional = sum(p.default is not inspect.Parameter.empty for p in params)
    assert len(args.defaults) == optional, (name, len(args.defaults), optional)


def test_stub_is_shipped_and_the_packages_are_marked_typed():
    data = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'^"\*" = \[.*"py\.typed".*"\*\.pyi"', data, re.M)
    missing = [p for p in PACKAGES if not (ROOT / p / "py.typed").is_file()]
    assert missing == []


def tomllib_loads(text: str) -> dict[str, Any]:
    if sys.version_info < (3, 11):
        pytest.skip("tomllib is 3.11+")
    import tomllib

    return tomllib.loads(text)


def ratchet_entries() -> tuple[list[str], list[str]]:
    """(mypy modules, ruff files) on the ratchet, read from pyproject.toml."""
    conf = tomllib_loads((ROOT / "pyproject.toml").read_text())
    modules: list[str] = []
    for override in conf["tool"]["mypy"].get("overrides", []):
        if override.get("ignore_errors"):
            modules += override["module"]
    files = list(conf["tool"]["ruff"]["lint"].get("per-file-ignores", {}))
    return modules, files


def test_ratchet_names_only_modules_that_exist():
    modules, files = ratchet_entries()
    gone = []
    for mod in modules:
        base = ROOT / mod.replace(".", "/")
        if not (base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()):
            gone.append(mod)
    gone += [f for f in files if not (ROOT / f).is_file()]
    assert gone == [], "remove entries for modules that were renamed or deleted"


def test_ratchet_is_no_wildcard():
    modules, files = ratchet_entries()
    assert [m for m in modules if "*" in m] == []
    assert [f for f in files if "*" in f] == []


def test_ruff_ratchet_lists_only_rules_still_broken():
    """Each file on ruff's ratchet still breaks every rule listed for it: a rule
    (or a whole file) that passes comes off, so the list can only shrink."""
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if ruff is None:
        _missing = "ruff is not installed (`make lint` installs it)"
        if in_ci():
            pytest.fail(_missing)
        pytest.skip(_missing)
    conf = tomllib_loads((ROOT / "pyproject.toml").read_text())
    listed: dict[str, list[str]] = conf["tool"]["ruff"]["lint"].get("per-file-ignores", {})
    if not listed:
        return
    out = subprocess.run(
        [ruff, "check", "--no-cache", "--exit-zero", "--output-format", "json",
         "--config", "lint.per-file-ignores = {}", *listed],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=True,
    )
    broken: dict[str, set[str]] = {}
    for finding in json.loads(out.stdout):
        rel = Path(finding["filename"]).resolve().relative_to(ROOT).as_posix()
        broken.setdefault(rel, set()).add(finding["code"])
    stale = {f: sorted(set(codes) - broken.get(f, set())) for f, codes in listed.items()}
    stale = {f: codes for f, codes in stale.items() if codes}
    assert stale == {}, "these pass now: take them off [tool.ruff.lint.per-file-ignores]"


def test_make_test_runs_the_gate_first():
    """`make test` (and so .ci/run) depends on `lint`, which runs ruff and mypy."""
    make = (ROOT / "Makefile").read_text()
    test_rule = re.search(r"^test:(.*)$", make, re.M)
    assert test_rule is not None and "lint" in test_rule.group(1).split()
    lint_rule = re.search(r"^lint:.*\n((?:\t.*\n)+)", make, re.M)
    assert lint_rule is not None
    assert "-m ruff check ." in lint_rule.group(1) and "-m mypy" in lint_rule.group(1)
    assert "make test" in (ROOT / ".ci" / "run").read_text()


# Spelled in two pieces so that this file does not match its own search.
_IGNORE = "type:" + " ignore"
_SAYS_WHY = re.compile(re.escape(_IGNORE) + r"(\[[^\]]*\])?\s*#\s*\S")


def bare_type_ignores(root: Path) -> list[str]:
    """file:line of each type-ignore comment under ``root``'s packages,
    tests/ and bench/ with no ``# reason`` after it on its line."""
    found: list[str] = []
    for top in (*PACKAGES, "tests", "bench"):
        for path in sorted((root / top).rglob("*.py")):
            with tokenize.open(path) as f:
                comments = [t for t in tokenize.generate_tokens(f.readline)
                            if t.type == tokenize.COMMENT and _IGNORE in t.string]
            for tok in comments:
                if not _SAYS_WHY.search(tok.string):
                    found.append(f"{path.relative_to(root).as_posix()}:{tok.start[0]}")
    return found


def test_every_type_ignore_says_why():
    """Issue 16: a type-ignore comment (``[code]`` given) carries its reason after a second
    ``#`` on the same line (docs/typing.md)."""
    assert bare_type_ignores(ROOT) == [], "give each its reason: `# type: ignore[code]  # why`"


def wait_for_calls(root: Path, tops: tuple[str, ...] = (*PACKAGES, "bench")) -> list[str]:
    """file:line of each ``asyncio.wait_for`` under ``root``'s packages and bench/."""
    found: list[str] = []
    for top in tops:
        for path in sorted((root / top).rglob("*.py")):
            tree = ast.parse(path.read_bytes(), str(path))
            for node in ast.walk(tree):
                if (isinstance(node, ast.Attribute) and node.attr == "wait_for"
                        and isinstance(node.value, ast.Name) and node.value.id == "asyncio"):
                    found.append(f"{path.relative_to(root).as_posix()}:{node.lineno}")
    return found


def test_timed_awaits_never_lose_a_cancellation():
    """Python 3.11's ``asyncio.wait_for`` can swallow a cancellation that lands as its inner
    await completes (CPython gh-86296): a cancelled loop then runs on, and a CI run hung 300 s
    on one (corecast's heartbeat, session 12). The packages' timed awaits go through
    ``deliverykit.deadline.within``, where a cancel always wins."""
    assert wait_for_calls(ROOT) == [], "use deliverykit.deadline.within"


def test_the_wait_for_search_finds_one(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text(
        "import asyncio\n\nasync def f(aw):\n    return await asyncio.wait_for(aw, 1)\n")
    assert wait_for_calls(tmp_path, ("pkg",)) == ["pkg/m.py:4"]
