"""The crawl's view of its store's health: the circuit breaker (:mod:`.breaker`) with what the
crawl does around it: a page that is not to ask the store is let through at once, one probe
runs in the background when the back-off is over, and each change is counted and said once."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ..stores.base import StoreUnavailable
from .breaker import Breaker
from .loop import start_coroutine
from .policy import StoreCallError
from .stats import logger

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

__all__ = ["StoreHealth"]


class StoreHealth:
    def __init__(
        self,
        crawler: Crawler,
        probe: Callable[[], Awaitable[Any]],
        on_store_error: str,
    ) -> None:
        """``probe``: one cheap call of the store, off the loop (its size)."""
        assert crawler.stats is not None
        self.crawler = crawler
        self.stats = crawler.stats
        self.breaker = Breaker()
        self._probe_call = probe
        self._policy = on_store_error

    @property
    def down(self) -> bool:
        """The breaker is open: the store is not being asked."""
        return self.breaker.open

    def ask(self) -> None:
        """Raise at once, without asking the store, while the breaker is open."""
        breaker = self.breaker
        if breaker.skip():
            self.stats.inc_value("neardup/store_down/skipped")
            if breaker.probe_due():
                start_coroutine(self._probe())
            raise StoreCallError(
                StoreUnavailable(
                    f"not asked: the store failed {breaker.failures} times in a row (it is "
                    "tried again in the background)"
                )
            )

    async def _probe(self) -> None:
        """Whether the store answers again: one cheap call, in the thread pool (never a page's)."""
        try:
            await self._probe_call()
        except Exception:
            self.failed()
        else:
            self.answered()

    def answered(self) -> None:
        """A store call succeeded (cheap when the store was not failing)."""
        if not self.breaker.failures:
            return
        down = self.breaker.success()
        if down is not None:
            self.stats.inc_value("neardup/store_down/recovered")
            logger.warning(
                "nearduppipe: the store answers again after %(down).0f s; %(n)d pages were let "
                "through without asking it (counted in neardup/store_error)",
                {"down": down, "n": self.breaker.skipped},
                extra={"crawler": self.crawler},
            )

    def failed(self) -> None:
        """A store call failed as unavailable."""
        backoff = self.breaker.failure()
        if backoff is None:
            return
        self.stats.inc_value("neardup/store_down/backoff")
        logger.warning(
            "nearduppipe: the store failed %(n)d times in a row: not asking it for %(s).0f s; "
            "pages are let through unchecked meanwhile (NEARDUP_ON_STORE_ERROR = %(policy)r) "
            "while it is tried again in the background",
            {"n": self.breaker.failures, "s": backoff, "policy": self._policy},
            extra={"crawler": self.crawler},
        )
