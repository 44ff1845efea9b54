"""A Ctrl-C that lands while the toolkit forks (deliverykit.cliutil.stop_signals_held).

Each case runs in a fresh interpreter, so the at-fork hooks are registered in a known
order: first one that signals the child the moment it exists (the process group's Ctrl-C
arriving during the fork, which is what a CI run of the overhead experiment met once), then
logging's lock reset, then the toolkit's own.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="POSIX signal masks, Linux")

PRELUDE = textwrap.dedent("""
    import os, signal, sys, threading, time

    SIGNAL_CHILD = {signal_child}

    def group_signal_lands_now():
        if SIGNAL_CHILD:
            os.kill(os.getpid(), signal.SIGINT)

    os.register_at_fork(after_in_child=group_signal_lands_now)
    import logging  # noqa: F401  its at-fork hook runs next, as in the failed CI run
    from deliverykit import cliutil

    def fork_and_reap(body=None):
        pid = os.fork()
        if pid == 0:
            if body is not None:
                body()
            print("child ran its own code", flush=True)
            os._exit(0)
        return pid
""")


def _run(*parts: str, signal_child: bool) -> subprocess.CompletedProcess[str]:
    code = PRELUDE.format(signal_child=signal_child) + "\n".join(
        textwrap.dedent(part) for part in parts)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, cwd=os.getcwd())


def _status(text: str) -> str:
    lines = [ln for ln in text.splitlines() if ln.startswith("status ")]
    assert len(lines) == 1, text
    return lines[0]


REAP = """
    status = os.waitpid(pid, 0)[1]
    print("status", "signal %d" % os.WTERMSIG(status) if os.WIFSIGNALED(status)
          else "exit %d" % os.WEXITSTATUS(status), flush=True)
"""


def test_without_the_hold_the_signal_surfaces_inside_an_at_fork_hook():
    """The defect the hold removes, shown on this interpreter: the child's KeyboardInterrupt
    is raised in a hook, printed as 'Exception ignored ... Traceback', and the child goes on."""
    r = _run("pid = fork_and_reap()", REAP, signal_child=True)
    assert r.returncode == 0, r.stderr
    assert "Exception ignored" in r.stderr and "Traceback" in r.stderr
    assert "child ran its own code" in r.stdout and _status(r.stdout) == "status exit 0"


def test_held_fork_child_dies_of_a_signal_that_came_during_the_fork():
    r = _run("with cliutil.stop_signals_held():\n    pid = fork_and_reap()", REAP,
             signal_child=True)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr and "Exception ignored" not in r.stderr, r.stderr
    assert "child ran its own code" not in r.stdout
    assert _status(r.stdout) == f"status signal {signal.SIGINT.value}"


def test_held_fork_child_starts_with_the_callers_mask_and_handlers():
    body = """
        def show():
            mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])
            print("child mask", sorted(int(s) for s in mask),
                  "int", signal.getsignal(signal.SIGINT) is signal.default_int_handler,
                  "term", signal.getsignal(signal.SIGTERM) == signal.SIG_DFL, flush=True)
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})  # the caller's own block stays
        with cliutil.stop_signals_held():
            with cliutil.stop_signals_held():  # nested: the outer mask is what the child gets
                pid = fork_and_reap(show)
        print("parent mask", sorted(int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])),
              flush=True)
    """
    r = _run(body, REAP, signal_child=False)
    assert r.returncode == 0, r.stderr
    usr1 = int(signal.SIGUSR1)
    assert f"child mask [{usr1}] int True term True" in r.stdout, r.stdout
    assert f"parent mask [{usr1}]" in r.stdout
    assert _status(r.stdout) == "status exit 0"


def test_parent_takes_the_signal_after_the_block_not_inside_it():
    body = """
        recorded = []
        try:
            with cliutil.stop_signals_held():
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.05)
                recorded.append("child")
            print("not interrupted", flush=True)
        except KeyboardInterrupt:
            print("interrupted after", recorded, flush=True)
    """
    r = _run(body, signal_child=False)
    assert r.returncode == 0, r.stderr
    assert "interrupted after ['child']" in r.stdout, r.stdout + r.stderr


def test_a_helper_thread_that_holds_them_forks_children_that_still_stop():
    """The testbed's netlink thread holds the stop signals for good: a Ctrl-C goes to the main
    thread, a child it forks during a Ctrl-C dies of it, and one forked in quiet times still
    stops on SIGTERM (pyroute2 stops its netns helpers that way and waits)."""
    body = """
        from concurrent.futures import ThreadPoolExecutor

        pool = ThreadPoolExecutor(1, initializer=cliutil.hold_stop_signals_in_this_thread)

        def sleeper():
            time.sleep(30)

        pid = pool.submit(fork_and_reap, sleeper if not SIGNAL_CHILD else None).result()
        if not SIGNAL_CHILD:
            time.sleep(0.2)
            os.kill(pid, signal.SIGTERM)
    """
    main_thread = """
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)
            print("main thread missed it", flush=True)
        except KeyboardInterrupt:
            print("main thread interrupted", flush=True)
        pool.shutdown()
    """
    died = _run(body, REAP, main_thread, signal_child=True)
    assert died.returncode == 0 and "Traceback" not in died.stderr, died.stderr
    assert _status(died.stdout) == f"status signal {signal.SIGINT.value}"
    assert "main thread interrupted" in died.stdout

    stopped = _run(body, REAP, main_thread, signal_child=False)
    assert stopped.returncode == 0 and "Traceback" not in stopped.stderr, stopped.stderr
    assert _status(stopped.stdout) == f"status signal {signal.SIGTERM.value}"
    assert "child ran its own code" not in stopped.stdout
