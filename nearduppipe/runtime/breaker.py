"""A circuit breaker for the store: after a few failures in a row, stop asking it for a while.

A Redis store that is down or hung makes every check wait for its client's timeouts and
retries (5 s, and two more tries): under ``NEARDUP_ON_STORE_ERROR = "keep"`` a crawl became 18x
slower while every page was let through anyway. After :data:`THRESHOLD` store failures in a row
the runtime lets pages through unchecked at once (counted like any store error). When the
back-off is over, one probe of the store runs in the background (no page waits for it); its
success closes the breaker, its failure doubles the back-off, up to :data:`MAX_BACKOFF`. Only
the crawl's thread uses it, so it needs no lock.
"""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["MAX_BACKOFF", "THRESHOLD", "Breaker"]

THRESHOLD = 3  # store failures in a row that open the breaker
BACKOFF = 2.0  # seconds of the first back-off
MAX_BACKOFF = 60.0


class Breaker:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.failures = 0  # in a row
        self.backoff = BACKOFF
        self.open_until: float | None = None  # while set, the store is not asked by pages
        self.opened_at: float | None = None  # when the current outage was first noticed
        self.probing = False  # a background call is finding out whether the store is back
        self.skipped = 0  # pages let through without asking, in this outage

    @property
    def open(self) -> bool:
        return self.open_until is not None

    def skip(self) -> bool:
        """Whether a page must not ask the store now (counted in :attr:`skipped`)."""
        if self.open_until is None:
            return False
        self.skipped += 1
        return True

    def probe_due(self) -> bool:
        """Whether to start the probe now: the back-off is over and none is running."""
        if self.open_until is None or self.probing or self.clock() < self.open_until:
            return False
        self.probing = True
        return True

    def success(self) -> float | None:
        """The store answered; returns how long it was down if the breaker was open."""
        down = None if self.opened_at is None else self.clock() - self.opened_at
        self.failures, self.backoff, self.probing = 0, BACKOFF, False
        self.open_until = self.opened_at = None
        return down

    def failure(self) -> float | None:
        """The store failed; returns the back-off if this failure (re)opened the breaker.

        Once it is open, only the probe's failure doubles the back-off: the failures of calls
        that were already under way when it opened (every page in flight when the store went
        down, 16 at once in a crawl) are the same outage, not longer ones. Before, they
        doubled it each in turn, and a 5-second full disk opened it for 60 s at once."""
        self.failures += 1
        probed, self.probing = self.probing, False
        if self.failures < THRESHOLD:
            return None
        now = self.clock()
        if self.open_until is not None and not probed:
            return None  # (a call from before the opening: the back-off runs already)
        if self.opened_at is None:
            self.opened_at, self.skipped = now, 0
        backoff = self.backoff
        self.open_until = now + backoff
        self.backoff = min(2 * backoff, MAX_BACKOFF)
        return backoff
