"""Stats and log lines, written the way Scrapy writes its own.

Like Scrapy's dupefilter, only the first drop is logged at INFO (with the hint how to see them
all); the others go to DEBUG, named by key, never with the whole item. Every decision is counted
under ``neardup/`` so ``PERIODIC_LOG_STATS = {"include": ["neardup/"]}`` shows progress.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..settings import Action
from ..stores.base import LEASE_SECONDS, Source
from ..stores.decide import Outcome

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

__all__ = ["Source", "StatsLog", "logger", "shown"]

logger = logging.getLogger("nearduppipe")


def shown(key: str) -> str:
    """A key as a log line shows it: with its control characters escaped, as Python writes
    them, when it has any (an item's key is whatever its field holds: a newline would forge a
    log line of its own, an escape sequence rewrite the terminal)."""
    return key if key.isprintable() else repr(key)[1:-1]


# what the closing line reports for pages and for items
_COUNTED = (
    "checked",
    "unique",
    "dropped",
    "revisit/unchanged",
    "revisit/changed",
    "again",
    "claimed",
)


# Verdicts of a key's own entry that drop (unless marked): their stat and their log line.
_REVISITS = {
    "unchanged": ("revisit/unchanged", "Dropped unchanged %s %s (a recrawl)"),
    "claimed": ("claimed", "Dropped %s %s: another running crawl sharing the store has it"),
}


class StatsLog:
    def __init__(self, crawler: Crawler, *, debug: bool) -> None:
        assert crawler.stats is not None
        self.crawler = crawler
        self.stats: StatsCollector = crawler.stats
        self.debug = debug
        self._first_logged: set[Source] = set()
        self._progress_checked = 0  # pages checked at the last progress line
        self._extra = {"crawler": crawler}

    @staticmethod
    def key(source: Source, name: str) -> str:
        return f"neardup/{name}" if source == "pages" else f"neardup/items/{name}"

    def inc(self, source: Source, name: str) -> None:
        """Count ``name`` for ``source`` (one stats call: a page's outcome counts two or three
        stats, and each call costs some microseconds of the crawl's loop)."""
        self.stats.inc_value(self.key(source, name))

    def count(self, source: Source, name: str) -> int:
        """:meth:`inc`, then read the new count (for a line logged the first time only)."""
        stat = self.key(source, name)
        self.stats.inc_value(stat)
        value: int = self.stats.get_value(stat, 0)
        return value

    def skip(self, source: Source, reason: str) -> None:
        self.inc(source, f"skipped/{reason}")

    def record(self, source: Source, outcome: Outcome, key: str, action: Action | None) -> None:
        """Count one decision, and log it if it drops something (``action``: what it drops,
        see :data:`~nearduppipe.settings.Action`). Revisits of a stored key are counted apart
        from near-duplicates (``revisit/unchanged``, ``revisit/changed``), and a key this crawl
        job already checked (a retry, a redirect back, a resumed job) as ``again``; verdicts
        that drop nothing (``mark``) as ``marked/…``."""
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
        what = "page" if source == "pages" else "item"
        if status in _REVISITS:
            stat, said = _REVISITS[status]
            self.inc(source, stat)
            if action == "mark":
                self.inc(source, f"marked/{status}")
                return
            self.inc(source, f"{stat}/dropped")
            whose = "page's items of" if action == "items" and source == "pages" else what
            logger.debug(said, whose, shown(key), extra=self._extra)
            return
        match = outcome.match
        assert match is not None
        self.stats.inc_value(f"neardup/distance/{match.distance}")
        if match.wide_distance is not None:
            self.stats.inc_value(f"neardup/wide_distance/{match.wide_distance // 8 * 8}")
        if action == "mark":
            self.inc(source, "marked/duplicate")
            return
        self.inc(source, "dropped")
        if action == "items" and source == "pages":
            what = "page's items of the"  # the page itself reaches the spider
        wide = "" if match.wide_distance is None else f", {match.wide_distance} of 512 bits"
        args = {
            "what": what,
            "key": shown(key),
            "match": shown(match.key),
            "d": match.distance,
            "w": wide,
        }
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

    def workers_restarted(self, reason: str) -> None:
        """The worker pool broke and was replaced (any thread): the pages it held are retried."""
        self.stats.inc_value("neardup/workers/restarted")
        logger.warning(
            "nearduppipe: %(reason)s; started new worker processes, retrying the pages that "
            "waited (neardup/workers/restarted counts these)",
            {"reason": reason},
            extra=self._extra,
        )

    def lease_failed(self, exc: Exception) -> None:
        """A renewal of the crawl's lease failed (the store is down: the pages' own checks
        count that). No page waits on it; until a renewal succeeds, another crawl that
        shares the store may take this crawl's pages as unchanged (docs/verdicts.md)."""
        n = self.count("pages", "lease/failed")
        logger.log(
            logging.WARNING if n == 1 else logging.DEBUG,
            "nearduppipe: could not renew the crawl's lease in the store (retried every "
            "%(s).0f s; neardup/lease/failed counts these): %(exc)s",
            {"s": LEASE_SECONDS / 4, "exc": exc},
            extra=self._extra,
        )

    def repeat(self, key: str) -> None:
        """An item whose key this crawl job checked before (it passed then): dropped."""
        self.stats.inc_value("neardup/items/again/dropped")
        logger.debug("Dropped item %s: seen earlier in this crawl", shown(key), extra=self._extra)

    def items_dropped_with_page(self, verdict: Mapping[str, Any], n: int) -> None:
        """``n`` items the spider made of a page whose verdict drops its items."""
        self.stats.inc_value("neardup/items/dropped_with_page", n)
        logger.debug(
            "Dropped %(n)d item(s) of the %(status)s page %(key)s",
            {"n": n, "status": verdict.get("status"), "key": verdict.get("key")},
            extra=self._extra,
        )

    def progress(self, size: int | None, minutes: float) -> None:
        """The periodic line (every ``LOGSTATS_INTERVAL``, as Scrapy's own "Crawled N pages"):
        what was checked since the start and per minute since the last line, the duplicate
        share on the reports' base (pages judged: stored as new, or dropped), and the store's
        size."""
        get = self.stats.get_value
        checked = get("neardup/checked", 0)
        before, self._progress_checked = self._progress_checked, checked
        rate = (checked - before) / minutes if minutes > 0 else 0.0
        dropped = get("neardup/dropped", 0) + get("neardup/marked/duplicate", 0)
        judged = get("neardup/unique", 0) + dropped  # (the reports' base: stores/report.py)
        share = f" ({dropped / judged:.1%} of pages judged)" if judged else ""
        logger.info(
            "nearduppipe: checked %(checked)d pages (at %(rate).0f pages/min): %(unique)d new, "
            "%(dropped)d near-duplicates%(share)s, %(unchanged)d unchanged and %(changed)d "
            "changed since an earlier crawl; %(items)d items checked; store: %(size)s pages",
            {
                "checked": checked,
                "rate": rate,
                "unique": get("neardup/unique", 0),
                "dropped": dropped,
                "share": share,
                "unchanged": get("neardup/revisit/unchanged", 0),
                "changed": get("neardup/revisit/changed", 0),
                "items": get("neardup/items/checked", 0),
                "size": "?" if size is None else size,
            },
            extra=self._extra,
        )
        self.stats.set_value("neardup/pages_per_minute", round(rate, 1))

    def opened(self, uri: str, size: int, rule: str, reset: bool, workers: int) -> None:
        """The store and its rule, and where pages are checked (the worker count follows the
        extractor and the CPUs when unset: runtime.executor.default_workers)."""
        self.stats.set_value("neardup/store_size/open", size)
        logger.info(
            "nearduppipe: store %(uri)s opened with %(n)d pages (%(rule)s%(reset)s); pages "
            "checked %(where)s",
            {
                "uri": uri,
                "n": size,
                "rule": rule,
                "reset": ", reset" if reset else "",
                "where": f"in {workers} worker process{'es' if workers != 1 else ''}"
                if workers
                else "on threads",
            },
            extra=self._extra,
        )

    def kept_radius(self, kept: int, default: int) -> None:
        """A store made before the default radius became 10 keeps its own (stores/scope.py):
        say so once, with the setting that widens it."""
        if kept != default:
            logger.info(
                "nearduppipe: the store keeps its own candidate radius %d (new stores: %d); "
                "NEARDUP_DISTANCE = %d widens it (a Redis store: `nearduppipe copy` to a new "
                "prefix)",
                kept,
                default,
                default,
                extra=self._extra,
            )

    def summary(
        self, uri: str, size_at_open: int, size: int | None, store_failure: str | None = None
    ) -> None:
        """The closing line; ``size`` is ``None`` when the store could not be counted;
        ``store_failure``: the last error of a store that failed during the crawl (a lost
        store is named there), said in a second line."""
        if size is not None:
            self.stats.set_value("neardup/store_size/close", size)
        get = self.stats.get_value
        stats = self.stats.get_stats()

        def counts(source: Source) -> str:
            n = {name: get(self.key(source, name), 0) for name in _COUNTED}
            prefix = self.key(source, "skipped/")
            skipped = {k[len(prefix) :]: v for k, v in stats.items() if k.startswith(prefix)}
            why = ", ".join(f"{k}: {v}" for k, v in sorted(skipped.items()))
            let = get(self.key(source, "let_through/store_error"), 0)
            return (
                f"{n['checked']} checked, {n['unique']} unique, {n['dropped']} dropped as "
                f"near-duplicates, {n['revisit/unchanged']} unchanged and "
                f"{n['revisit/changed']} changed since an earlier crawl, {n['again']} again, "
                f"{n['claimed']} left to another running crawl, "
                f"{sum(skipped.values())} skipped"
                + (f" ({why})" if why else "")
                + (f", {let} let through unchecked (store_error)" if let else "")
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
        if store_failure is not None:
            logger.warning(
                "nearduppipe: the store failed during the crawl (%(n)d errors; pages let through "
                "unchecked meanwhile); the last error: %(why)s",
                {"n": get("neardup/store_error", 0), "why": store_failure},
                extra=self._extra,
            )
