"""The conformance plugin, driven end to end by pytest in a subprocess.

The implementation under test is a real program (a small Python script) run
through the plugin's command contract; nothing is mocked.
"""

from __future__ import annotations

import json
import sys
import textwrap
import xml.etree.ElementTree as ET

import pytest

pytest_plugins = ["pytester"]

IMPL = textwrap.dedent('''
    import sys, time
    role = sys.argv[1]
    data = sys.stdin.buffer.read() if role in ("upper", "lower") else b""
    if role == "upper":
        sys.stdout.buffer.write(data.upper())
    elif role == "lower":
        sys.stdout.buffer.write(data)          # a bug: does not lower-case
    elif role == "serve":
        print("starting", flush=True)
        print("READY 42", flush=True)
        time.sleep(60)
    else:
        sys.exit(127)                          # unsupported
''')

CASES = textwrap.dedent('''
    import pytest

    @pytest.mark.conformance(protocol="toy", section="TOY sec. 1")
    def test_upper(impl):
        assert impl.run("upper", input=b"abc").stdout == b"ABC"

    @pytest.mark.conformance(protocol="toy", section="TOY sec. 2")
    def test_lower(impl):
        assert impl.run("lower", input=b"ABC").stdout == b"abc"

    @pytest.mark.conformance(protocol="toy", section="TOY sec. 3")
    def test_reverse(impl):
        impl.run("reverse", input=b"abc")

    @pytest.mark.conformance(protocol="toy", section="TOY sec. 4")
    def test_serve(impl, record_property):
        with impl.start("serve", ready_line="READY") as proc:
            assert proc.poll() is None
            assert proc.ready_line == "READY 42"
            record_property("finding", "serves")
        assert proc.returncode is not None   # stopped and reaped

    @pytest.mark.conformance(protocol="toy", section="TOY sec. 5", role="relay")
    def test_role_not_claimed(impl):
        raise AssertionError("never runs: the implementation does not claim 'relay'")

    @pytest.fixture
    def reversed_abc(impl):
        return impl.run("reverse", input=b"abc").stdout   # exits 127 while the fixture sets up

    @pytest.mark.conformance(protocol="toy", section="TOY sec. 6")
    def test_unsupported_in_a_fixture(reversed_abc):
        assert reversed_abc == b"cba"
''')


@pytest.fixture
def toy(pytester):
    script = pytester.path / "toy_impl.py"
    script.write_text(IMPL)
    pytester.makepyfile(test_toy_cases=CASES)
    return f"{sys.executable} {script}"


def test_pass_fail_unsupported_and_reports(pytester, toy):
    res = pytester.runpytest_subprocess(
        "--impl-cmd", toy, "--impl-protocol", "toy", "--impl-name", "toy1",
        "--impl-roles", "upper,lower,reverse,serve",
        "--conformance-json", "out.json", "--junitxml", "junit.xml", "-p", "no:cacheprovider",
    )
    res.assert_outcomes(passed=2, failed=1, skipped=3)
    res.stdout.fnmatch_lines(["*conformance results*", "*test_reverse*TOY sec. 3*toy1*UNSUPPORTED*",
                              "conformance: 2 pass, 1 fail, 3 unsupported, 0 skip"])
    rows = json.loads((pytester.path / "out.json").read_text())["results"]
    serve = [r.get("properties") for r in rows if "test_serve" in r["case"]]
    assert serve == [{"finding": "serves"}]
    assert {r["case"].split("::")[1].split("[")[0]: r["result"] for r in rows} == {
        "test_upper": "pass", "test_lower": "fail", "test_reverse": "unsupported",
        "test_serve": "pass", "test_role_not_claimed": "unsupported",
        "test_unsupported_in_a_fixture": "unsupported"}
    junit = ET.parse(pytester.path / "junit.xml")
    props = {(p.get("name"), p.get("value")) for p in junit.iter("property")}
    assert ("section", "TOY sec. 1") in props and ("implementation", "toy1") in props


def test_registry_by_name_and_no_implementation_skips(pytester, toy):
    reg = pytester.path / "reg.json"
    reg.write_text(json.dumps({"implementations": [
        {"name": "toyreg", "protocol": "toy", "command": toy, "roles": []}]}))
    res = pytester.runpytest_subprocess("--impl-registry", str(reg), "--impl", "toyreg",
                                        "-k", "upper", "-p", "no:cacheprovider")
    res.assert_outcomes(passed=1, deselected=5)
    res = pytester.runpytest_subprocess("-k", "upper", "-rs", "-p", "no:cacheprovider")
    res.assert_outcomes(skipped=1, deselected=5)
    res.stdout.fnmatch_lines(["*no implementation under test for toy*"])


def test_unknown_implementation_is_a_usage_error(pytester, toy):
    res = pytester.runpytest_subprocess("--impl", "nonesuch", "-p", "no:cacheprovider")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    res.stderr.fnmatch_lines(["*--impl nonesuch: not in the registry*"])


def test_plugin_is_inert_without_options(pytester):
    pytester.makepyfile(test_plain="def test_ok():\n    assert 1 + 1 == 2\n")
    res = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    res.assert_outcomes(passed=1)
    assert "conformance results" not in res.stdout.str()
