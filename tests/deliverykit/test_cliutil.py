"""deliverykit.cliutil: argument types refuse bad values while parsing; cli_main turns expected
failures into one line and a non-zero exit, and leaves bugs their traceback."""

from __future__ import annotations

import argparse
import os
import socket

import pytest
from hypothesis import given, strategies as st

from deliverykit import cliutil


def parse(type_, value):
    ap = argparse.ArgumentParser(prog="t", exit_on_error=False)
    ap.add_argument("x", type=type_)
    return ap.parse_args([value]).x


@pytest.mark.parametrize("text, want", [("127.0.0.1:0", ("127.0.0.1", 0)),
                                        ("h.example:65535", ("h.example", 65535)),
                                        ("[::1]:9000", ("::1", 9000))])
def test_hostport_accepts(text, want):
    assert cliutil.hostport(text) == want


@pytest.mark.parametrize("text", ["127.0.0.1:70000", "127.0.0.1:-1", "nohost", ":80", "::1:80",
                                  "127.0.0.1:http", "127.0.0.1:"])
def test_hostport_refuses(text):
    with pytest.raises(argparse.ArgumentTypeError):
        cliutil.hostport(text)


@given(st.integers())
def test_port_range(n):
    if 0 <= n <= 65535:
        assert cliutil.port(str(n)) == n
    else:
        with pytest.raises(argparse.ArgumentTypeError):
            cliutil.port(str(n))


@pytest.mark.parametrize("fn, bad", [(cliutil.positive_int, "0"), (cliutil.positive_int, "-3"),
                                     (cliutil.positive_int, "x"), (cliutil.nonnegative_int, "-1"),
                                     (cliutil.positive_float, "0"), (cliutil.positive_float, "inf"),
                                     (cliutil.nonnegative_float, "-0.5"),
                                     (cliutil.nonnegative_float, "inf"),
                                     (cliutil.positive_float, "nan"),
                                     (cliutil.ip_address, "999.1.1.1"),
                                     (cliutil.ip_network, "notaprefix")])
def test_numbers_and_addresses_refused(fn, bad):
    with pytest.raises(argparse.ArgumentTypeError):
        fn(bad)


def test_paths(tmp_path):
    f = tmp_path / "f"
    f.write_bytes(b"x")
    assert cliutil.existing_file(str(f)) == f
    with pytest.raises(argparse.ArgumentTypeError, match="no such file"):
        cliutil.existing_file(str(tmp_path / "nope"))
    with pytest.raises(argparse.ArgumentTypeError, match="is a directory, not a file"):
        cliutil.existing_file(str(tmp_path))
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(argparse.ArgumentTypeError, match="not a regular file"):
        cliutil.existing_file(str(fifo))
    assert cliutil.output_path(str(tmp_path / "new")) == tmp_path / "new"
    assert str(cliutil.output_path("-")) == "-"
    with pytest.raises(argparse.ArgumentTypeError, match="is a directory"):
        cliutil.output_path(str(tmp_path))
    with pytest.raises(argparse.ArgumentTypeError, match="no such directory"):
        cliutil.output_path(str(tmp_path / "a" / "b"))


def test_argparse_reports_type_errors_as_usage_errors(capsys):
    ap = argparse.ArgumentParser(prog="t")
    ap.add_argument("--listen", type=cliutil.hostport)
    with pytest.raises(SystemExit) as e:
        ap.parse_args(["--listen", "127.0.0.1:70000"])
    assert e.value.code == 2
    assert "argument --listen: port 70000 is outside 0-65535" in capsys.readouterr().err


class ProtocolError(Exception):
    pass


def test_cli_main_turns_expected_failures_into_one_line(tmp_path, capsys):
    @cliutil.cli_main("tool", expected=(ProtocolError,))
    def main(argv):
        what = argv[0]
        if what == "missing":
            open(tmp_path / "missing")  # noqa: SIM115
        if what == "busy":
            with socket.socket() as a, socket.socket() as b:
                a.bind(("127.0.0.1", 0))
                a.listen()
                b.bind(a.getsockname())
        if what == "protocol":
            raise ProtocolError("bad swarm ID")
        if what == "bug":
            raise KeyError("a bug")
        return 0

    assert main(["ok"]) == 0
    assert main(["missing"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("tool: error: No such file or directory: ") and "missing" in err
    assert main(["busy"]) == 1
    assert "tool: error: Address already in use" in capsys.readouterr().err
    assert main(["protocol"]) == 1
    assert capsys.readouterr().err == "tool: error: bad swarm ID\n"
    with pytest.raises(KeyError):  # a bug keeps its traceback
        main(["bug"])


def test_int_in_names_the_value_and_range():
    parse = cliutil.int_in(1, 4095, "Map-Version")
    assert parse("1") == 1 and parse("4095") == 4095
    for bad, msg in (("0", "Map-Version 0 is outside 1..4095"), ("4096", "outside"),
                     ("x", "not a number")):
        with pytest.raises(argparse.ArgumentTypeError, match=msg):
            parse(bad)
