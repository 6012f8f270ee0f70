"""Per-crawler state shared by the middleware and the pipeline, created by whichever component
Scrapy builds first: one configuration (settings read once), one store, one executor.

The runtime only wires its parts together: :mod:`.executor` (threads, worker processes, the time
limit per page), :mod:`.lifecycle` (opening, committing and closing the store), :mod:`.policy`
(what a failure does), :mod:`.stats` (stats and log lines) and :mod:`.loop` (asyncio or the
Twisted reactor, whichever runs the crawl).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from itemadapter import ItemAdapter
from scrapy import signals
from scrapy.exceptions import NotConfigured, ScrapyDeprecationWarning

from .. import signals as neardup_signals
from ..fingerprint.page import Fingerprinted, FingerprintParams, exact_fingerprinted
from ..fingerprint.text import require_extractor
from ..settings import Action, NearDupConfig, NearDupConfigError
from ..stores import Match, Store
from ..stores.base import StoreError, StoreUnavailable
from ..stores.decide import Deduplicator, Outcome
from .canonical import CanonicalKeys
from .commands import debug_command
from .executor import Executor, PageTimeout, WorkerDied, default_workers
from .health import StoreHealth
from .items import PageNotes, listing_key
from .lifecycle import StoreLifecycle, default_store_uri, job_id, resolve_store_uri
from .loop import on_shutdown, periodic, start_coroutine
from .order import Turn, Turns
from .policy import FailurePolicy, StoreCallError
from .refusal import Refusal
from .stats import Source, StatsLog, logger
from .verdict import skipped_verdict, verdict

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector


def _made(crawler: Crawler) -> NearDupRuntime | Refusal | None:
    try:  # (Scrapy >= 2.12; None until the extension is built, or when it is not listed)
        found = crawler.get_extension(NearDupRuntime)
    except RuntimeError:  # asked before the extensions were built
        found = None
    if found is not None:
        return found
    made: NearDupRuntime | Refusal | None = getattr(crawler, _ATTR, None)
    return made


__all__ = [
    "NearDupRuntime",
    "PageTimeout",
    "Source",
    "WorkerDied",
    "default_store_uri",
    "lookup",
    "resolve_store_uri",
]

T = TypeVar("T")
_ATTR = "_nearduppipe_runtime"


class NearDupRuntime:
    """The crawl's nearduppipe state in one place (store, executor, stats, the pages judged
    for their items): a Scrapy extension that the add-on lists in ``EXTENSIONS``; the
    middlewares and the pipeline get it from the crawler (:meth:`for_crawler`)."""

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> NearDupRuntime:
        """The extension's entry (``EXTENSIONS``): the crawler's one runtime."""
        return cls.for_crawler(crawler)

    @classmethod
    def for_crawler(cls, crawler: Crawler) -> NearDupRuntime:
        """The crawler's runtime: the extension's (``crawler.get_extension``), else the one
        made by the first component that asked, else a new one (set-ups without the add-on:
        one place creates it, whoever asks first).

        A bare ``NotConfigured`` (Scrapy logs nothing for it) when ``NEARDUP_ENABLED`` is off,
        a debug command (``scrapy shell``, ``fetch``, ``view``, ``parse``, ``check``) runs, or
        nearduppipe refused the crawl (a bad setting, a store it cannot open:
        :mod:`.refusal`, said once at CRITICAL)."""
        runtime = _made(crawler)
        if runtime is None:
            command = debug_command()
            if command is not None:
                logger.debug("nearduppipe: off for `scrapy %s`", command)
                raise NotConfigured
            try:
                config = NearDupConfig.from_settings(crawler.settings)
            except NearDupConfigError as e:
                setattr(crawler, _ATTR, Refusal(crawler, e))
                raise NotConfigured from None
            if not config.enabled:
                raise NotConfigured
            try:
                runtime = cls(crawler, config)
            except (NearDupConfigError, StoreError) as e:
                setattr(crawler, _ATTR, Refusal(crawler, e, config.store))
                raise NotConfigured from None
            setattr(crawler, _ATTR, runtime)
        if isinstance(runtime, Refusal):
            raise NotConfigured
        return runtime

    def __init__(self, crawler: Crawler, config: NearDupConfig) -> None:
        self.crawler = crawler
        self.config = config
        self._field_errors: set[str] = set()
        self._closed = False
        # the pages the downloader middleware judged and the items made of them: .items
        self.pages = PageNotes()
        self.item_turns = Turns()  # the pipeline's store calls, in the items' order
        self.canonical = CanonicalKeys()  # NEARDUP_CANONICAL: the URL kept under each key
        self.log = StatsLog(crawler, debug=config.debug)
        self.stats: StatsCollector = self.log.stats
        self.policy = FailurePolicy(crawler, self.log, on_store_error=config.on_store_error)
        spider = crawler.spider
        name = spider.name if spider is not None and spider.name else "default"
        self.lifecycle = StoreLifecycle(config, name)
        self.store: Store = self.lifecycle.store
        self.params = FingerprintParams(
            config.features,
            config.limits,
            config.min_text_length,
            config.keep_text,
            require_extractor(config.rule.extractor),  # (validated by the settings already)
            self.store.rule.extraction,  # (the store's own: its pages were extracted so)
        )
        self.job = job_id(crawler.settings.get("JOBDIR"))
        self.dedup = Deduplicator(self.store, self.job)
        # short items checked by key and exact digest where chance matches are negligible
        # (fingerprint.page.exact_fingerprinted)
        rule = self.store.rule
        self._exact_items = rule.verifies or rule.radius <= 3
        self.dedup_no_job = Deduplicator(self.store)
        workers = 0  # (NEARDUP_EXECUTOR = "thread": the pages on the store's threads)
        if config.executor == "process":
            workers = config.workers or default_workers(self.store.rule.extractor)
        try:
            self.executor = Executor(
                threads=config.threads,
                workers=workers,
                timeout=config.page_timeout,
                params=self.params,
                on_restart=self.log.workers_restarted,
            )
        except BaseException:
            self.store.close()
            raise
        try:  # (before a line says the store opened: a refusal here stops the crawl)
            self.lifecycle.start_leasing(self.job, self.log.lease_failed)
        except BaseException:
            self.executor.close()
            self.store.close()
            raise
        self.health = StoreHealth(
            crawler, lambda: self.executor.run(len, self.store), config.on_store_error
        )
        for message in config.deprecated:
            warnings.warn(message, ScrapyDeprecationWarning, stacklevel=2)
            logger.warning("nearduppipe: %s", message, extra={"crawler": crawler})
        for message in config.unknown:
            logger.warning("nearduppipe: %s", message, extra={"crawler": crawler})
        if config.ignored_redis_params:
            logger.warning(
                "nearduppipe: the Redis store ignores REDIS_PARAMS %s (scrapy-redis's client "
                "class and reply decoding; the store reads binary replies)",
                ", ".join(config.ignored_redis_params),
                extra={"crawler": crawler},
            )
        self.log.opened(
            self.store.uri,
            self.lifecycle.size_at_open,
            self.store.rule.describe(),
            config.reset,
            workers,
        )
        if not config.rule.radius_given and self.store.rule.verifies:
            self.log.kept_radius(self.store.rule.radius, config.rule.radius)
        self.lifecycle.start_flushing(self.executor.run, self._flush_failed)
        self._progress: Any = None
        if config.progress_interval > 0:
            self._progress = periodic(self._log_progress)
            self._progress.start(config.progress_interval, now=False)
            self._progress_at = time.monotonic()
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)
        # If the crawl never closes normally, still commit and release the store.
        crawler.signals.connect(self.close, signal=signals.engine_stopped)
        on_shutdown(self.close)

    # -- the check --------------------------------------------------------------------------
    @property
    def size_at_open(self) -> int:
        return self.lifecycle.size_at_open

    @property
    def _processes(self) -> Any:
        """The worker process pool (``None`` with ``NEARDUP_EXECUTOR = "thread"``)."""
        return self.executor.processes

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in the thread pool (store calls)."""
        return await self.executor.run(fn, *args)

    async def check(
        self,
        fn: Callable[..., Fingerprinted] | None,
        *args: Any,
        key: str,
        source: Source,
        job: bool = True,
        key_for: Callable[[Fingerprinted], str] | None = None,
        known: Fingerprinted | None = None,
        turn: Turn | None = None,
        exact: str | None = None,
    ) -> Outcome:
        """Fingerprint (``fn(*args)`` in a worker, within ``NEARDUP_PAGE_TIMEOUT``), then
        check ``key`` in the thread pool (``job=False``: without this crawl's job id, for keys
        made from the content itself; ``key_for``: the key, chosen once the fingerprints are
        known; ``known``: fingerprints already computed, e.g. the page's own for an item that
        carries its HTML, so ``fn`` is not run; ``turn``: the store is asked only once the
        turns before it are done, :mod:`.order`; ``exact``: the item's text, checked by its
        key and exact digest when it is too short to fingerprint, ``exact_fingerprinted``).
        Failures reach the caller, which keeps the page and hands them to :meth:`error`."""
        dedup = self.dedup if job else self.dedup_no_job
        self.health.ask()  # (not even fingerprinted for a store that is down)
        if known is not None:
            result = known
        else:
            assert fn is not None
            result = await self.executor.compute(fn, *args)
        if turn is not None:
            await turn.wait()
        given = key
        if key_for is not None:
            key = key_for(result)
        if exact is not None and result.skipped == "too_short" and self._exact_items:
            self.stats.inc_value("neardup/items/exact")
            # (a listing item's key is made of its text: the text is its identity)
            result = exact_fingerprinted(key if key == given else None, exact)
        if result.fingerprint is None:  # nothing to check: no store call, no thread hop
            return dedup.decide(result, key)
        self.health.ask()  # (it may have gone down meanwhile)
        try:
            outcome = await self.executor.run(dedup.decide, result, key, source)
        except StoreUnavailable as e:
            self.health.failed()
            raise StoreCallError(e) from e
        except Exception as e:
            raise StoreCallError(e) from e
        self.health.answered()
        return outcome

    async def lookup(
        self, text: str, key: str | None = None, url: str | None = None
    ) -> dict[str, Any]:
        """The verdict ``text`` (under ``key``, if given) would get, without storing anything:
        the same dict as ``response.meta["neardup"]`` (``dropped`` is always ``None``). For a
        callback that must decide before it yields, e.g. stop paginating a listing whose items
        are all ``duplicate`` or ``unchanged``. A failure gives ``status == "skipped"`` and
        ``skipped`` the reason the stats count (``store_error``, ``timeout`` …; never raised). Under
        ``NEARDUP_SCOPE`` ``domain`` or ``host``, the scope is ``key``'s, else ``url``'s (pass
        ``response.url``). A text under ``NEARDUP_MIN_TEXT_LENGTH`` is looked up by its key and
        exact digest (docs/verdicts.md): ``key``, else the key an item of page ``url`` keyed
        by the page's URL gets (``<url>#item-<digest>``)."""
        from ..fingerprint.page import fingerprint_text

        name = key if key is not None else "(lookup)"
        self.stats.inc_value("neardup/lookups")
        try:
            self.health.ask()
            result = await self.executor.compute(fingerprint_text, text, self.params)
            if (
                result.skipped == "too_short"
                and (key is not None or url is not None)
                and self._exact_items
            ):
                # a short item is known by its key and exact text (the pipeline's rule): the
                # key given, else the one an item of the page ``url`` keyed by it gets
                result = exact_fingerprinted(key, text)  # (key None: the text alone)
                key = key if key is not None else listing_key(url or "", text)
            try:
                outcome = await self.executor.run(self.dedup.lookup, result, key, url)
            except Exception as e:
                if isinstance(e, StoreUnavailable):
                    self.health.failed()
                raise StoreCallError(e) from e
        except Exception as e:
            return skipped_verdict(name, self.error("items", name, e))
        return verdict(outcome, name, None)

    # -- stats, logs, failures, the hook -----------------------------------------------------
    def action(self, outcome: Outcome) -> Action | None:
        """What the verdict drops: ``NEARDUP_ON_DUPLICATE`` for a near-duplicate of another
        key or a key another running crawl holds (``claimed``), ``NEARDUP_ON_UNCHANGED`` for
        an unchanged revisit of its own; ``None`` else."""
        if outcome.status in ("duplicate", "claimed"):
            return self.config.on_duplicate
        if outcome.status == "unchanged":
            return self.config.on_unchanged
        return None

    def record(self, source: Source, outcome: Outcome, key: str) -> Action | None:
        """Count and log one outcome; returns :meth:`action`."""
        action = self.action(outcome)
        self.log.record(source, outcome, key, action)
        return action

    def skip(self, source: Source, reason: str) -> None:
        self.log.skip(source, reason)

    def error(self, source: Source, key: str, exc: BaseException) -> str:
        """A failure while checking: the page or item is kept, never lost. Returns the reason
        counted (``skipped`` in the verdict says the same)."""
        return self.policy.handle(source, key, exc)

    def set_field(self, adapter: ItemAdapter, field: str, value: Any, what: str) -> None:
        """Write ``value`` into an item's ``field`` (``what``: ``fingerprint`` or ``verdict``,
        for the stat and the one error line when the item type has no such field)."""
        try:
            adapter[field] = value
        except (KeyError, TypeError, AttributeError) as e:
            self.skip("items", f"{what}_field_error")
            if what not in self._field_errors:
                self._field_errors.add(what)
                logger.error(
                    "nearduppipe: cannot set NEARDUP_%s_FIELD %r on %s items (%r); declare the "
                    "field on the item class",
                    what.upper(),
                    field,
                    type(adapter.item).__name__,
                    e,
                    extra={"crawler": self.crawler},
                )

    def _log_progress(self) -> None:
        if self._closed:
            return

        async def line() -> None:
            try:  # (a Redis store counts on the server: never on the crawl's thread)
                size: int | None = await self.executor.run(len, self.store)
            except Exception:
                size = None
            now = time.monotonic()
            minutes, self._progress_at = (now - self._progress_at) / 60, now
            if not self._closed:
                self.log.progress(size, minutes)

        start_coroutine(line())

    def _flush_failed(self, exc: Exception) -> None:
        self.policy.handle("pages", "(periodic commit)", StoreCallError(exc))

    def dropped(self, source: Source, key: str, match: Match, **context: Any) -> None:
        """Send ``neardup_dropped`` (``key``, ``match``, ``source`` and the ``request`` and
        ``response``, or the ``item``) to the extensions that count or archive drops."""
        self.crawler.signals.send_catch_log(
            signal=neardup_signals.neardup_dropped,
            key=key,
            match=match,
            source=source,
            **context,
        )

    # -- shutdown ----------------------------------------------------------------------------
    def close(self) -> int | None:
        """Stop the workers, commit and close the store; idempotent. Returns the store's size
        (``None`` after the first call, or if it could not be counted)."""
        if self._closed:
            return None
        self._closed = True
        if self._progress is not None and self._progress.running:
            self._progress.stop()
        try:
            return self.lifecycle.close(count=not self.health.down)
        except StoreUnavailable as e:
            # The last commit failed (a full disk, say): the writes it names are lost. The crawl
            # itself ends normally; the error is logged and counted, like any store failure.
            self.stats.inc_value("neardup/store_error")
            logger.error("nearduppipe: closing the store: %s", e, extra={"crawler": self.crawler})
            return None
        finally:
            self.executor.close()

    def spider_closed(self) -> None:
        if self._closed:
            return
        size = self.close()
        failure = self.policy.last_store_error
        self.log.summary(self.store.uri, self.lifecycle.size_at_open, size, failure)


async def lookup(
    crawler: Crawler, text: str, key: str | None = None, url: str | None = None
) -> dict[str, Any]:
    """The verdict ``text`` (under ``key``) would get from the crawler's store, storing nothing
    (:meth:`NearDupRuntime.lookup`): ``await nearduppipe.lookup(self.crawler, text,
    url=response.url)`` in a callback, e.g. to stop paginating a listing whose items are all
    ``duplicate`` or ``unchanged``."""
    return await NearDupRuntime.for_crawler(crawler).lookup(text, key, url)
