"""The one signal and exit-code contract of every CLI (README, "Signals and exit codes"), on
:func:`deliverykit.cliutil.cli_main` and :class:`deliverykit.cliutil.Stopper` themselves: real
processes, real signals, real pipes."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time

import pytest

ROLE = textwrap.dedent("""
    import asyncio, sys
    from deliverykit import cliutil

    @cliutil.cli_main("role")
    def main(argv):
        async def run():
            stopper = cliutil.Stopper().install()
            print("ready", file=sys.stderr, flush=True)
            try:
                await stopper.wait(60)
            finally:
                stopper.remove()
            print('{"packets": 7}', flush=True)   # the same counters, whatever stopped us
            return stopper.exit_code()
        return asyncio.run(run())

    sys.exit(main())
""")

PLAIN = textwrap.dedent("""
    import sys, time
    from deliverykit import cliutil

    @cliutil.cli_main("plain")
    def main(argv):
        try:
            print("ready", file=sys.stderr, flush=True)
            time.sleep(60)
        finally:
            print("cleaned", flush=True)
        return 0

    sys.exit(main())
""")

ASYNC_PLAIN = textwrap.dedent("""
    import asyncio, sys
    from deliverykit import cliutil

    @cliutil.cli_main("aplain")
    def main(argv):
        async def run():
            try:
                print("ready", file=sys.stderr, flush=True)
                await asyncio.sleep(60)
            finally:
                print("cleaned", flush=True)
        asyncio.run(run())
        return 0

    sys.exit(main())
""")

CHATTY = textwrap.dedent("""
    import sys
    from deliverykit import cliutil

    @cliutil.cli_main("chatty")
    def main(argv):
        for i in range(200000):
            print("line", i)
        return 0

    sys.exit(main())
""")


def _start(code: str) -> subprocess.Popen:
    # A foreground Ctrl-C target has SIGINT at its default; a CI started as a background job
    # would otherwise hand the child SIGINT ignored.
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert proc.stderr is not None
    deadline = time.monotonic() + 30
    line = ""
    while "ready" not in line and time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line and proc.poll() is not None:
            break
    assert "ready" in line, f"never ready: {line!r}"
    return proc


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_role_with_stopper_prints_counters_and_exits_128_plus_signal(sig, code):
    proc = _start(ROLE)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == code, err
    assert out.strip() == '{"packets": 7}'
    assert "Traceback" not in err


@pytest.mark.parametrize("script", [PLAIN, ASYNC_PLAIN], ids=["sync", "asyncio"])
@pytest.mark.parametrize("sig, code, word", [(signal.SIGINT, 130, "interrupted"),
                                             (signal.SIGTERM, 143, "terminated")])
def test_command_without_stopper_unwinds_and_exits_128_plus_signal(script, sig, code, word):
    proc = _start(script)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == code, err
    assert "cleaned" in out  # finally blocks ran: SIGTERM did not kill the process outright
    assert err.strip().endswith(word) and "Traceback" not in err


def test_second_signal_cuts_a_stuck_cleanup_short():
    stuck = ROLE.replace('print(\'{"packets": 7}\', flush=True)',
                         'print("cleaning", file=sys.stderr, flush=True); await asyncio.sleep(60)')
    proc = _start(stuck)
    proc.send_signal(signal.SIGTERM)
    assert proc.stderr is not None
    assert "cleaning" in proc.stderr.readline()
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 143, err
    assert "Traceback" not in err


def test_closed_stdout_ends_quietly_like_cat():
    r = subprocess.run(f"{sys.executable} -c '{CHATTY}' | head -n 2; echo \"${{PIPESTATUS[0]}}\"",
                       shell=True, executable="/bin/bash", capture_output=True, text=True,
                       timeout=60)
    lines = r.stdout.splitlines()
    assert lines[:2] == ["line 0", "line 1"]
    assert lines[-1] == "141"
    assert r.stderr == "", r.stderr


FORKS = textwrap.dedent("""
    import asyncio, os, signal, sys, time
    from deliverykit import cliutil

    def fork_and_terminate():
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:              # a pyroute2-like helper: says it runs, then parks until SIGTERM
            os.write(w, b"x")
            time.sleep(60)
            os._exit(0)
        os.read(r, 1)
        os.kill(pid, signal.SIGTERM)
        _, status = os.waitpid(pid, 0)
        return os.WIFSIGNALED(status) and os.WTERMSIG(status)

    @cliutil.cli_main("forks")
    def main(argv):
        print("cli_main", fork_and_terminate(), flush=True)
        async def run():
            with cliutil.Stopper().installed():
                print("stopper", fork_and_terminate(), flush=True)
        asyncio.run(run())
        return 0

    sys.exit(main())
""")


def test_forked_children_start_with_sigterm_at_its_default():
    """pyroute2 stops its forked netns helper with SIGTERM and waits: a child that inherited
    cli_main's or a Stopper's handler never died, and `m2c experiment fig5` hung."""
    r = subprocess.run([sys.executable, "-c", FORKS], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    term = str(int(signal.SIGTERM))
    assert r.stdout.split() == ["cli_main", term, "stopper", term]
