"""Stats and log lines, written the way Scrapy writes its own.

Like Scrapy's dupefilter, only the first drop is logged at INFO (with the hint how to see them
all); the others go to DEBUG, named by key, never with the whole item. Every decision is counted
under ``neardup/`` so ``PERIODIC_LOG_STATS = {"include": ["neardup/"]}`` shows progress.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ..stores.base import Source
from ..stores.decide import Outcome

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

__all__ = ["Source", "StatsLog", "logger"]

logger = logging.getLogger("nearduppipe")


# what the closing line reports for pages and for items
_COUNTED = ("checked", "unique", "dropped", "revisit/unchanged", "revisit/changed", "again")


class StatsLog:
    def __init__(self, crawler: Crawler, *, debug: bool) -> None:
        assert crawler.stats is not None
        self.crawler = crawler
        self.stats: StatsCollector = crawler.stats
        self.debug = debug
        self._first_logged: set[Source] = set()
        self._extra = {"crawler": crawler}

    @staticmethod
    def key(source: Source, name: str) -> str:
        return f"neardup/{name}" if source == "pages" else f"neardup/items/{name}"

    def inc(self, source: Source, name: str) -> int:
        """Count ``name`` for ``source``; returns the new count."""
        stat = self.key(source, name)
        self.stats.inc_value(stat)
        value: int = self.stats.get_value(stat, 0)
        return value

    def skip(self, source: Source, reason: str) -> int:
        return self.inc(source, f"skipped/{reason}")

    def record(self, source: Source, outcome: Outcome, key: str, dropped: bool) -> None:
        """Count one decision, and log it if it was a drop. Revisits of a stored key are
        counted apart from near-duplicates (``revisit/unchanged``, ``revisit/changed``), and a
        key this crawl job already checked (a retry, a redirect back, a resumed job) as
        ``again``."""
        if outcome.skipped is not None:
            self.skip(source, outcome.skipped)
            return
        self.inc(source, "checked")
        status = outcome.status
        if status == "new":
            self.inc(source, "unique")
            return
        if status in ("changed", "again"):
            self.inc(source, "revisit/changed" if status == "changed" else "again")
            return
        if status == "unchanged":
            self.inc(source, "revisit/unchanged")
            if dropped:
                self.inc(source, "revisit/unchanged/dropped")
                logger.debug(
                    "Dropped unchanged %s %s (a recrawl)",
                    "page" if source == "pages" else "item",
                    key,
                    extra=self._extra,
                )
            return
        match = outcome.match
        assert match is not None
        self.inc(source, "dropped")
        self.stats.inc_value(f"neardup/distance/{match.distance}")
        if match.wide_distance is not None:
            self.stats.inc_value(f"neardup/wide_distance/{match.wide_distance // 8 * 8}")
        what = "page" if source == "pages" else "item"
        wide = "" if match.wide_distance is None else f", {match.wide_distance} of 512 bits"
        args = {"what": what, "key": key, "match": match.key, "d": match.distance, "w": wide}
        msg = "Dropped near-duplicate %(what)s %(key)s: distance %(d)d%(w)s from %(match)s"
        if self.debug:
            logger.info(msg, args, extra=self._extra)
        elif source not in self._first_logged:
            self._first_logged.add(source)
            logger.info(
                msg + " (further ones are logged at DEBUG and counted in neardup/ stats; "
                "set NEARDUP_DEBUG = True to log all at INFO)",
                args,
                extra=self._extra,
            )
        else:
            logger.debug(msg, args, extra=self._extra)

    def opened(self, uri: str, size: int, rule: str, reset: bool) -> None:
        self.stats.set_value("neardup/store_size/open", size)
        logger.info(
            "nearduppipe: store %(uri)s opened with %(n)d pages (%(rule)s%(reset)s)",
            {"uri": uri, "n": size, "rule": rule, "reset": ", reset" if reset else ""},
            extra=self._extra,
        )

    def summary(self, uri: str, size_at_open: int, size: int | None) -> None:
        """The closing line; ``size`` is ``None`` when the store could not be counted."""
        if size is not None:
            self.stats.set_value("neardup/store_size/close", size)
        get = self.stats.get_value
        stats = self.stats.get_stats()

        def counts(source: Source) -> str:
            n = {name: get(self.key(source, name), 0) for name in _COUNTED}
            prefix = self.key(source, "skipped/")
            skipped = {k[len(prefix) :]: v for k, v in stats.items() if k.startswith(prefix)}
            why = ", ".join(f"{k}: {v}" for k, v in sorted(skipped.items()))
            return (
                f"{n['checked']} checked, {n['unique']} unique, {n['dropped']} dropped as "
                f"near-duplicates, {n['revisit/unchanged']} unchanged and "
                f"{n['revisit/changed']} changed since an earlier crawl, {n['again']} again, "
                f"{sum(skipped.values())} skipped" + (f" ({why})" if why else "")
            )

        args: dict[str, Any] = {
            "pages": counts("pages"),
            "items": counts("items"),
            "uri": uri,
            "held": "an unknown number of"
            if size is None
            else f"{size} ({size - size_at_open:+d})",
        }
        logger.info(
            "nearduppipe: pages: %(pages)s; items: %(items)s; store %(uri)s holds %(held)s pages",
            args,
            extra=self._extra,
        )
