"""Store decisions in the order items reach the pipeline.

Items are fingerprinted in parallel (worker processes, ``CONCURRENT_ITEMS`` at a time), so
their store checks would otherwise run in the order their fingerprints come back: a copy with
tracking parameters that finished first was kept and its clean original, yielded before it,
dropped. Each item takes a turn when it arrives; its check waits for the turns before it.
"""

from __future__ import annotations

import concurrent.futures

from .loop import await_future

__all__ = ["Turn", "Turns"]


class Turn:
    """One item's place in line: :meth:`wait` before the store call, :meth:`done` after
    it (always: a turn never given back would stop every item after it)."""

    __slots__ = ("_before", "_mine")

    def __init__(self, before: concurrent.futures.Future[None]) -> None:
        self._before = before
        self._mine: concurrent.futures.Future[None] = concurrent.futures.Future()

    async def wait(self) -> None:
        if not self._before.done():
            await await_future(self._before)

    def done(self) -> None:
        if not self._mine.done():
            self._mine.set_result(None)


class Turns:
    """Hands out turns in arrival order (on the crawl's loop: not thread-safe)."""

    def __init__(self) -> None:
        self._last: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._last.set_result(None)

    def take(self) -> Turn:
        turn = Turn(self._last)
        self._last = turn._mine
        return turn
