"""Awaiting with a deadline without ever losing a cancellation (every timed await in the drivers).

Python 3.11's ``asyncio.wait_for`` returns the inner result and swallows the cancellation
when the awaited operation completes in the same loop iteration as the cancel (CPython
gh-86296; fixed in 3.12). A cancelled session pump then ran on: a lost cancel is a leak (an
upstream slot, an origin transfer nobody reads). :func:`within` uses ``asyncio.timeout`` where
it exists (3.11+: no extra task per read, and a cancel always wins) and otherwise
``asyncio.wait``, which never catches the caller's cancellation either.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")

__all__ = ["within"]


if sys.version_info >= (3, 11):

    async def within(aw: Awaitable[T], timeout: float | None) -> T:
        """``await aw``, raising TimeoutError after ``timeout`` s (None: no deadline); a cancel
        of the caller always propagates."""
        async with asyncio.timeout(timeout):
            return await aw

else:  # pragma: no cover - the venv and CI run 3.11+

    async def within(aw: Awaitable[T], timeout: float | None) -> T:
        """``await aw``, raising TimeoutError after ``timeout`` s (None: no deadline); a cancel
        of the caller always propagates."""
        inner = asyncio.ensure_future(aw)
        try:
            done, _ = await asyncio.wait({inner}, timeout=timeout)
        except asyncio.CancelledError:
            inner.cancel()
            raise
        if not done:
            inner.cancel()
            await asyncio.gather(inner, return_exceptions=True)
            raise asyncio.TimeoutError  # TimeoutError itself from 3.11 on
        return inner.result()
