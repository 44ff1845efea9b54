"""PPSPP conformance cases (protocol ``ppspp``, RFC 7574 over UDP).

Contract (roles ``seeder``, ``leecher``); ADAPTER is the registry command:

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

A is one of ``bin32``, ``byte64``, ``chunk32``, ``bin64``, ``chunk64`` (sec.
7.8; default chunk32), C the chunk size in bytes (sec. 7.11; default 1024).
Exit 127 for an addressing method or role not supported (the case is then
*unsupported*).

Our peer is ``python -m swift.conformance.adapter`` (registry name
``ours-ppspp``). The cases use our own peer (``python -m swift``) as the
other end, a raw test peer built on :mod:`swift.wire.codec` for handshakes
and messages, and a UDP relay that corrupts chunks or uncle hashes in
flight (:mod:`swift.conformance.harness`).
"""

ADDRESSING = ("bin32", "byte64", "chunk32", "bin64", "chunk64")
