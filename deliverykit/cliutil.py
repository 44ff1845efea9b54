"""What every command line of the toolkit shares: argument types that refuse bad
values while parsing, and an entry-point wrapper that turns an expected failure
(a missing file, a busy port, a value a protocol refuses) into one line on
stderr instead of a traceback.

Argument types raise :class:`argparse.ArgumentTypeError` from inside ``type=``,
where argparse turns them into ``prog: error: argument --x: ...`` and exit 2.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import functools
import ipaddress
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import TypeAlias, TypeVar

from deliverykit.deadline import within

__all__ = [
    "port",
    "hostport",
    "positive_int",
    "int_in",
    "nonnegative_int",
    "positive_float",
    "nonnegative_float",
    "existing_file",
    "output_path",
    "ip_address",
    "ip_network",
    "cli_main",
    "Stopper",
    "Terminated",
    "EXIT_SIGINT",
    "EXIT_SIGTERM",
    "EXIT_SIGPIPE",
]

# The exit codes of the one signal contract every CLI of the toolkit keeps (README, "Signals and
# exit codes"): a shell reports a process killed by signal N as 128 + N, and ours exit with the
# same code after cleaning up, so scripts cannot tell a clean stop from the default action.
EXIT_SIGINT = 128 + signal.SIGINT    # 130: Ctrl-C
EXIT_SIGTERM = 128 + signal.SIGTERM  # 143: kill, systemd stop, a test's terminate()
EXIT_SIGPIPE = 128 + signal.SIGPIPE  # 141: the reader of stdout left (`| head`), as cat exits


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


_N = TypeVar("_N", int, float)


def _number(kind: Callable[[str], _N], text: str, ok: Callable[[_N], bool], what: str) -> _N:
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
    """A file to write: ``-`` (stdout) or a path whose directory exists and is not a directory
    itself."""
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


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived outside a :class:`Stopper`: unwinds like Ctrl-C, so the same ``finally``
    blocks run (temporary files removed, counters printed), and :func:`cli_main` exits 143.

    A KeyboardInterrupt subclass because asyncio lets exactly those (and SystemExit) through its
    callbacks instead of logging them, and closes the loop's tasks on the way out."""


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    raise Terminated()


_OURS: set[object] = {_raise_terminated}  # handlers this module installed (Stopper adds asyncio's)


_STOP_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM})

#: thread ident -> the signal mask that thread had before :func:`stop_signals_held`
#: (or :func:`hold_stop_signals_in_this_thread`) blocked the stop signals; a child that
#: thread forks finds its own entry here (the ident survives the fork) and restores it
_HELD: dict[int, set[signal.Signals | int]] = {}


@contextlib.contextmanager
def stop_signals_held() -> Iterator[None]:
    """Hold SIGINT and SIGTERM off the calling thread while it forks and records the child.

    Ctrl-C at a terminal signals the whole process group. Without the hold, a child forked at
    that moment met the signal inside an at-fork hook (logging's lock reset): Python printed
    "Exception ignored ... Traceback" and the child carried on. With it, the parent takes the
    signal when the block ends, after its caller has recorded the child for clean-up; the
    child (see :func:`_default_signals_in_forked_child`) dies of a signal that arrived during
    the fork, as a new process would, and otherwise starts with the caller's mask. Nests."""
    me = threading.get_ident()
    saved = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
    outermost = me not in _HELD
    if outermost:
        _HELD[me] = saved
    try:
        yield
    finally:
        if outermost:
            del _HELD[me]
        signal.pthread_sigmask(signal.SIG_SETMASK, saved)


def hold_stop_signals_in_this_thread() -> None:
    """Block SIGINT and SIGTERM in a helper thread for good (a ThreadPoolExecutor
    ``initializer``): the kernel then hands them to the main thread, which acts on them, and a
    child the helper forks (pyroute2's netns helpers) starts as :func:`stop_signals_held`
    says."""
    saved = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
    _HELD.setdefault(threading.get_ident(), saved)


def _release_hold_in_child() -> None:
    saved = _HELD.get(threading.get_ident())
    _HELD.clear()  # the parent's other threads do not exist here
    if saved is None:
        return
    wanted = {sig: signal.getsignal(sig) for sig in _STOP_SIGNALS - saved}
    for sig, handler in wanted.items():
        if handler is not signal.SIG_IGN:
            # one that arrived during the fork, or arrives now, ends the child without a
            # Python handler running inside this hook
            signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, saved)
    for sig, handler in wanted.items():
        if handler is not None and handler is not signal.SIG_IGN:
            signal.signal(sig, handler)


def _default_signals_in_forked_child() -> None:
    """A forked child (pyroute2's netns helper, a multiprocessing worker) starts with SIGTERM
    and SIGINT as a new process has them, not with the handlers of the CLI it was forked from:
    pyroute2 stops its helper with SIGTERM and waits, and a helper that raised Terminated
    instead of exiting, or only poked the parent's event loop, hung the experiment for ever.
    Then, if the forking thread held the stop signals, the child lets them in again."""
    if signal.getsignal(signal.SIGTERM) in _OURS:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if signal.getsignal(signal.SIGINT) in _OURS:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    _release_hold_in_child()


os.register_at_fork(after_in_child=_default_signals_in_forked_child)


#: what ``signal.getsignal`` returns: a Python handler, SIG_DFL/SIG_IGN, or None (a
#: handler not installed from Python)
SignalHandler: TypeAlias = Callable[[int, FrameType | None], object] | int | signal.Handlers | None


