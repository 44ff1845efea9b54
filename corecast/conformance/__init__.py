"""LISP control-plane conformance cases (protocol ``lisp``, RFC 9301) for map-servers and ETRs.

Contract (roles ``mapserver``, ``etr``); ADAPTER is the registry command:

``ADAPTER mapserver --addr 127.0.0.1 --port P --site NAME:PREFIX:KEYID:PSK``
    A map-server and map-resolver on UDP ADDR:P. It accepts Map-Registers
    for EID prefixes inside PREFIX authenticated with key KEYID / PSK
    (RFC 9301 sec. 5.6, with the algorithm it declares, see below) and answers
    Map-Requests sent to it in an ECM (RFC 9301 sec. 3, 5.8: "A Map-Resolver
    receives Encapsulated Map-Requests from its client ITRs"): a Map-Reply
    for registrations that asked for proxy replies (P-bit), a Negative
    Map-Reply otherwise (sec. 8.3, 8.4). Replies go to the request's
    ITR-RLOC at the request's source port. Print ``READY``
    once it accepts datagrams; run until SIGTERM.

``ADAPTER etr --rloc 127.0.0.1 --prefix PREFIX --map-server HOST:PORT --key-id N --psk S``
``--control-port C --data-port D [--cc-range R] [--algorithm-id A]``
    An ETR that registers PREFIX with RLOC ``--rloc`` at the map-server
    (signed Map-Registers, sec. 5.6, 8.2), sending them from
    ``--rloc``:C. Print ``READY`` once started; run until SIGTERM.
    Data plane (RFC 9300 sec. 5.3): LISP-encapsulated packets arriving on
    UDP ``--rloc``:D are decapsulated; an inner IPv4/UDP packet to an EID inside
    one of the ``--prefix`` prefixes (repeatable) is delivered natively, which on
    loopback means its UDP payload is sent to the inner destination address and
    port. Inner destinations outside the prefixes are dropped: an ETR decapsulates
    only for its own site (RFC 9300 sec. 4, 6), it is no open relay.
    Role ``corecast-etr`` (the same command): inner packets to a channel EID
    in a ``--cc-range`` carry CoreCast PDUs (IP protocol 253, our layout in
    docs/wire-corecast.md) and follow the paper's Algorithm 2: a payload PDU
    whose hash matches is stored per channel; a header PDU naming the stored
    hash makes the ETR send the payload to the header's client EID (inside a
    ``--prefix``) and port.

``ADAPTER itr --rloc 127.0.0.1 --inside 127.0.0.1:P --map-cache FILE --prefix LOCAL``
``[--map-resolver HOST:PORT] [--control-port C] [--cc-range R]``
    An ITR whose own site is the EID prefix LOCAL (10.9.0.0/16: the inner
    packets come from it): inner IP packets arrive as UDP payloads on the inside address P
    (the loopback stand-in for its inside interface); each is
    LISP-encapsulated (RFC 9300 sec. 5) and sent to UDP port 4341 of the RLOC
    that FILE (lines ``prefix rloc[,rloc] [ttl_seconds]``) maps its
    destination EID to. With ``--map-resolver``, an EID not in the map-cache
    is resolved by a Map-Request (plain or in an ECM, RFC 9301 sec. 5.2,
    5.8) whose Map-Reply goes to the request's ITR-RLOC and source port.
    Role ``corecast-itr`` (same command, with ``--cc-range``): CoreCast PDUs
    to a channel EID follow the paper's Algorithm 1 (payload stored per
    channel, sent once per ETR RLOC before the first header for that RLOC).

Options beyond plain LISP (exit 127 if not supported):

``... itr ... --data-port D [--echo-nonce]``
    Also an ETR (an xTR): LISP packets arriving on UDP ``--rloc``:D are
    decapsulated and delivered natively, and its own encapsulated packets
    leave from that port.  With ``--echo-nonce`` (RFC 9300 sec. 10.1) it
    echoes a nonce received with N+E set on its next packet to that RLOC (N
    set, E clear), and requests echoes itself: N+E with one nonce for the
    whole request state, which ends when the nonce comes back.
``... itr ... --data-port D --map-version V``
    Map-versioning (RFC 9302) with V as its own mapping's version: packets
    to an EID whose mapping (from a Map-Reply record) has a Map-Version carry
    the V-bit with Source = V and Dest = that version; received packets whose
    Dest Map-Version is newer than V are dropped, older ones delivered and
    answered with a Solicit-Map-Request (Map-Request, S-bit) to UDP 4342 of
    the sender's RLOC (sec. 7.1).
``... itr ... --instance-id N`` / ``... etr ... --instance-id N``
    RFC 9300 sec. 5.3, 8: the ITR sets the I-bit and the 24-bit Instance ID
    in every header (its map-cache FILE is instance N's); the ETR
    decapsulates only packets of instance N (I-bit clear counts as 0) and
    registers its prefix in instance N (LCAF Instance ID, RFC 8060 sec. 4.1).
``... mapserver ... --instance-id N`` (repeatable)
    The sites may also register instance N: registrations are keyed by
    (Instance ID, prefix), Map-Requests name the instance in an LCAF
    Instance ID address and are answered from that instance only.

Cases marked root start the implementation inside a network namespace
(``Implementation.start(..., netns=...)``, i.e. ``ip netns exec NS ADAPTER ...``).

What an implementation declares about itself (authentication algorithms and
Key ID style, whether it runs only in a network namespace, fixed ports) is in
:mod:`corecast.conformance.caps`: environment variables set in its registry
entry's ``env``.  Open Overlay Router runs through
:mod:`corecast.conformance.oor_wrapper` (registry ``oor``, ``$OOR_BIN``).

Exit 127 for a role not supported. Our implementation (``ours-lisp``) is
``python -m corecast.conformance.adapter``. The cases play the other side
with raw UDP sockets and :mod:`corecast.wire.codec`.

Not covered yet: Map-Notify (RFC 9301 sec. 5.7), SMR handling by the ITR,
Source Map-Version checks, Locator-Status-Bits reactions, IPv6 EIDs and RLOCs.
"""
