"""The ``<tool> experiment NAME [args]`` subcommand shared by the four CLIs.

Each protocol package ships its paper reproductions as modules under
``<pkg>/experiments/`` with a ``main(argv) -> int`` and a ``--quick`` flag.
A CLI hands this module its table of names to module paths; the experiment's
own argparse then sees the rest of the command line, so ``--help`` and every
option stay the experiment's.  Importing an experiment is deferred until it
is chosen: listing them costs nothing but reading docstrings.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Mapping, Sequence

__all__ = ["dispatch", "describe"]


def describe(module: str) -> str:
    """First line of the experiment module's docstring, without importing it."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        return "(missing)"
    import ast

    with open(spec.origin, encoding="utf-8") as f:
        doc = ast.get_docstring(ast.parse(f.read())) or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""


def usage(prog: str, experiments: Mapping[str, str]) -> str:
    width = max(map(len, experiments), default=0)
    lines = [f"usage: {prog} experiment NAME [--quick] [options]   (NAME --help for its options)",
             "", "experiments:"]
    lines += [f"  {name:<{width}}  {describe(mod)}" for name, mod in experiments.items()]
    return "\n".join(lines)


def dispatch(prog: str, experiments: Mapping[str, str], argv: Sequence[str]) -> int:
    """Run ``experiments[argv[0]].main(argv[1:])``; print the list for none or an unknown name.

    Returns the experiment's exit status (2 for a usage error, as argparse does).
    """
    argv = list(argv)
    if not argv or argv[0] in ("-h", "--help", "list"):
        print(usage(prog, experiments))
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name not in experiments:
        print(f"{prog} experiment: unknown experiment {name!r}\n", file=sys.stderr)
        print(usage(prog, experiments), file=sys.stderr)
        return 2
    module = importlib.import_module(experiments[name])
    saved = sys.argv[0]
    sys.argv[0] = (
        f"{prog} experiment {name}"  # argparse's default prog: usage lines name the real command
    )
    try:
        return int(module.main(rest) or 0)
    finally:
        sys.argv[0] = saved
