"""What every command line of the toolkit shares: argument types that refuse bad
values while parsing, and an entry-point wrapper that turns an expected failure
(a missing file, a busy port, a value a protocol refuses) into one line on
stderr instead of a traceback.

Argument types raise :class:`argparse.ArgumentTypeError` from inside ``type=``,
where argparse turns them into ``prog: error: argument --x: ...`` and exit 2.
"""

from __future__ import annotations

import argparse
import functools
import ipaddress
import os
import sys
from collections.abc import Callable
from pathlib import Path

__all__ = ["port", "hostport", "positive_int", "int_in", "nonnegative_int", "positive_float",
           "nonnegative_float", "existing_file", "output_path", "ip_address", "ip_network", "cli_main"]


def port(text: str) -> int:
    """A UDP/TCP port, 0 (let the kernel choose) to 65535."""
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port {value} is outside 0-65535")
    return value


def hostport(text: str) -> tuple[str, int]:
    """``HOST:PORT`` or ``[V6]:PORT``; the host is kept as written (a name is resolved later)."""
    host, sep, tail = text.rpartition(":")
    if not sep or not host:
        raise argparse.ArgumentTypeError(f"{text!r}: expected HOST:PORT")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise argparse.ArgumentTypeError(f"{text!r}: write an IPv6 address as [ADDR]:PORT")
    return host, port(tail)


def _number(kind: Callable, text: str, ok: Callable[[float], bool], what: str):
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not ok(value):
        raise argparse.ArgumentTypeError(f"{text} must be {what}")
    return value


def positive_int(text: str) -> int:
    return _number(int, text, lambda v: v > 0, "a positive integer")


def int_in(lo: int, hi: int, what: str = "value") -> Callable[[str], int]:
    """An argparse type for an integer in [lo, hi], e.g. ``int_in(1, 4095, "Map-Version")``."""
    def parse(text: str) -> int:
        try:
            value = int(text, 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"{what} {value} is outside {lo}..{hi}")
        return value
    parse.__name__ = what
    return parse


def nonnegative_int(text: str) -> int:
    return _number(int, text, lambda v: v >= 0, "zero or a positive integer")


def positive_float(text: str) -> float:
    return _number(float, text, lambda v: v > 0 and v != float("inf"), "a positive number")


def nonnegative_float(text: str) -> float:
    """Zero or more (options where 0 means "none" or "no limit")."""
    return _number(float, text, lambda v: 0 <= v < float("inf"), "zero or a positive number")


def existing_file(text: str) -> Path:
    """A file that exists and can be read (checked now, not halfway through a run)."""
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: is a directory, not a file")
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"{text}: no such file" if not path.exists()
                                         else f"{text}: not a regular file")
    if not os.access(path, os.R_OK):
        raise argparse.ArgumentTypeError(f"{text}: not readable")
    return path


def output_path(text: str) -> Path:
    """A file to write: ``-`` (stdout) or a path whose directory exists and is not a directory itself."""
    if text == "-":
        return Path(text)
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a directory")
    parent = path.resolve().parent
    if not parent.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: no such directory {parent}")
    if not os.access(parent, os.W_OK):
        raise argparse.ArgumentTypeError(f"{text}: directory {parent} is not writable")
    return path


def ip_address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an IPv4 or IPv6 address") from None


def ip_network(text: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    try:
        return ipaddress.ip_network(text, strict=False)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an IPv4 or IPv6 prefix") from None


def cli_main(prog: str, expected: tuple[type[BaseException], ...] = ()) -> Callable:
    """Wrap a ``main(argv) -> int``: expected failures become ``prog: error: ...`` and exit 1.

    ``expected`` adds a package's own error classes (decode errors, protocol
    refusals) to the ones every command can meet: OSError (files, sockets,
    permissions) and ValueError (a value the protocol layer refuses).  Ctrl-C
    exits 130 quietly; anything else is a bug and keeps its traceback.
    """
    caught = (OSError, ValueError, *expected)

    def wrap(main: Callable[..., int]) -> Callable[..., int]:
        @functools.wraps(main)
        def run(argv=None) -> int:
            try:
                return main(argv)
            except KeyboardInterrupt:
                print(f"{prog}: interrupted", file=sys.stderr)
                return 130
            except BrokenPipeError:  # `prog ... | head`: the reader left; not an error
                try:
                    sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - swallow the final flush
                except OSError:
                    pass
                return 0
            except caught as exc:
                print(f"{prog}: error: {_describe(exc)}", file=sys.stderr)
                if os.environ.get("DELIVERYKIT_TRACEBACK"):
                    raise
                return 1

        return run

    return wrap


def _describe(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        where = exc.filename if exc.filename is not None else ""
        return f"{exc.strerror}{': ' + str(where) if where else ''}"
    text = str(exc) or type(exc).__name__
    return text
