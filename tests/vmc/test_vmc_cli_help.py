"""``vmc`` help texts (issue 13 item 20): plain text (no RST markup, no issue numbers), a
description for every subcommand and a help line for every option, JSON where JSON is promised."""

from __future__ import annotations

import argparse
import importlib
import re
import subprocess
import sys

import pytest

from vmc.cli import EXPERIMENTS, build_parser

PY = [sys.executable, "-m", "vmc"]
MARKUP = re.compile(r"``|:(func|mod|class|meth|attr):|::$|\bissue \d", re.MULTILINE)


def _subparsers(ap: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in ap._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _undocumented(ap: argparse.ArgumentParser) -> list[str]:
    return [a.dest for a in ap._actions
            if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction)) and not a.help]


def _parsers() -> dict[str, argparse.ArgumentParser]:
    top = build_parser()
    out = {"vmc": top} | {f"vmc {name}": p for name, p in _subparsers(top).items()
                          if name != "experiment"}
    for name, module in EXPERIMENTS.items():
        out[f"vmc experiment {name}"] = importlib.import_module(module).build_parser()
    return out


@pytest.mark.parametrize("name", ["vmc", *[f"vmc {c}" for c in ("proxy", "origin", "get", "replay",
                                                                  "workload", "demo")],
                                  *[f"vmc experiment {e}" for e in EXPERIMENTS]])
def test_every_option_is_described_in_plain_text(name: str) -> None:
    ap = _parsers()[name]
    assert ap.description, f"{name}: no description"
    assert not _undocumented(ap), f"{name}: options without help: {_undocumented(ap)}"
    text = ap.format_help()
    assert not MARKUP.search(text), f"{name}: markup or issue number: {MARKUP.search(text)}"


@pytest.mark.parametrize("argv", [["--help"], ["experiment"], *[[c, "--help"] for c in
                                  ("proxy", "origin", "get", "replay", "workload", "demo")],
                                  *[["experiment", e, "--help"] for e in EXPERIMENTS]])
def test_help_as_printed(argv: list[str]) -> None:
    r = subprocess.run(PY + argv, capture_output=True, text=True, timeout=60)
    assert r.returncode in (0, 2), r.stderr
    text = r.stdout + r.stderr
    assert "Traceback" not in text
    assert not MARKUP.search(text), MARKUP.search(text)


def test_replay_prints_json() -> None:
    """Where vmc promises JSON on stdout it is one parseable document."""
    import json
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        log = Path(d) / "w.log"
        subprocess.run(PY + ["workload", "-n", "6", "-o", str(log)], check=True, timeout=60)
        r = subprocess.run(PY + ["replay", str(log), "--speed", "50", "--link-rate", "5e7"],
                           capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["requests"] == 6
    assert r.stderr.strip().splitlines()[-1].startswith(
        "vmc replay: finished: 18/18 requests"), r.stderr  # progress: 3 arms x 6, on stderr