class Stopper:
    """The one way a long-running role waits to be stopped: SIGINT and SIGTERM set :attr:`event`
    and record which arrived, so the role leaves its loop, prints the same counters either way,
    and returns :meth:`exit_code` (130 or 143; ``default`` when it ended by itself).

    ``stopper.install()`` inside the running loop; ``await stopper.wait(timeout)``;
    ``stopper.remove()`` (or ``with stopper.installed():``). A second signal while the role is
    still cleaning up is not swallowed: it acts as it would without a Stopper (Ctrl-C raises
    KeyboardInterrupt, SIGTERM raises :class:`Terminated`), so a stuck clean-up can always be
    cut short.
    """

    _SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.event = asyncio.Event()
        self.signum: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._previous: dict[int, SignalHandler] = {}

    def install(self, loop: asyncio.AbstractEventLoop | None = None) -> Stopper:
        loop = loop or asyncio.get_running_loop()
        self._loop = loop
        for sig in self._SIGNALS:
            self._previous[sig] = signal.getsignal(sig)
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, self._on_signal, sig)
                _OURS.add(signal.getsignal(sig))  # asyncio's wake-up handler: not for children
        return self

    def _on_signal(self, sig: int) -> None:
        if self.signum is None:
            self.signum = sig
            self.event.set()
            return
        # Second signal: hand both signals back so the next one stops us without waiting.
        self.remove()
        if sig == signal.SIGINT:
            raise KeyboardInterrupt
        raise Terminated()

    def remove(self) -> None:
        """Uninstall, restoring the handlers that were there before (asyncio alone would leave
        SIGTERM at its default action, which kills without clean-up)."""
        loop, self._loop = self._loop, None
        if loop is None:
            return
        for sig, previous in self._previous.items():
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.remove_signal_handler(sig)
            if previous is not None:
                with contextlib.suppress(ValueError, TypeError):
                    signal.signal(sig, previous)
        self._previous.clear()

    @contextlib.contextmanager
    def installed(self, loop: asyncio.AbstractEventLoop | None = None) -> Iterator[Stopper]:
        self.install(loop)
        try:
            yield self
        finally:
            self.remove()

    @property
    def stopped(self) -> bool:
        return self.signum is not None

    def exit_code(self, default: int = 0) -> int:
        """128 + the signal that stopped us, or ``default`` when none did."""
        return default if self.signum is None else 128 + self.signum

    def describe(self) -> str:
        """``"interrupted"`` (Ctrl-C), ``"terminated"`` (SIGTERM) or ``""``: for the stop line."""
        if self.signum == signal.SIGINT:
            return "interrupted"
        return "terminated" if self.signum == signal.SIGTERM else ""

    async def wait(self, timeout: float | None = None) -> bool:
        """Wait for a stop signal at most ``timeout`` seconds (None: until one comes); True if one
        came."""
        if self.event.is_set():
            return True
        with contextlib.suppress(asyncio.TimeoutError):
            await within(self.event.wait(), timeout)
        return self.event.is_set()


def _quiet_stdout() -> None:
    """The reader of stdout left: point fd 1 at /dev/null so the interpreter's final flush
    cannot raise a second BrokenPipeError and print "Exception ignored ..." on stderr."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


Main = Callable[..., int]  # main(argv: list[str] | None = None) -> int


def cli_main(prog: str, expected: tuple[type[BaseException], ...] = ()) -> Callable[[Main], Main]:
    """Wrap a ``main(argv) -> int``: expected failures become ``prog: error: ...`` and exit 1.

    ``expected`` adds a package's own error classes (decode errors, protocol
    refusals) to the ones every command can meet: OSError (files, sockets,
    permissions) and ValueError (a value the protocol layer refuses).  Anything
    else is a bug and keeps its traceback.

    The signal contract (README, "Signals and exit codes"): Ctrl-C exits 130 and SIGTERM 143,
    after the same clean-up (roles that run a loop use :class:`Stopper` and print their
    counters; anything else unwinds through KeyboardInterrupt / :class:`Terminated`); a reader
    of stdout that left (``| head``) ends the command quietly with 141, as ``cat`` does.
    """
    caught: tuple[type[BaseException], ...] = (OSError, ValueError, *expected)

    def wrap(main: Callable[..., int]) -> Callable[..., int]:
        @functools.wraps(main)
        def run(argv: list[str] | None = None) -> int:
            previous = None
            with contextlib.suppress(ValueError):  # ValueError: not the main thread
                previous = signal.signal(signal.SIGTERM, _raise_terminated)
            try:
                return main(argv)
            except Terminated:
                print(f"{prog}: terminated", file=sys.stderr)
                return EXIT_SIGTERM
            except KeyboardInterrupt:
                print(f"{prog}: interrupted", file=sys.stderr)
                return EXIT_SIGINT
            except BrokenPipeError:  # `prog ... | head`: the reader left; not an error
                _quiet_stdout()
                return EXIT_SIGPIPE
            except caught as exc:
                if isinstance(exc, OSError) and exc.errno == errno.EPIPE:
                    _quiet_stdout()
                    return EXIT_SIGPIPE
                print(f"{prog}: error: {_describe(exc)}", file=sys.stderr)
                if os.environ.get("DELIVERYKIT_TRACEBACK"):
                    raise
                return 1
            finally:
                if previous is not None:
                    with contextlib.suppress(ValueError, TypeError):
                        signal.signal(signal.SIGTERM, previous)

        return run

    return wrap


def _describe(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        where = exc.filename if exc.filename is not None else ""
        return f"{exc.strerror}{': ' + str(where) if where else ''}"
    text = str(exc) or type(exc).__name__
    return text
