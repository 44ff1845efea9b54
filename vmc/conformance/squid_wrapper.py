"""Squid with collapsed forwarding under the http-proxy conformance contract
(registry ``squid-collapsed``).

    python -m vmc.conformance.squid_wrapper proxy --listen 127.0.0.1:8080 --upstream 127.0.0.1:9000

Squid as a reverse proxy (``http_port ... accel``, the upstream as an
``originserver`` cache peer) with ``collapsed_forwarding on``, the setting
that makes concurrent misses for one URL share a single origin fetch: the
closest Squid gets to a stream-sharing proxy. Memory cache only, logs and pid
file in a fresh temporary directory, removed on exit. Exit 127 when squid is
not installed.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

from vmc.conformance.wrapping import UNSUPPORTED, parse, serve, split

CONF = """\
http_port {listen} accel defaultsite={upstream} no-vhost
cache_peer {uhost} parent {uport} 0 no-query no-digest originserver name=origin
cache_peer_access origin allow all
http_access allow all
collapsed_forwarding on
cache_mem 256 MB
maximum_object_size_in_memory 64 MB
maximum_object_size 64 MB
refresh_pattern . 1 100% 10
pid_filename {work}/squid.pid
cache_log {work}/cache.log
access_log {work}/access.log
coredump_dir {work}
shutdown_lifetime 0 seconds
"""


def main(argv: list[str] | None = None) -> int:
    a = parse("squid_wrapper", argv)
    if a.role != "proxy" or shutil.which("squid") is None:
        return UNSUPPORTED
    work = Path(tempfile.mkdtemp(prefix="conformance-squid-"))
    uhost, uport = split(a.upstream)
    (work / "squid.conf").write_text(CONF.format(listen=a.listen, upstream=a.upstream, uhost=uhost,
                                                 uport=uport, work=work))
    # as root, squid drops to cache_effective_user (proxy), which must write its logs here
    if os.geteuid() == 0:
        import pwd

        try:
            pw = pwd.getpwnam("proxy")
        except KeyError:
            pass
        else:
            os.chown(work, pw.pw_uid, pw.pw_gid)
    return serve(["squid", "-N", "-f", str(work / "squid.conf")], a.listen, work,
                 log=work / "cache.log")


if __name__ == "__main__":
    sys.exit(main())
