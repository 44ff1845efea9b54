"""Help texts and printed JSON (issue 13, item 20, m2c part).

- ``m2c --help``, every subcommand's and every experiment's ``--help``: plain text
  (no RST markup such as double backquotes or ``:class:``), no reference to our
  issue tracker, every argument explained, defaults shown as values (not Python lists).
- ``m2c experiment`` lists each experiment by a whole sentence, not a cut line.
- A failed transfer reports ``net`` (and the other section 7.2 ratios) as null.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import importlib.util
import json
import os
import re
import subprocess
import sys

import pytest

from m2c import cli
from m2c.core.filetx import FileReceiver, RateLadder, SessionDescription, default_fec
from m2c.core.groups import WaveSchedule

EXPERIMENTS = sorted(cli.EXPERIMENTS)


def m2c(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "m2c", *args], capture_output=True, text=True,
                          timeout=60)


def parser_of(argv: list[str], monkeypatch, main=None) -> argparse.ArgumentParser:
    """The ArgumentParser that ``m2c argv`` (or ``main(argv)``) builds, caught when it parses."""
    seen: list[argparse.ArgumentParser] = []

    def catch(self, args=None, namespace=None):
        seen.append(self)
        raise SystemExit(0)

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", catch)
    with pytest.raises(SystemExit):
        (main or cli.main.__wrapped__)(argv)
    return seen[-1]


HELPS = [["--help"], ["send", "--help"], ["receive", "--help"],
         *[["experiment", name, "--help"] for name in EXPERIMENTS]]


@pytest.mark.parametrize("argv", HELPS, ids=" ".join)
def test_help_is_plain_text_with_every_argument_explained(argv, monkeypatch):
    r = m2c(*argv)
    assert r.returncode == 0, r.stderr
    text = r.stdout
    assert "``" not in text and ":class:" not in text and ":meth:" not in text, text
    assert not re.search(r"\bissues? \d", text), text
    assert not re.search(r"default:? \[", text), text  # a Python list as the default
    ap = parser_of(argv[:-1] or [], monkeypatch) if argv != ["--help"] else None
    if ap is None:
        return
    for act in ap._actions:
        if isinstance(act, argparse._SubParsersAction) or act.dest == "help":
            continue
        assert act.help, f"{' '.join(argv[:-1])}: {act.option_strings or act.dest} has no help"


def test_experiment_list_gives_whole_sentences():
    r = m2c("experiment", "--help")
    assert r.returncode == 0
    for name in EXPERIMENTS:
        line = next(x for x in r.stdout.splitlines() if x.strip().startswith(name + " "))
        spec = importlib.util.find_spec(cli.EXPERIMENTS[name])
        with open(spec.origin, encoding="utf-8") as f:
            doc = ast.get_docstring(ast.parse(f.read()))
        first_paragraph = " ".join(doc.split("\n\n")[0].split())
        assert line.split(None, 1)[1].strip() == first_paragraph, (name, line)
        assert first_paragraph.endswith("."), first_paragraph


def test_failed_transfer_reports_null_not_minus_100():
    data = os.urandom(20_000)
    sched = WaveSchedule(20.0, 2000.0, tsd=0.5, k=2)
    sd = SessionDescription(7, 0, "f", len(data), hashlib.sha256(data).hexdigest(),
                            default_fec(len(data), "ldpc", 100), RateLadder.of(sched),
                            [["239.1.1.1", 4000]] * (sched.channels + 1))
    m = FileReceiver(sd).metrics(10.0, 1e-9, 0, 0)  # nothing ever arrived
    assert m.net is None
    assert json.loads(json.dumps({"net": m.net}))["net"] is None


def test_hetero_rows_give_null_for_a_failed_receiver():
    from m2c.experiments.hetero import _r

    assert _r(None, 2) is None
    assert json.dumps({"x": _r(None)}) == '{"x": null}'


def test_tools_beside_the_cli_explain_themselves(monkeypatch):
    """python -m m2c.fec.elimbench and python -m m2c.conformance.adapter."""
    from m2c.fec import elimbench

    ap = parser_of([], monkeypatch, elimbench.main)
    for act in ap._actions:
        assert act.help, f"elimbench {act.option_strings} has no help"
    r = subprocess.run([sys.executable, "-m", "m2c.conformance.adapter", "--help"],
                       capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0 and "encode ldpc K N N1 SEED E" in r.stdout, r
