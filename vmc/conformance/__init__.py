"""HTTP proxy conformance cases (protocol ``http-proxy``): a proxy in front of our origin.

Contract (role ``proxy``)::

    ADAPTER proxy --listen HOST:PORT --upstream HOST:PORT

starts a proxy listening on HOST:PORT (chosen free by the suite) that sends
every origin-form request it receives (``GET /path?query``, any Host) to the
HTTP/1.1 origin at ``--upstream`` (a gateway / reverse proxy, RFC 9110 sec.
7.6). It prints a line starting with ``READY`` on stdout once it accepts
connections, and runs until SIGTERM. Exit 127 if it cannot do this.

For another proxy a user writes a tiny wrapper: e.g. for nginx, write a
config with ``listen HOST:PORT; location / { proxy_pass http://UPSTREAM;
proxy_buffering off; }``, start ``nginx -c CONF -g 'daemon off;'``, wait for the
port, print READY, exec. Ours is ``python -m vmc.conformance.adapter`` (registry
name ``ours-http-proxy``), VMC's sharing proxy.

The origin is ours (:mod:`vmc.aio.origin`, run as ``python -m vmc origin``):
deterministic bodies (byte i of ``/p?size=N`` is a function of p and i),
pacing (``rate=``), mid-stream death (``fail_at=``), ``cc=``, ``cookie=1`` and a
request counter at ``/_origin/stats``. The cases (RFC 9110 sec. 14, 15.3.7;
RFC 9111 sec. 3.5, 5.2.2; RFC 9112 sec. 6.3) are in ``test_http_proxy_cases``;
late-joiner behaviour (waits / shares / refetches) is a *finding* recorded as
a property ``late_joiner``, not a pass/fail.
"""
