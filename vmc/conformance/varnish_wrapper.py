"""Varnish Cache under the http-proxy conformance contract (registry name ``varnish``).

    python -m vmc.conformance.varnish_wrapper proxy \
        --listen 127.0.0.1:8080 --upstream 127.0.0.1:9000

``varnishd -F`` with the upstream as its only backend and the built-in VCL
(no VCL of ours: what a default install does): requests with Authorization
or Cookie are passed, responses with Set-Cookie are not shared, concurrent
misses for one object are coalesced and (``beresp.do_stream``, the default)
streamed to every waiting client while the fetch runs. Its working directory
(``-n``) is a fresh temporary directory, removed on exit. Exit 127 when
varnishd is not installed.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from vmc.conformance.wrapping import UNSUPPORTED, parse, serve


def main(argv: list[str] | None = None) -> int:
    a = parse("varnish_wrapper", argv)
    if a.role != "proxy" or shutil.which("varnishd") is None:
        return UNSUPPORTED
    work = Path(tempfile.mkdtemp(prefix="conformance-varnish-"))
    work.chmod(0o755)  # varnishd's workers (user vcache) read the compiled VCL from here
    return serve(["varnishd", "-F", "-a", a.listen, "-b", a.upstream, "-n", str(work / "n"),
                  "-s", "malloc,256m", "-p", "default_ttl=120"], a.listen, work)


if __name__ == "__main__":
    sys.exit(main())
