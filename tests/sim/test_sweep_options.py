"""Every command that sweeps takes the same run options, from one place
(:func:`deliverykit.sweep.add_run_arguments`): ``--workers N`` or
``--scheduler ADDRESS`` (not both), ``--progress``, ``--resume``."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

#: the commands that run sweeps on Dask, as a user types them
COMMANDS = [
    ["-m", "deliverykit.sweep"],
    ["-m", "swift.experiments.vod_swarm"],
    ["-m", "swift.experiments.flashcrowd"],
    ["-m", "m2c.experiments.fig5"],
]

RUN_OPTIONS = ("--workers N", "--scheduler ADDRESS", "--progress", "--resume")


def _help(cmd: list[str]) -> str:
    out = subprocess.run([sys.executable, *cmd, "--help"], capture_output=True, text=True,
                         timeout=60, env={"COLUMNS": "200", "PATH": ""}, check=True)
    return out.stdout


def _option_lines(text: str) -> dict[str, str]:
    """Each run option's help line, spaces collapsed."""
    lines = {}
    for opt in RUN_OPTIONS:
        m = re.search(r"^\s+" + re.escape(opt) + r"\s+(.+)$", text, re.MULTILINE)
        assert m, f"{opt} missing from:\n{text}"
        lines[opt] = " ".join(m.group(1).split())
    return lines


def test_every_sweeping_command_documents_the_same_run_options() -> None:
    helps = {" ".join(c): _option_lines(_help(c)) for c in COMMANDS}
    first = next(iter(helps.values()))
    for name, lines in helps.items():
        assert lines == first, name


@pytest.mark.parametrize("cmd", COMMANDS, ids=lambda c: c[1])
def test_workers_and_scheduler_together_are_a_usage_error(cmd: list[str]) -> None:
    out = subprocess.run([sys.executable, *cmd, "--workers", "1", "--scheduler", "tcp://127.0.0.1:1"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert "not allowed with argument" in out.stderr
