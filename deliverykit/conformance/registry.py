"""Implementations under test, kept as data, and how to drive them.

A registry entry (JSON)::

    {"name": "ours-fec", "protocol": "fec", "roles": ["encoder", "decoder"],
     "command": "{python} -m m2c conformance-adapter",
     "about": "the toolkit's own RFC 5170 / zfec codec"}

``command`` is split with shlex after substituting ``{python}`` (this
interpreter); a case runs ``command ROLE ARGS...``. The per-protocol contract
(which roles, which arguments, what goes on stdin/stdout) is written in each
protocol's ``conformance/__init__.py``. Exit status 127 means "this
implementation does not support that case": :class:`Unsupported` is raised and
the plugin reports a skip marked unsupported.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

UNSUPPORTED_EXIT = 127


class RoleProcess(subprocess.Popen[bytes]):
    """A started role: a Popen plus the readiness line it printed (None without one)."""

    ready_line: str | None = None


class Unsupported(Exception):
    """The implementation exited 127: it does not support this case."""


@dataclass(frozen=True)
class Implementation:
    name: str
    protocol: str
    command: str
    roles: tuple[str, ...] = ()
    about: str = ""
    env: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: dict) -> Implementation:
        missing = {"name", "protocol", "command"} - d.keys()
        if missing:
            raise ValueError(f"registry entry {d!r} lacks {', '.join(sorted(missing))}")
        return cls(
            name=str(d["name"]), protocol=str(d["protocol"]), command=str(d["command"]),
            roles=tuple(d.get("roles", ())), about=str(d.get("about", "")),
            env={str(k): str(v) for k, v in d.get("env", {}).items()},
        )

    def supports(self, role: str | None) -> bool:
        return role is None or not self.roles or role in self.roles

    def argv(self, role: str, args: Sequence[str] = (), netns: str | None = None) -> list[str]:
        cmd = shlex.split(self.command.replace("{python}", shlex.quote(sys.executable)))
        argv = [*cmd, role, *map(str, args)]
        return ["ip", "netns", "exec", netns, *argv] if netns else argv

    def _env(self, extra: dict[str, str] | None) -> dict[str, str]:
        return {**os.environ, **self.env, **(extra or {})}

    def run(
        self, role: str, *args: object, input: bytes | None = None, timeout: float = 60,
        env: dict[str, str] | None = None, netns: str | None = None,
    ) -> subprocess.CompletedProcess[bytes]:
        """Run one command to completion; raises Unsupported on exit 127."""
        cp = subprocess.run(
            self.argv(role, [str(a) for a in args], netns), input=input, capture_output=True,
            timeout=timeout, env=self._env(env),
        )
        if cp.returncode == UNSUPPORTED_EXIT:
            raise Unsupported(f"{self.name} does not support `{role} {' '.join(map(str, args))}`")
        return cp

    @contextmanager
    def start(
        self, role: str, *args: object, env: dict[str, str] | None = None,
        netns: str | None = None, ready_line: str | None = None, ready_timeout: float = 20,
    ) -> Iterator[RoleProcess]:
        """A long-running role (a seeder, a proxy, a map-server) for the body of a with.

        With ``ready_line``, waits until the process prints a stdout line
        starting with it (the contract's readiness signal) and keeps that line
        as ``proc.ready_line`` (e.g. ``READY <root hash>``). Always terminated,
        then killed, and reaped on exit.
        """
        proc = RoleProcess(
            self.argv(role, [str(a) for a in args], netns), stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, env=self._env(env), start_new_session=True,
        )
        try:
            proc.ready_line = None
            if ready_line is not None:
                proc.ready_line = _wait_ready(proc, ready_line, ready_timeout, self.name)
            yield proc
        finally:
            _stop(proc)


def _wait_ready(proc: subprocess.Popen[bytes], prefix: str, timeout: float, name: str) -> str:
    """Read stdout (raw, so no line hides in a buffer select cannot see) up to the ready line."""
    import selectors

    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    deadline = time.monotonic() + timeout
    pending = b""
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while time.monotonic() < deadline:
            if not sel.select(timeout=max(0.0, deadline - time.monotonic())):
                break
            chunk = os.read(fd, 65536)
            if not chunk:
                code = proc.wait(timeout=5)
                if code == UNSUPPORTED_EXIT:
                    raise Unsupported(f"{name} does not support this role")
                raise RuntimeError(f"{name} exited with {code} before it was ready")
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                text = line.decode(errors="replace").rstrip("\r")
                if text.startswith(prefix):
                    return text
    raise TimeoutError(f"{name} did not print {prefix!r} within {timeout} s")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


def vectors_dir(protocol: str) -> Path | None:
    """The test-vector folder for ``protocol``: ``$DELIVERYKIT_VECTORS/<protocol>``
    (set by ``--conformance-vectors``), else the source tree's ``tests/vectors/<protocol>``,
    else the copy a wheel installs under ``<prefix>/share/deliverykit/vectors/<protocol>``."""
    env = os.environ.get("DELIVERYKIT_VECTORS")
    candidates = [Path(env) / protocol] if env else []
    candidates.append(Path(__file__).resolve().parents[2] / "tests" / "vectors" / protocol)
    candidates += [Path(prefix) / "share" / "deliverykit" / "vectors" / protocol
                   for prefix in dict.fromkeys((sys.prefix, sys.base_prefix))]
    return next((c for c in candidates if c.is_dir()), None)


def load_registry(extra: Sequence[str | Path] = ()) -> dict[str, Implementation]:
    """The packaged registry plus any extra JSON files (later entries win)."""
    texts = [resources.files(__package__).joinpath("implementations.json").read_text()]
    texts += [Path(p).read_text() for p in extra]
    out: dict[str, Implementation] = {}
    for text in texts:
        data = json.loads(text)
        for entry in data.get("implementations", []):
            impl = Implementation.from_dict(entry)
            out[impl.name] = impl
    return out
