"""Per-crawler state shared by the middleware and the pipeline: settings, one store, one thread
pool, stats and log lines. Created by whichever component Scrapy builds first."""

from __future__ import annotations

import functools
import logging
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from scrapy import signals
from scrapy.exceptions import NotConfigured
from scrapy.utils.defer import maybe_deferred_to_future
from scrapy.utils.project import data_path
from twisted.internet import threads
from twisted.internet.defer import Deferred
from twisted.internet.task import LoopingCall
from twisted.python.threadpool import ThreadPool

from .dedup import Deduplicator, Fingerprinted, FingerprintParams, Outcome, fingerprint_text
from .settings import NearDupConfig
from .stores import Store, open_store
from .stores.base import StoreUnavailable

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

logger = logging.getLogger("nearduppipe")


class _DaemonThreadPool(ThreadPool):
    """Worker threads that cannot keep the process alive if a crawl dies before its
    spider_closed signal (e.g. another component fails at start-up)."""

    threadFactory = functools.partial(threading.Thread, daemon=True)  # type: ignore[assignment]


T = TypeVar("T")
Source = Literal["pages", "items"]
_ATTR = "_nearduppipe_runtime"


def _exit_with_parent(parent: int) -> None:
    # A crawl killed with SIGKILL cannot shut its pool down; the idle workers would wait on
    # their task queue forever. Being re-parented is the sign that the crawl is gone.
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(0)


def _worker_init(params: FingerprintParams, parent: int) -> None:
    """Worker process start: leave Ctrl-C to the crawl process, exit with it even if it was
    killed (possibly before this worker finished starting: ``parent`` is the crawl's pid, not
    whatever ``getppid()`` says by now), and load the dictionaries up front."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_exit_with_parent, args=(parent,), daemon=True).start()
    fingerprint_text("预热分词词典 warm up the dictionaries " * 20, params)


def default_store_uri(spider_name: str) -> str:
    """``.scrapy/neardup/<spider>.sqlite`` in the project's data directory (like HTTPCACHE_DIR)."""
    return str(Path(data_path("neardup")) / f"{spider_name}.sqlite")


