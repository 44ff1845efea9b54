"""``<tool> experiment NAME``: listing, unknown names, and handing argv to the module."""

from __future__ import annotations

import sys

import pytest

from deliverykit.experiments import describe, dispatch


@pytest.fixture
def toy_pkg(tmp_path, monkeypatch):
    pkg = tmp_path / "dk_exp_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "echo.py").write_text(
        '"""Echo the arguments back, as an experiment would parse them.\n\nMore."""\n'
        "seen = []\n"
        "def main(argv):\n"
        "    seen.append(list(argv))\n"
        "    return 3 if '--fail' in argv else 0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield {"echo": "dk_exp_pkg.echo", "gone": "dk_exp_pkg.not_there"}
    for name in ("dk_exp_pkg.echo", "dk_exp_pkg"):
        sys.modules.pop(name, None)


def test_lists_with_first_docstring_line_without_importing(toy_pkg, capsys):
    assert dispatch("tool", toy_pkg, []) == 2
    out = capsys.readouterr().out
    assert "Echo the arguments back, as an experiment would parse them." in out
    assert "gone" in out and "(missing)" in out
    assert "dk_exp_pkg.echo" not in sys.modules
    assert dispatch("tool", toy_pkg, ["--help"]) == 0


def test_unknown_name_is_a_usage_error(toy_pkg, capsys):
    assert dispatch("tool", toy_pkg, ["nope", "--quick"]) == 2
    assert "unknown experiment 'nope'" in capsys.readouterr().err


def test_rest_of_argv_and_exit_status_pass_through(toy_pkg):
    assert dispatch("tool", toy_pkg, ["echo", "--quick", "--out", "d"]) == 0
    assert dispatch("tool", toy_pkg, ["echo", "--fail"]) == 3
    assert sys.modules["dk_exp_pkg.echo"].seen == [["--quick", "--out", "d"], ["--fail"]]


def test_every_shipped_experiment_has_a_description():
    for mod in ("corecast.experiments.trace", "m2c.experiments.fig5",
                "swift.experiments.vod_swarm", "vmc.experiments.tables"):
        assert describe(mod) not in ("", "(missing)"), mod
