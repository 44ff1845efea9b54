"""``python -m swift`` = ``ppspp``."""

import sys


def _asyncio_without_ssl() -> None:
    """Import asyncio with no ``ssl`` in sight, so that it does not load it.

    asyncio imports ``ssl`` when it is first imported (``try: import ssl``
    in base_events, selector_events and sslproto) whether or not a TLS
    connection is ever made: 1.5 MB of the peer's resident memory (OpenSSL's
    libssl and its state; docs/swift-perf.md, "Peak memory (session 16)").  No
    ``ppspp`` role speaks TLS, so the process entered through :func:`main`
    imports asyncio while ``ssl`` is blocked, then unblocks it: a later
    ``import ssl`` works, only asyncio's own TLS (``ssl=`` of
    ``create_connection``) then reports that ssl is not available.  Nothing
    happens when asyncio or ssl is already imported (in a program that imports
    :mod:`swift.cli` as a library, or under pytest), and ``import swift``
    never does this: it is the command's entry point's choice alone."""
    if "asyncio" in sys.modules or "ssl" in sys.modules:
        return
    sys.modules["ssl"] = None  # type: ignore[assignment]  # the documented import block
    try:
        import asyncio  # noqa: F401
    finally:
        del sys.modules["ssl"]


#: subcommands that run other programs' code in this process (libtorrent,
#: experiments' own imports): asyncio is left to import ssl as usual there
_KEEP_SSL = ("experiment", "demo")


def main() -> int:
    """Entry point of ``ppspp`` and ``python -m swift``."""
    if sys.argv[1:2] and sys.argv[1] not in _KEEP_SSL:
        _asyncio_without_ssl()
    from swift.cli import main as cli_main
    return cli_main()


if __name__ == "__main__":
    sys.exit(main())
