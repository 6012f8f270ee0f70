"""What a failure while checking a page or item does: the page or item is always kept; how it is
counted and logged depends on the failure.

- ``StoreUnavailable`` from any backend (Redis unreachable, a sqlite commit that failed):
  ``NEARDUP_ON_STORE_ERROR`` decides; ``keep`` lets pages through (counted in
  ``neardup/store_error``, logged at most once a minute), ``stop`` closes the spider. Each
  page (or item) let through is also counted in ``neardup/let_through/store_error``: unlike
  ``store_error``, which counts a failed periodic commit and a failed last commit too, it
  counts pages, so that ``checked + skipped/* + let_through/store_error`` is every page the
  middleware judged.
- A key the store refuses (``BadKey``, a ``ValueError``): ``skipped/bad_key``, logged once.
- A page over ``NEARDUP_PAGE_TIMEOUT``: ``skipped/timeout``, a warning per page.
- A worker that died, or a worker pool that broke twice while the page waited (it is retried
  once on a new pool): ``skipped/worker_died``, an error per page; under ``stop`` the spider
  is closed (``neardup_worker_died``).
- Anything else: ``skipped/error``, an error with the traceback the first time.
"""

from __future__ import annotations

import contextlib
import time
from typing import TYPE_CHECKING

from ..errors import NearDupError
from ..stores.base import BadKey, StoreUnavailable
from .executor import PageTimeout, WorkerDied
from .loop import start_coroutine
from .stats import Source, StatsLog, logger, shown

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

__all__ = ["NOT_A_PAGE", "BadKey", "FailurePolicy", "StoreCallError"]

# the key the runtime reports a failed periodic commit under: a failure, but no page let through
NOT_A_PAGE = "(periodic commit)"


class StoreCallError(NearDupError):
    """Wraps an exception raised by the store call (not by fingerprinting), so that a
    ``ValueError`` from the store is told apart from one raised while extracting text."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


class FailurePolicy:
    def __init__(self, crawler: Crawler, log: StatsLog, *, on_store_error: str) -> None:
        self.crawler = crawler
        self.log = log
        self.on_store_error = on_store_error
        self._last_store_error_log = -1e9
        self._stopping = False
        self._extra = {"crawler": crawler}
        self.last_store_error: str | None = None  # (said again when the crawl closes)

    def handle(self, source: Source, key: str, exc: BaseException) -> str:
        """Count and log a failure; the caller keeps the page or item. Returns the reason the
        stats count it under (``store_error``, ``bad_key``, ``timeout``, ``worker_died`` or
        ``error``): what ``response.meta["neardup"]["skipped"]`` says too."""
        if isinstance(exc, StoreCallError):
            cause = exc.cause
            if isinstance(cause, StoreUnavailable):
                if key != NOT_A_PAGE:
                    self.log.inc(source, "let_through/store_error")
                self._store_unavailable(cause)
                return "store_error"
            if isinstance(cause, BadKey):
                if self.log.count(source, "skipped/bad_key") == 1:
                    logger.warning(
                        "nearduppipe: the store refused the key %(key)r, keeping it unchecked "
                        "(further ones are counted in neardup/skipped/bad_key): %(exc)s",
                        {"key": key, "exc": cause},
                        extra=self._extra,
                    )
                return "bad_key"
            exc = cause
        if isinstance(exc, PageTimeout):
            self.log.skip(source, "timeout")
            logger.warning(
                "nearduppipe: gave up checking %(key)s, keeping it: %(exc)s (NEARDUP_PAGE_TIMEOUT)",
                {"key": shown(key), "exc": exc},
                extra=self._extra,
            )
            return "timeout"
        if isinstance(exc, WorkerDied):
            self.log.skip(source, "worker_died")
            stop = self.on_store_error == "stop"
            logger.error(
                "nearduppipe: could not check %(key)s, keeping it%(stop)s: %(exc)s",
                {"key": shown(key), "exc": exc, "stop": " and stopping the spider" if stop else ""},
                extra=self._extra,
            )
            if stop:
                self._stop("neardup_worker_died")
            return "worker_died"
        first = self.log.count(source, "skipped/error") == 1
        logger.error(
            "nearduppipe: could not check %(key)s, keeping it: %(exc)r",
            {"key": shown(key), "exc": exc},
            exc_info=exc if first else None,
            extra=self._extra,
        )
        return "error"

    def _store_unavailable(self, exc: StoreUnavailable) -> None:
        self.last_store_error = str(exc)
        stats = self.log.stats
        stats.inc_value("neardup/store_error")
        now = time.monotonic()
        policy = self.on_store_error
        if policy == "keep" and now - self._last_store_error_log < 60:
            return
        self._last_store_error_log = now
        logger.error(
            "nearduppipe: store unavailable, %(what)s (%(n)d errors so far): %(exc)s",
            {
                "what": "keeping pages unchecked" if policy == "keep" else "stopping the spider",
                "n": stats.get_value("neardup/store_error", 0),
                "exc": exc,
            },
            extra=self._extra,
        )
        if policy == "stop":
            self._stop("neardup_store_error")

    def _stop(self, reason: str) -> None:
        if not self._stopping:
            self._stopping = True
            start_coroutine(self._close_spider(reason))

    async def _close_spider(self, reason: str) -> None:
        engine = self.crawler.engine
        if engine is None:
            return
        with contextlib.suppress(RuntimeError):  # the spider is not open (any more)
            await engine.close_spider_async(reason=reason)
