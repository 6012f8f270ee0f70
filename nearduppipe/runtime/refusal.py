"""A crawl nearduppipe refuses to run: a bad ``NEARDUP_*`` setting, or a store it cannot open
(unreachable, another scope, rule or extractor, another TTL …).

Said once, at CRITICAL, in one line that names the setting and the fix (no traceback); the
crawl closes before its first request with the reason ``neardup_config_error``, and ``scrapy
crawl`` exits with status 1. Every nearduppipe component of the crawl is then disabled.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy import signals

from ..stores.redaction import redact
from .commands import fail_command
from .stats import logger

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

__all__ = ["REASON", "Refusal"]

REASON = "neardup_config_error"


class Refusal:
    """Kept on the crawler in place of a runtime: the components that ask are disabled."""

    def __init__(self, crawler: Crawler, error: Exception, uri: str | None = None) -> None:
        self.crawler = crawler
        self.message = redact(str(error), *([uri] if uri else []))
        logger.critical("nearduppipe: %s", self.message, extra={"crawler": crawler})
        if crawler.stats is not None:
            crawler.stats.set_value("neardup/config_error", 1)
        fail_command()
        crawler.signals.connect(self.stop_crawl, signal=signals.engine_started)

    def close(self) -> None:
        """Nothing to release (as :meth:`NearDupRuntime.close`): nothing was opened."""

    async def stop_crawl(self) -> None:
        """At ``engine_started``, before the first request is taken: close the crawl."""
        engine = self.crawler.engine
        if engine is not None:
            await engine.close_spider_async(reason=REASON)
