"""The store's life in a crawl: where it is, opening it, periodic commits, closing it.

A relative sqlite path (a bare path or ``sqlite:///rel``) lives in the project's data directory,
like ``HTTPCACHE_DIR``: ``scrapy crawl`` run from a sub-directory finds the same store. The
absolute path is what the log shows.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrapy.utils.project import data_path

from ..settings import NearDupConfig, NearDupConfigError
from ..stores import Store, StoreError, StoreUnavailable, find_backend, open_store
from ..stores.base import LEASE_SECONDS
from ..stores.redaction import redact
from .loop import await_future, periodic, start_coroutine

if TYPE_CHECKING:
    from .loop import Periodic

__all__ = ["StoreLifecycle", "default_store_uri", "resolve_store_uri"]


def default_store_uri(spider_name: str) -> str:
    """``.scrapy/neardup/<spider>.sqlite`` in the project's data directory (like HTTPCACHE_DIR)."""
    return str(Path(data_path("neardup")).absolute() / f"{spider_name}.sqlite")


def resolve_store_uri(configured: str | None, spider_name: str) -> str:
    """``NEARDUP_STORE`` with ``{spider}`` filled in and a relative sqlite path made absolute
    in the project's data directory; a URI of another backend is returned as it is."""
    if not configured:
        return default_store_uri(spider_name)
    uri = configured.replace("{spider}", spider_name)
    backend = find_backend(uri)
    try:
        path = None if backend is None else backend.file(uri)
    except StoreError as e:
        raise NearDupConfigError(f"NEARDUP_STORE: {e}") from None
    if path is None or path.is_absolute():
        return uri
    assert backend is not None
    return backend.with_file(uri, Path(data_path(str(path))).absolute())


def job_id(jobdir: str | None) -> str:
    """The crawl job's id, kept with every entry it stores: a page seen again by the same job
    (a retry, a redirect back, a resumed ``JOBDIR`` crawl) is not a revisit. Persisted in the
    ``JOBDIR`` so a resumed job keeps it; a crawl without one is a job of its own."""
    if not jobdir:
        return uuid.uuid4().hex
    path = Path(jobdir) / "neardup.job"
    try:
        existing = path.read_text("ascii").strip()
        if existing:
            return existing
    except (OSError, UnicodeDecodeError):
        pass
    job = uuid.uuid4().hex
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(job, "ascii")
    os.replace(tmp, path)
    return job


class StoreLifecycle:
    """Opens the store, commits it every ``NEARDUP_COMMIT_INTERVAL`` seconds from the thread
    pool, and closes it once, counting its size before closing (a closed store cannot be
    counted)."""

    def __init__(self, config: NearDupConfig, spider_name: str) -> None:
        self.config = config
        configured = config.store
        if configured == "redis":  # next to scrapy-redis: the same server, REDIS_URL
            assert config.redis_url is not None
            configured = config.redis_url
        uri = resolve_store_uri(configured, spider_name)
        options: dict[str, Any] = {"name": spider_name, "max_decisions": config.max_decisions}
        if config.ttl is not None:
            options["ttl"] = config.ttl
        if config.ttl_change:  # (the store's recorded TTL becomes NEARDUP_TTL: ttl_rule)
            options["change_ttl"] = True
        if config.blocks is not None:
            options["blocks"] = config.blocks
        backend = find_backend(uri)  # (NEARDUP_REDIS_PARAMS: the Redis client's options)
        if backend is not None and backend.accepts("params") and config.redis_params:
            options["params"] = config.redis_params
        try:
            self.store: Store = open_store(
                uri,
                rule=config.rule,
                reset=config.reset,
                commit_every=config.commit_every,
                commit_interval=config.commit_interval,
                **options,
            )
        except StoreUnavailable as e:  # (said first: the failure policy is for later)
            raise StoreError(
                redact(
                    f"NEARDUP_STORE {uri!r}: unreachable when the crawl starts, which stops it "
                    f"whatever NEARDUP_ON_STORE_ERROR says (that policy applies once the store "
                    f"has opened): {e}",
                    uri,
                )
            ) from None
        except StoreError as e:
            raise StoreError(redact(f"NEARDUP_STORE {uri!r}: {e}", uri)) from None
        self.size_at_open = len(self.store)
        self.closed = False
        self._flusher: Periodic | None = None
        self._leaser: Periodic | None = None
        self._lease_pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._job: str | None = None

    def start_flushing(
        self,
        run: Callable[[Callable[[], None]], Awaitable[None]],
        on_error: Callable[[Exception], None],
    ) -> None:
        """Start a commit every ``commit_interval`` seconds (:meth:`Store.tick`: a commit that
        waits out another writer's lock is retried, not an error): ``run`` moves it off the
        loop, ``on_error`` gets a failure (on the loop)."""
        self._flusher = self._every(self.config.commit_interval, self.store.tick, run, on_error)

    def start_leasing(self, job: str, on_error: Callable[[Exception], None]) -> None:
        """Take the crawl job's lease (:meth:`Store.lease`, docs/verdicts.md) now and renew it
        every quarter of :data:`LEASE_SECONDS`, so that other crawlers sharing the store
        leave this crawl's pages to it (``claimed``); :meth:`close` releases it."""
        try:
            self.store.lease(job, LEASE_SECONDS)
        except StoreError as e:
            raise StoreError(
                f"NEARDUP_STORE {self.store.uri}: taking the crawl's lease: {e}"
            ) from None
        self._job = job
        # a thread of its own: page checks that fill the pool (a Cluster's wait for another
        # check) must not hold the renewal back past the lease's end
        pool = self._lease_pool = concurrent.futures.ThreadPoolExecutor(
            1, thread_name_prefix="neardup-lease"
        )

        async def in_own_thread(fn: Callable[[], None]) -> None:
            await await_future(pool.submit(fn))

        self._leaser = self._every(
            LEASE_SECONDS / 4, lambda: self.store.lease(job, LEASE_SECONDS), in_own_thread, on_error
        )

    def _every(
        self,
        interval: float,
        fn: Callable[[], None],
        run: Callable[[Callable[[], None]], Awaitable[None]],
        on_error: Callable[[Exception], None],
    ) -> Periodic:
        """``fn`` every ``interval`` seconds through ``run`` (off the loop), one at a time;
        a failure goes to ``on_error`` unless the store has closed meanwhile."""
        busy = False

        async def call() -> None:
            nonlocal busy
            try:
                await run(fn)
            except Exception as e:
                if not self.closed:
                    on_error(e)
            finally:
                busy = False

        def tick() -> None:
            nonlocal busy
            if self.closed or busy:
                return
            busy = True
            start_coroutine(call())

        looping = periodic(tick)
        looping.start(interval, now=False)
        return looping

    def close(self, count: bool = True) -> int | None:
        """Stop committing, count, commit and close; the size, or ``None`` if it could not be
        counted (or ``count`` is false: a store known to be down is not waited for twice).
        Idempotent (returns ``None`` after the first call)."""
        if self.closed:
            return None
        self.closed = True
        for looping in (self._flusher, self._leaser):
            if looping is not None and looping.running:
                looping.stop()
        size: int | None = None
        if count:
            try:
                size = len(self.store)
            except Exception:
                size = None
        if self._job is not None and count:  # (a store known to be down is not waited for)
            # the pages it stored go to the next crawl at once, not in a minute (a lease not
            # released runs out by itself)
            with contextlib.suppress(Exception):
                self.store.lease(self._job, 0)
        if self._lease_pool is not None:
            self._lease_pool.shutdown(wait=False)
        self.store.close()
        return size
