"""nginx as a real subprocess: a static origin serving generated files, or the
``proxy_cache_lock`` proxy we compare against (issue 6, bench/).

Both run unprivileged-style in the foreground (``daemon off; master_process off``)
with every path (pid, logs, temp dirs, cache) inside a temporary prefix, on a
loopback port. Files are generated with :func:`vmc.aio.origin.body_slice`, so
the same expected bytes apply whichever origin served them.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from vmc.aio.origin import body_slice


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_object(root: Path, name: str, size: int) -> Path:
    """Write ``root/name`` with the deterministic body of path ``/name``."""
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    step = 1 << 20
    with open(path, "wb") as fh:
        for a in range(0, size, step):
            fh.write(body_slice("/" + name, a, min(size, a + step)))
    return path


_COMMON = """
daemon off;
master_process off;
worker_processes 1;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{ worker_connections 1024; }}
http {{
  access_log {prefix}/access.log;
  client_body_temp_path {prefix}/tmp/body;
  proxy_temp_path {prefix}/tmp/proxy;
  fastcgi_temp_path {prefix}/tmp/fastcgi;
  uwsgi_temp_path {prefix}/tmp/uwsgi;
  scgi_temp_path {prefix}/tmp/scgi;
  keepalive_timeout 5;
  {http}
}}
"""

ORIGIN_HTTP = """
  server {{
    listen {listen};
    root {root};
    location / {{ {limit} }}
  }}
"""

LOCK_PROXY_HTTP = """
  proxy_cache_path {prefix}/cache levels=1:2 keys_zone=vmc:10m max_size=4g inactive=10m use_temp_path=off;
  server {{
    listen 127.0.0.1:{port};
    location / {{
      proxy_pass http://{upstream};
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_cache vmc;
      proxy_cache_lock on;
      proxy_cache_lock_timeout 300s;
      proxy_cache_lock_age 300s;
      proxy_cache_valid 200 10m;
      proxy_read_timeout 300s;
    }}
  }}
"""  # noqa: E501 (one nginx directive per line, as nginx -T prints it)


class Nginx:
    """A foreground nginx; use as a context manager. ``port`` is where it listens."""

    def __init__(
        self, http_block: str, port: int | None = None, listen: str | None = None, **fmt: object
    ) -> None:
        if shutil.which("nginx") is None:
            raise FileNotFoundError("nginx is not installed (Debian package nginx-light)")
        self.prefix = Path(tempfile.mkdtemp(prefix="vmc-nginx-"))
        (self.prefix / "tmp").mkdir()
        self.port = port or free_port()
        self.listen = listen or f"127.0.0.1:{self.port}"
        http = http_block.format(prefix=self.prefix, port=self.port, listen=self.listen, **fmt)
        self.conf = self.prefix / "nginx.conf"
        self.conf.write_text(_COMMON.format(prefix=self.prefix, http=http))
        self.proc: subprocess.Popen | None = None

    @classmethod
    def origin(cls, root: Path, rate: str | None = None, listen: str | None = None) -> Nginx:
        """Static files from ``root``; ``rate`` e.g. "5m" sets limit_rate (bursty: see the issue).

        ``listen`` e.g. "0.0.0.0:80" for a testbed host (then port is 80 and start() needs
        popen/probe).
        """
        limit = f"limit_rate {rate};" if rate else ""
        port = int(listen.rsplit(":", 1)[1]) if listen else None
        return cls(ORIGIN_HTTP, port=port, listen=listen, root=root, limit=limit)

    @classmethod
    def cache_lock_proxy(cls, upstream: str) -> Nginx:
        """A caching proxy with proxy_cache_lock in front of ``upstream`` ("host:port")."""
        return cls(LOCK_PROXY_HTTP, upstream=upstream)

    @property
    def authority(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def argv(self) -> list[str]:
        return [
            "nginx",
            "-p",
            str(self.prefix),
            "-c",
            str(self.conf),
            "-e",
            str(self.prefix / "error.log"),
        ]

    def start(self, timeout: float = 10.0, popen=None, probe=None) -> Nginx:
        """Start and wait until it accepts connections.

        ``popen(argv, **kw)`` starts it elsewhere (e.g. ``Testbed.popen`` bound to a host) and
        ``probe() -> bool`` tells when it listens there; by default a local subprocess and a
        connect to 127.0.0.1:port.
        """
        if popen is None:
            self.proc = subprocess.Popen(
                self.argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
            )
        else:
            self.proc = popen(self.argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

        def local_probe() -> bool:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return True
            except OSError:
                return False

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                err = self.proc.stderr.read().decode() if self.proc.stderr else ""
                raise RuntimeError(f"nginx exited: {err} {self.error_log()}")
            if (probe or local_probe)():
                return self
            time.sleep(0.05)
        self.stop()
        raise RuntimeError("nginx did not start listening")

    def error_log(self) -> str:
        p = self.prefix / "error.log"
        return p.read_text() if p.exists() else ""

    def access_log(self) -> list[str]:
        p = self.prefix / "access.log"
        return p.read_text().splitlines() if p.exists() else []

    def body_bytes(self) -> int:
        """Sum of $body_bytes_sent over the access log (nginx's default "combined" format)."""
        total = 0
        for line in self.access_log():
            m = re.search(r'" (\d{3}) (\d+) ', line)
            if m:
                total += int(m.group(2))
        return total

    def rss(self) -> int:
        """Resident memory of the nginx process in bytes (0 if unknown)."""
        if self.proc is None:
            return 0
        try:
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        except OSError:
            pass
        return 0

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if self.proc is not None and self.proc.stderr:
            self.proc.stderr.close()
        shutil.rmtree(self.prefix, ignore_errors=True)

    def __enter__(self) -> Nginx:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def vm_rss(pid: int | None = None) -> int:
    """Resident memory of a process (default: this one) in bytes."""
    try:
        for line in Path(f"/proc/{pid or os.getpid()}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0
