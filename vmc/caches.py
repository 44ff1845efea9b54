"""Varnish and Squid as real subprocesses: what users pick instead of VMC (issue 6, bench/), and
Squid as the producer of real native ``access.log`` lines for the replay.

Both run in the foreground with every file (config, pid, logs, varnish's
working directory) inside their own temporary directory, listening on a free
loopback port only; no system service, no system path is touched. ``start()``
waits (bounded) until the cache answers HTTP on its port, and ``stop()``
terminates, kills if needed, reaps the process and removes the directory, so a
``with`` block never leaves a process behind.

- :meth:`Varnish.accelerator`: varnishd with its built-in VCL (``-b origin``):
  Varnish streams a fetch to every client while it is in flight
  (``beresp.do_stream``) and coalesces concurrent misses on the busy object
  (its "waiting list"), so late joiners share one origin fetch.
- :meth:`Squid.accelerator`: Squid in reverse-proxy (``accel``) mode with
  ``collapsed_forwarding on`` and a memory cache large enough for the object.
- :meth:`Squid.forward`: a forward proxy for ``http://`` URLs of an allowed
  origin that writes the native access log (``logformat squid``) the replay
  reads (:mod:`vmc.workload.squid`); it does not cache, so every request is a
  ``TCP_MISS`` that reaches the origin (a plain "Normal" trace).

When run as root the caches drop privileges to their own users (``varnish``,
``proxy``), so the directory is made readable and (for Squid) owned by that user.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from vmc.nginx import free_port


class CacheError(RuntimeError):
    """A cache process could not be started (or died while starting)."""


def _http_ready(port: int, path: str, timeout: float = 1.0) -> bool:
    """True once something on 127.0.0.1:port answers an HTTP request with a status line."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.settimeout(timeout)
            s.sendall(
                f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                "Connection: close\r\n\r\n".encode()
            )
            return s.recv(16).startswith(b"HTTP/1.")
    except OSError:
        return False


