"""M2C keeps its concerns in their layers (issue 16 items 6 and 8): the sans-IO cores
under m2c/core open no file, read no clock and touch no socket (the drivers in m2c/aio
do: m2c.aio.delivery hashes and writes files), and no extension point is probed for the
attributes it may have (the rate controllers declare theirs: test_m2c_controller_registry)."""

from __future__ import annotations

import ast
from pathlib import Path

import m2c

PKG = Path(m2c.__file__).parent
IO_MODULES = {"os", "io", "hashlib", "socket", "time", "asyncio", "pathlib", "tempfile",
              "shutil", "select", "selectors"}
"""what a sans-IO core never imports (files, clocks, sockets, the event loop)"""


def _trees(root: Path) -> list[tuple[Path, ast.Module]]:
    return [(p, ast.parse(p.read_text(), str(p))) for p in sorted(root.rglob("*.py"))]


def test_the_cores_import_no_io_module_and_open_no_file():
    found = []
    for path, tree in _trees(PKG / "core"):
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module.split(".")[0]]
            else:
                names = []
            found += [f"{path.name}:{node.lineno} imports {n}" for n in names if n in IO_MODULES]
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                    node.func.id == "open":
                found.append(f"{path.name}:{node.lineno} calls open()")
    assert not found, found


def test_no_attribute_is_probed_anywhere_in_m2c():
    """hasattr(x, name) or getattr(x, name, default) asks whether an object has an
    attribute: an extension point's interface would be undeclared."""
    found = []
    for path, tree in _trees(PKG):
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and (
                    node.func.id == "hasattr" or (node.func.id == "getattr"
                                                  and len(node.args) > 2)):
                found.append(f"{path.relative_to(PKG)}:{node.lineno} {node.func.id}")
    assert not found, found
