"""The pytest side of the conformance suite (registered as a ``pytest11`` plugin).

Inert unless asked: without ``--conformance``/``--impl``/``--impl-cmd`` it only
registers its options and marker.

A case is a test marked ``@pytest.mark.conformance(protocol=..., section=...,
role=...)`` that takes the ``impl`` fixture::

    @pytest.mark.conformance(protocol="fec", section="RFC 5170 sec. 6.2", role="encoder")
    def test_repair_symbols_match(impl):
        out = impl.run("encode", "--k", 4, input=data).stdout

It runs once per selected implementation of that protocol. A case whose
implementation exits 127 (:class:`Unsupported`) is reported as *unsupported*.
At the end a table shows pass / fail / unsupported / skip per case and
implementation; ``--conformance-json FILE`` writes it as JSON (with the findings
a case recorded and, for a failure, the assertion's message), and pytest's own
``--junitxml`` carries the section and implementation as properties.
"""

from __future__ import annotations

import json
import os
from collections.abc import Generator, Iterator
from importlib.metadata import entry_points
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pluggy
import pytest

from deliverykit.conformance.registry import Implementation, Unsupported, load_registry
from deliverykit.testing import require_root, require_tool

GROUP = "deliverykit.conformance"
_SELECTED = pytest.StashKey[list]()


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("conformance", "conformance suite (deliverykit)")
    g.addoption("--conformance", nargs="?", const="all", default=None, metavar="PROTOS",
                help="collect the registered conformance cases (all, or e.g. ppspp,fec)")
    g.addoption("--impl", action="append", default=[], metavar="NAME",
                help="implementation under test, by registry name (repeatable)")
    g.addoption("--impl-cmd", default=None, metavar="CMD",
                help="ad hoc implementation: command line (role and arguments are appended)")
    g.addoption(
        "--impl-protocol",
        default=None,
        help="protocol of --impl-cmd (ppspp, lisp, fec, http-proxy, ...)",
    )
    g.addoption(
        "--impl-roles", default="", help="comma-separated roles --impl-cmd claims (default: any)"
    )
    g.addoption("--impl-name", default="cmd", help="name shown for --impl-cmd")
    g.addoption("--impl-registry", action="append", default=[], metavar="FILE",
                help="extra registry JSON file(s)")
    g.addoption(
        "--conformance-json", default=None, metavar="FILE", help="write the result table as JSON"
    )
    g.addoption(
        "--conformance-vectors",
        default=None,
        metavar="DIR",
        help="test-vector corpus "
             "(default: $DELIVERYKIT_VECTORS, else the source tree's tests/vectors)",
    )


def registered_cases() -> dict[str, str]:
    """protocol -> module holding its cases, from the entry-point group."""
    return {ep.name: ep.value for ep in entry_points(group=GROUP)}


def _case_paths(wanted: str) -> list[str]:
    cases = registered_cases()
    names = (
        sorted(cases) if wanted == "all" else [w.strip() for w in wanted.split(",") if w.strip()]
    )
    unknown = [n for n in names if n not in cases]
    if unknown:
        raise pytest.UsageError(
            f"no conformance cases registered for {', '.join(unknown)}; known: "
            f"{', '.join(sorted(cases)) or 'none'}"
        )
    paths = []
    for n in names:
        spec = find_spec(cases[n])
        if spec is None or not spec.submodule_search_locations:
            raise pytest.UsageError(f"conformance module {cases[n]} is not an installed package")
        paths.append(str(Path(next(iter(spec.submodule_search_locations)))))
    return paths


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "conformance(protocol, section, role=None): a conformance case and the spec section it "
        "checks",
    )
    config.addinivalue_line(
        "markers", "root: needs root (skips with a reason; fails under CI=true)"
    )
    config.addinivalue_line(
        "markers", "tool(name, ...): needs a Debian tool (skips with a reason; fails under CI=true)"
    )
    opt = config.option
    if opt.conformance_vectors:
        os.environ["DELIVERYKIT_VECTORS"] = str(Path(opt.conformance_vectors).resolve())
    registry = load_registry(opt.impl_registry)
    selected: list[Implementation] = []
    for name in opt.impl:
        if name not in registry:
            raise pytest.UsageError(
                f"--impl {name}: not in the registry (known: "
                f"{', '.join(sorted(registry)) or 'none'})"
            )
        selected.append(registry[name])
    if opt.impl_cmd:
        if not opt.impl_protocol:
            raise pytest.UsageError("--impl-cmd needs --impl-protocol")
        roles = tuple(r for r in opt.impl_roles.split(",") if r)
        selected.append(Implementation(opt.impl_name, opt.impl_protocol, opt.impl_cmd, roles))
    config.stash[_SELECTED] = selected
    config.pluginmanager.register(_Recorder(config), "deliverykit-conformance-recorder")
    if opt.conformance:
        config.args[:] = (
            [*config.args, *_case_paths(opt.conformance)]
            if _explicit_args(config)
            else _case_paths(opt.conformance)
        )