class _Cache:
    """A foreground cache process in its own directory (context manager)."""

    name = "cache"
    binary = ""
    #: User the cache switches to when started as root (directory ownership), or None.
    drop_user: str | None = None

    def __init__(self) -> None:
        if shutil.which(self.binary) is None:
            raise FileNotFoundError(f"{self.binary} is not installed (Debian package {self.name})")
        self.dir = Path(tempfile.mkdtemp(prefix=f"vmc-{self.name}-"))
        os.chmod(self.dir, 0o755)
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        self._log = open(self.dir / "stderr.log", "wb")  # noqa: SIM115 - closed in stop()

    @property
    def authority(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def argv(self) -> list[str]:  # pragma: no cover - subclasses
        raise NotImplementedError

    def _own(self) -> None:
        """Give the directory to the user the cache runs as (only when we are root)."""
        if os.geteuid() != 0 or self.drop_user is None:
            return
        try:
            pw = pwd.getpwnam(self.drop_user)
        except KeyError:
            return
        for p in [self.dir, *self.dir.rglob("*")]:
            os.chown(p, pw.pw_uid, pw.pw_gid)

    def start(self, timeout: float = 20.0, probe_path: str = "/_vmc_ready?size=0") -> _Cache:
        """Start and wait until it answers HTTP (``probe_path`` may reach the origin once)."""
        self._own()
        self.proc = subprocess.Popen(self.argv(), stdout=self._log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                msg = self.log_text()
                self.stop()
                raise CacheError(f"{self.name} exited with {self.proc.returncode}: {msg[-2000:]}")
            if _http_ready(self.port, probe_path):
                return self
            time.sleep(0.1)
        msg = self.log_text()
        self.stop()
        raise CacheError(
            f"{self.name} did not answer on {self.authority} within {timeout} s: {msg[-2000:]}"
        )

    def log_text(self) -> str:
        """What the process printed (and, for Squid, its cache.log)."""
        out = []
        for name in ("stderr.log", "cache.log"):
            p = self.dir / name
            if p.exists():
                out.append(p.read_text(errors="replace"))
        return "\n".join(out)

    def stop(self) -> None:
        """Terminate (then kill) the process group, reap it, remove the directory."""
        if self.proc is not None and self.proc.poll() is None:
            for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
                try:
                    os.killpg(self.proc.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    self.proc.wait(wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
        if self.proc is not None:
            try:
                # Children (varnish's child, squid's kids) share the process group: reap/kill
                # leftovers.
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            if self.proc.poll() is None:
                self.proc.wait(5)
        if not self._log.closed:
            self._log.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> _Cache:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class Varnish(_Cache):
    """varnishd -F with the built-in VCL in front of one backend."""

    name = "varnish"
    binary = "varnishd"
    drop_user = None  # the directory is 0755; varnishd's compiler and child only read it

    def __init__(self, backend: str, storage: str = "malloc,1g") -> None:
        super().__init__()
        self.backend = backend
        self.storage = storage

    @classmethod
    def accelerator(cls, backend: str, storage: str = "malloc,1g") -> Varnish:
        return cls(backend, storage)

    def argv(self) -> list[str]:
        return [
            "varnishd",
            "-F",
            "-a",
            self.authority,
            "-b",
            self.backend,
            "-n",
            str(self.dir / "work"),
            "-s",
            self.storage,
            "-p",
            "default_ttl=120",
        ]


SQUID_COMMON = """\
pid_filename {dir}/squid.pid
cache_log {dir}/cache.log
coredump_dir {dir}
shutdown_lifetime 0 seconds
icp_port 0
htcp_port 0
cache_mem {mem} MB
maximum_object_size_in_memory {mem} MB
maximum_object_size {mem} MB
memory_replacement_policy lru
"""

SQUID_ACCEL = """\
http_port 127.0.0.1:{port} accel defaultsite={origin} no-vhost
cache_peer {ohost} parent {oport} 0 no-query originserver name=origin
cache_peer_access origin allow all
http_access allow all
collapsed_forwarding on
refresh_pattern . 10 100% 60
access_log {access}
"""

SQUID_FORWARD = """\
http_port 127.0.0.1:{port}
acl origin_dst dst {ohost}
acl origin_port port {oport}
http_access allow localhost origin_dst origin_port
http_access deny all
cache deny all
strip_query_terms off
refresh_pattern . 0 0% 0
access_log stdio:{dir}/access.log squid
"""


class Squid(_Cache):
    """squid -N with a generated config (memory cache only: no cache_dir, so no ``squid -z``)."""

    name = "squid"
    binary = "squid"
    drop_user = "proxy"

    def __init__(self, body: str, origin: str, mem_mb: int = 1024) -> None:
        super().__init__()
        ohost, oport = origin.rsplit(":", 1)
        fmt = dict(
            dir=self.dir,
            port=self.port,
            origin=origin,
            ohost=ohost,
            oport=oport,
            mem=mem_mb,
            access=f"stdio:{self.dir}/access.log squid",
        )
        self.conf = self.dir / "squid.conf"
        self.conf.write_text(SQUID_COMMON.format(**fmt) + body.format(**fmt))

    @classmethod
    def accelerator(cls, origin: str, mem_mb: int = 1024) -> Squid:
        """Reverse proxy for ``origin`` with collapsed forwarding and a memory cache of
        ``mem_mb``."""
        return cls(SQUID_ACCEL, origin, mem_mb)

    @classmethod
    def forward(cls, origin: str, mem_mb: int = 64) -> Squid:
        """Forward proxy for ``http://origin/...`` only, logging every request in native format."""
        return cls(SQUID_FORWARD, origin, mem_mb)

    def argv(self) -> list[str]:
        return ["squid", "-N", "-f", str(self.conf)]

    def start(self, timeout: float = 20.0, probe_path: str = "/_vmc_ready?size=0") -> Squid:
        # The forward proxy answers an origin-form probe itself (an error page): still ready.
        super().start(timeout, probe_path)
        return self

    def access_log(self) -> list[str]:
        """The native access.log lines written so far (Squid writes a line when a
        transaction ends)."""
        p = self.dir / "access.log"
        return p.read_text(errors="replace").splitlines() if p.exists() else []
