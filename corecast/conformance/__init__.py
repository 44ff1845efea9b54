"""LISP control-plane conformance cases (protocol ``lisp``, RFC 9301) for map-servers and ETRs.

Contract (roles ``mapserver``, ``etr``); ADAPTER is the registry command:

``ADAPTER mapserver --addr 127.0.0.1 --port P --site NAME:PREFIX:KEYID:PSK``
    A map-server and map-resolver on UDP ADDR:P. It accepts Map-Registers
    for EID prefixes inside PREFIX authenticated with key KEYID / PSK
    (HMAC-SHA-256-128, RFC 9301 sec. 5.6) and answers Map-Requests sent to
    it directly: a Map-Reply for registrations that asked for proxy replies
    (P-bit), a Negative Map-Reply otherwise (sec. 8.3, 8.4). Replies go to
    the request's ITR-RLOC at the request's source port. Print ``READY``
    once it accepts datagrams; run until SIGTERM.

``ADAPTER etr --rloc 127.0.0.1 --prefix PREFIX --map-server HOST:PORT --key-id N --psk S --control-port C --data-port D``
    An ETR that registers PREFIX with RLOC ``--rloc`` at the map-server
    (signed Map-Registers, sec. 5.6, 8.2), sending them from
    ``--rloc``:C. Print ``READY`` once started; run until SIGTERM.

Exit 127 for a role not supported. Our implementation (``ours-lisp``) is
``python -m corecast.conformance.adapter``. The cases play the other side
with raw UDP sockets and :mod:`corecast.wire.codec`.

Not covered yet: the data plane (encapsulation flags, nonce echo, instance
ID, RFC 9300 sec. 5) and CoreCast ITR/ETR semantics (Algorithms 1 and 2).
"""