def _explicit_args(config: pytest.Config) -> bool:
    """True when the user named paths on the command line (not just the testpaths default)."""
    return config.args_source == pytest.Config.ArgsSource.ARGS


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    mark = metafunc.definition.get_closest_marker("conformance")
    if mark is None or "impl" not in metafunc.fixturenames:
        return  # only conformance cases are ours; other tests may use the name freely
    protocol = mark.kwargs.get("protocol")
    impls = [
        i for i in metafunc.config.stash[_SELECTED] if protocol is None or i.protocol == protocol
    ]
    if impls:
        metafunc.parametrize("impl", impls, ids=[i.name for i in impls], indirect=True)
    else:
        metafunc.parametrize("impl", [None], ids=["no-impl"], indirect=True)


@pytest.fixture
def impl(request: pytest.FixtureRequest) -> Iterator[Implementation]:
    chosen: Implementation | None = request.param
    mark = request.node.get_closest_marker("conformance")
    protocol = mark.kwargs.get("protocol", "?") if mark else "?"
    if chosen is None:
        pytest.skip(f"no implementation under test for {protocol} (use --impl NAME or --impl-cmd)")
    role = mark.kwargs.get("role") if mark else None
    if not chosen.supports(role):
        pytest.skip(f"unsupported: {chosen.name} does not claim role {role}")
    yield chosen


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, pluggy.Result[None], None]:
    outcome = yield
    exc = outcome.excinfo
    if exc is not None and issubclass(exc[0], Unsupported):
        outcome.force_exception(
            pytest.skip.Exception(f"unsupported: {exc[1]}", _use_item_location=True)
        )


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(
    fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest
) -> Generator[None, pluggy.Result[Any], None]:
    """A fixture that starts the implementation (a map-server for the cases to register
    with, a seeder) and gets exit 127 makes the case unsupported, not an error."""
    outcome = yield
    exc = outcome.excinfo
    if exc is not None and issubclass(exc[0], Unsupported):
        outcome.force_exception(pytest.skip.Exception(f"unsupported: {exc[1]}"))


def pytest_runtest_setup(item: pytest.Item) -> None:
    mark = item.get_closest_marker("conformance")
    if mark is None:
        return
    # Cases live in installed packages, out of reach of a repository conftest:
    # apply the same root / tool policy here.
    if item.get_closest_marker("root") is not None:
        require_root()
    for tool in item.iter_markers("tool"):
        require_tool(*tool.args)
    item.user_properties.append(("section", mark.kwargs.get("section", "")))
    callspec = getattr(item, "callspec", None)
    chosen = callspec.params.get("impl") if callspec else None
    if isinstance(chosen, Implementation):
        item.user_properties.append(("implementation", chosen.name))


def _crash_message(report: pytest.TestReport, limit: int = 1000) -> str:
    """The failing assertion's message (first lines), so the JSON report says *why* a case
    failed."""
    crash = getattr(report.longrepr, "reprcrash", None)
    text = crash.message if crash is not None else str(report.longrepr)
    return text if len(text) <= limit else text[:limit] + " ..."


class _Recorder:
    """Collects one row per (case, implementation) and prints the table at the end."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.rows: list[dict] = []

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        props = dict(report.user_properties)
        if "section" not in props:
            return
        if not (report.when == "call" or (report.when == "setup" and not report.passed)):
            return
        if report.passed:
            result = "pass"
        elif report.skipped:
            reason = (
                report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
            )
            result = "unsupported" if "unsupported:" in reason else "skip"
        else:
            result = "fail"
        extra = {k: v for k, v in report.user_properties if k not in ("section", "implementation")}
        row = {"case": report.nodeid, "section": props["section"],
               "implementation": props.get("implementation", "-"), "result": result}
        if extra:
            row["properties"] = extra  # findings recorded by the case (record_property)
        if result == "fail":
            row["message"] = _crash_message(report)
        self.rows.append(row)

    def pytest_terminal_summary(
        self, terminalreporter, exitstatus: int, config: pytest.Config
    ) -> None:
        rows = self.rows
        if not rows:
            return
        tr = terminalreporter
        tr.section("conformance results")
        w_case = max(len(r["case"]) for r in rows)
        w_sec = max(len(r["section"]) for r in rows)
        w_impl = max(len(r["implementation"]) for r in rows)
        for r in rows:
            tr.write_line(f"{r['case']:<{w_case}}  {r['section']:<{w_sec}}  "
                          f"{r['implementation']:<{w_impl}}  {r['result'].upper()}")
        counts = {
            k: sum(r["result"] == k for r in rows) for k in ("pass", "fail", "unsupported", "skip")
        }
        tr.write_line("conformance: " + ", ".join(f"{v} {k}" for k, v in counts.items()))
        if config.option.conformance_json:
            Path(config.option.conformance_json).write_text(
                json.dumps({"results": rows, "counts": counts}, indent=2))