class NearDupRuntime:
    @classmethod
    def for_crawler(cls, crawler: Crawler) -> NearDupRuntime:
        """The crawler's runtime, created by the first component that asks; NotConfigured when
        NEARDUP_ENABLED is off, NearDupConfigError for a bad setting."""
        runtime: NearDupRuntime | None = getattr(crawler, _ATTR, None)
        if runtime is None:
            config = NearDupConfig.from_settings(crawler.settings)
            if not config.enabled:
                raise NotConfigured("NEARDUP_ENABLED is off")
            runtime = cls(crawler, config)
            setattr(crawler, _ATTR, runtime)
        return runtime

    def __init__(self, crawler: Crawler, config: NearDupConfig) -> None:
        self.crawler = crawler
        self.config = config
        self.middleware_active = False
        self._first_logged: set[Source] = set()
        self._closed = False
        self._stopping = False
        assert crawler.stats is not None
        self.stats = crawler.stats
        spider = crawler.spider
        name = spider.name if spider is not None and spider.name else "default"
        uri = self.config.store.replace("{spider}", name) if self.config.store else None
        options: dict[str, Any] = {"name": name}
        if self.config.ttl is not None:
            options["ttl"] = self.config.ttl
        self.store: Store = open_store(
            uri or default_store_uri(name),
            distance=self.config.distance,
            blocks=self.config.blocks,
            reset=self.config.reset,
            commit_every=self.config.commit_every,
            commit_interval=self.config.commit_interval,
            **options,
        )
        self._last_store_error_log = -1e9
        self.size_at_open = len(self.store)
        self.params = FingerprintParams(
            self.config.features,
            self.config.limits,
            self.config.min_text_length,
            self.config.keep_text,
        )
        self.dedup = Deduplicator(self.store)
        self._processes: ProcessPoolExecutor | None = None
        if self.config.executor == "process":
            self._processes = self._new_process_pool()
        self.stats.set_value("neardup/store_size/open", self.size_at_open)
        logger.info(
            "nearduppipe: store %(uri)s opened with %(n)d fingerprints (distance %(k)d%(reset)s)",
            {
                "uri": self.store.uri,
                "n": self.size_at_open,
                "k": self.config.distance,
                "reset": ", reset" if self.config.reset else "",
            },
            extra={"crawler": crawler},
        )
        self._pool = _DaemonThreadPool(
            minthreads=1, maxthreads=self.config.threads, name="nearduppipe"
        )
        self._pool.start()
        self._flusher = LoopingCall(self._flush)
        self._flusher.start(self.config.commit_interval, now=False)
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)
        from twisted.internet import reactor

        # If the crawl never opens or closes normally, still commit and release the store.
        reactor.addSystemEventTrigger("before", "shutdown", self.close)  # type: ignore[arg-type]

    # -- work off the reactor thread ----------------------------------------------------------
    def _new_process_pool(self) -> ProcessPoolExecutor:
        # spawn, not fork: forking a process that runs a reactor and threads is unsafe.
        return ProcessPoolExecutor(
            max_workers=self.config.workers,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_worker_init,
            initargs=(self.params, os.getpid()),
        )

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn`` in the thread pool (store calls; CPU work in thread mode)."""
        from twisted.internet import reactor

        d = threads.deferToThreadPool(reactor, self._pool, fn, *args)
        result: T = await maybe_deferred_to_future(d)
        return result

    async def _run_in_process(self, fn: Callable[..., T], *args: Any) -> T:
        from twisted.internet import reactor

        assert self._processes is not None
        d: Deferred[T] = Deferred()

        def fire(f: Future[T]) -> None:
            exc = f.exception()
            if exc is not None:
                d.errback(exc)
            else:
                d.callback(f.result())

        future = self._processes.submit(fn, *args)
        future.add_done_callback(lambda f: reactor.callFromThread(fire, f))
        result: T = await maybe_deferred_to_future(d)
        return result

    async def check(self, fn: Callable[..., Fingerprinted], *args: Any, key: str) -> Outcome:
        """Fingerprint (``fn(*args)`` in a worker process or thread), then check-and-add ``key``
        in the thread pool. A dead worker process is replaced; the error reaches the caller,
        which keeps the page."""
        if self._processes is None:
            result = await self.run(fn, *args)
        else:
            try:
                result = await self._run_in_process(fn, *args)
            except BrokenProcessPool:
                broken, self._processes = self._processes, self._new_process_pool()
                broken.shutdown(wait=False, cancel_futures=True)
                raise
        if result.fingerprint is None:  # nothing to check: no store call, no thread hop
            return self.dedup.decide(result, key)
        return await self.run(self.dedup.decide, result, key)

    def _flush(self) -> None:
        if not self._closed:
            from twisted.internet import reactor

            d = threads.deferToThreadPool(reactor, self._pool, self.store.flush)
            d.addErrback(lambda f: logger.error("nearduppipe: store flush failed: %s", f.value))

    # -- stats and logs ----------------------------------------------------------------------
    def _stat(self, source: Source, name: str) -> str:
        return f"neardup/{name}" if source == "pages" else f"neardup/items/{name}"

    def record(self, source: Source, outcome: Outcome, key: str) -> None:
        inc = self.stats.inc_value
        if outcome.skipped is not None:
            self.skip(source, outcome.skipped)
            return
        inc(self._stat(source, "checked"))
        match = outcome.match
        if match is None:
            inc(self._stat(source, "unique"))
            return
        inc(self._stat(source, "dropped"))
        inc(f"neardup/distance/{match.distance}")
        what = "page" if source == "pages" else "item"
        args = {"what": what, "key": key, "match": match.key, "d": match.distance}
        if self.config.debug:
            logger.info(
                "Dropped near-duplicate %(what)s %(key)s: distance %(d)d from %(match)s",
                args,
                extra={"crawler": self.crawler},
            )
        elif source not in self._first_logged:
            self._first_logged.add(source)
            logger.info(
                "Dropped near-duplicate %(what)s %(key)s: distance %(d)d from %(match)s "
                "(further ones are counted in neardup/ stats; set NEARDUP_DEBUG = True to log all)",
                args,
                extra={"crawler": self.crawler},
            )

    def skip(self, source: Source, reason: str) -> None:
        self.stats.inc_value(self._stat(source, f"skipped/{reason}"))

    def error(self, source: Source, key: str, exc: BaseException) -> None:
        """A failure while checking: the page or item is kept, never lost."""
        if isinstance(exc, StoreUnavailable):
            self._store_unavailable(key, exc)
            return
        self.skip(source, "error")
        logger.error(
            "nearduppipe: could not check %(key)s, keeping it: %(exc)r",
            {"key": key, "exc": exc},
            exc_info=exc
            if self.stats.get_value(self._stat(source, "skipped/error")) == 1
            else None,
            extra={"crawler": self.crawler},
        )

    def _store_unavailable(self, key: str, exc: StoreUnavailable) -> None:
        """NEARDUP_ON_STORE_ERROR: ``keep`` lets pages through (counted, logged once a minute;
        the client reconnects by itself), ``stop`` closes the spider with a clear reason."""
        self.stats.inc_value("neardup/store_error")
        now = time.monotonic()
        policy = self.config.on_store_error
        if policy == "keep" and now - self._last_store_error_log < 60:
            return
        self._last_store_error_log = now
        logger.error(
            "nearduppipe: store unavailable, %(what)s (%(n)d errors so far): %(exc)s",
            {
                "what": "keeping pages unchecked" if policy == "keep" else "stopping the spider",
                "n": self.stats.get_value("neardup/store_error", 0),
                "exc": exc,
            },
            extra={"crawler": self.crawler},
        )
        if policy == "stop" and not self._stopping:
            self._stopping = True
            engine = self.crawler.engine
            if engine is not None and engine.spider is not None:
                from scrapy.utils.defer import deferred_from_coro

                deferred_from_coro(engine.close_spider_async(reason="neardup_store_error"))

    # -- shutdown ----------------------------------------------------------------------------
    def close(self) -> None:
        """Stop the flusher and the workers, commit and close the store; idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._flusher.running:
            self._flusher.stop()
        try:
            self.store.close()
        finally:
            self._pool.stop()
            if self._processes is not None:
                self._processes.shutdown(wait=False, cancel_futures=True)

    def spider_closed(self) -> None:
        if self._closed:
            return
        self.close()
        size = len(self.store)
        self.stats.set_value("neardup/store_size/close", size)
        get = self.stats.get_value
        stats = self.stats.get_stats()
        skipped = {
            k.rsplit("/", 1)[1]: v for k, v in stats.items() if k.startswith("neardup/skipped/")
        }
        logger.info(
            "nearduppipe: %(checked)d pages checked, %(unique)d unique, %(dropped)d dropped as "
            "near-duplicates, %(skipped)d skipped%(why)s; items: %(ichecked)d checked, "
            "%(idropped)d dropped; store %(uri)s holds %(size)d fingerprints (%(delta)+d)",
            {
                "checked": get("neardup/checked", 0),
                "unique": get("neardup/unique", 0),
                "dropped": get("neardup/dropped", 0),
                "skipped": sum(skipped.values()),
                "why": f" ({', '.join(f'{k}: {v}' for k, v in sorted(skipped.items()))})"
                if skipped
                else "",
                "ichecked": get("neardup/items/checked", 0),
                "idropped": get("neardup/items/dropped", 0),
                "uri": self.store.uri,
                "size": size,
                "delta": size - self.size_at_open,
            },
            extra={"crawler": self.crawler},
        )
