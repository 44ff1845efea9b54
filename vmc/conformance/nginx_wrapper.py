"""An example wrapper: nginx under the http-proxy conformance contract.

    python -m vmc.conformance.nginx_wrapper [--cache] proxy \
        --listen 127.0.0.1:8080 --upstream 127.0.0.1:9000

Writes an nginx.conf in a temporary prefix (reverse proxy to the upstream; with
``--cache``, ``proxy_cache`` + ``proxy_cache_lock``, the usual way to collapse
concurrent misses), runs nginx in the foreground, prints READY once the port
accepts connections, and stops nginx on SIGTERM (:func:`vmc.conformance.wrapping.serve`).
Registry names
``nginx-plain`` and ``nginx-cache-lock``. A wrapper for any other proxy has
the same shape: configure, start, wait for the port, print READY, wait.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from vmc.conformance.wrapping import UNSUPPORTED, parse, serve

CONF = """
daemon off;
master_process off;
worker_processes 1;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{ worker_connections 256; }}
http {{
  access_log {prefix}/access.log;
  client_body_temp_path {prefix}/body;
  proxy_temp_path {prefix}/proxy;
  fastcgi_temp_path {prefix}/fastcgi;
  uwsgi_temp_path {prefix}/uwsgi;
  scgi_temp_path {prefix}/scgi;
  {cache_path}
  server {{
    listen {listen};
    location / {{
      proxy_pass http://{upstream};
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      {cache}
    }}
  }}
}}
"""

CACHE = """proxy_cache conformance;
      proxy_cache_lock on;
      proxy_cache_lock_timeout 60s;
      proxy_cache_valid 200 10m;"""


def main(argv: list[str] | None = None) -> int:
    a = parse("nginx_wrapper", argv, [("--cache", "proxy_cache with proxy_cache_lock")])
    if a.role != "proxy" or shutil.which("nginx") is None:
        return UNSUPPORTED
    prefix = Path(tempfile.mkdtemp(prefix="conformance-nginx-"))
    cache_path = (f"proxy_cache_path {prefix}/cache keys_zone=conformance:1m use_temp_path=off;"
                  if a.cache else "")
    conf = prefix / "nginx.conf"
    conf.write_text(CONF.format(prefix=prefix, listen=a.listen, upstream=a.upstream,
                                cache_path=cache_path, cache=CACHE if a.cache else ""))
    argv = ["nginx", "-p", str(prefix), "-c", str(conf), "-e", str(prefix / "error.log")]
    return serve(argv, a.listen, prefix, log=prefix / "error.log")


if __name__ == "__main__":
    sys.exit(main())
