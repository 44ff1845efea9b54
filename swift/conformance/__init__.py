"""PPSPP conformance cases (protocol ``ppspp``, RFC 7574 over UDP).

Contract (roles ``seeder``, ``leecher``, ``live-source``, ``live-viewer``);
ADAPTER is the registry command:

``ADAPTER seed FILE --port P [--addressing A] [--chunk-size C]``
    Seed FILE on UDP 127.0.0.1:P (static content, Merkle hash tree
    integrity with SHA-256, protocol version 1; sec. 5, 7). Print a line
    ``READY <root hash in hex>`` once datagrams are accepted; run until
    SIGTERM.

``ADAPTER leech ROOTHASH HOST:PORT -o FILE [--addressing A] [--chunk-size C] [--timeout T]``
    Download the content with that root hash from the peer at HOST:PORT
    into FILE; exit 0 only once every chunk is verified and written; exit 1
    if that did not happen within T seconds (default 30). A chunk that fails
    verification must never be written as content.

``ADAPTER live-source FILE --port P [--per-sig N] [--window W] [--rate R] [--chunk-size C]``
    Inject FILE as a live stream (sec. 6.1: swarm ID = the source's public
    key; Unified Merkle Tree with a SIGNED_INTEGRITY for every N chunks,
    sec. 6.1.2; ECDSA P-256 / SHA-256, sec. 7.7; live discard window of W
    chunks, sec. 6.2, 7.9) at R bytes/s on UDP 127.0.0.1:P. Print
    ``READY <swarm ID in hex>`` once datagrams are accepted; after the end of
    FILE keep serving until SIGTERM. Defaults N=4, W=4096, R=200000.

``ADAPTER live-view SWARMID HOST:PORT -o FILE [--per-sig N] [--window W] [--bytes B] [--timeout T]``
    Join the live stream at HOST:PORT and write the chunks it has verified
    (signature, then hashes) to FILE in order, starting wherever it joins;
    exit 0 once B bytes are written, 1 if that did not happen within T
    seconds. A chunk whose munro signature does not verify must never be
    written.

A is one of ``bin32``, ``byte64``, ``chunk32``, ``bin64``, ``chunk64`` (sec.
7.8; default chunk32), C the chunk size in bytes (sec. 7.11; default 1024).
Exit 127 for an addressing method or role not supported (the case is then
*unsupported*).

Dialect: an implementation of draft-10 as libswift speaks it declares
``"env": {"PPSPP_PROFILE": "libswift"}`` in its registry entry; the cases
then use SHA-1 Merkle trees (so ``READY`` and ROOTHASH are 40 hex digits),
send no Chunk Size option and run our own peer with ``--profile libswift``
(docs/swift-libswift-compat.md). The default is ``rfc`` (RFC 7574, SHA-256).

Our peer is ``python -m swift.conformance.adapter`` (registry name
``ours-ppspp``). The cases use our own peer (``python -m swift``) as the
other end, a raw test peer built on :mod:`swift.wire.codec` for handshakes
and messages, and a UDP relay that corrupts chunks or uncle hashes in
flight (:mod:`swift.conformance.harness`).
"""

ADDRESSING = ("bin32", "byte64", "chunk32", "bin64", "chunk64")
