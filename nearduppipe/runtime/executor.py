"""Where the work runs: a thread pool for store calls, and worker processes (or the same
threads) for the CPU half, with a time limit per page.

The process pool is pebble's: ``schedule(..., timeout=)`` kills and replaces the one worker that
overruns and fails only that page, and a worker that dies fails only its own page
(``ProcessExpired``), where ``concurrent.futures.ProcessPoolExecutor`` marks the whole pool
broken and fails every page in flight.

Workers are started with the spawn method (forking a process that runs an event loop and threads
is unsafe), but from a context that does not re-import the parent's ``__main__``: a crawl script
without ``if __name__ == "__main__":`` would otherwise run again in every worker (multiprocessing's
``_fixup_main_from_path``). The workers only run functions of this package, so they never need
the user's script.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import multiprocessing.context
import os
import signal
import sys
import threading
import time
import types
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar, cast

from pebble import ProcessExpired, ProcessPool

from ..errors import NearDupError
from ..fingerprint.cpus import usable_cpus
from ..fingerprint.page import FingerprintParams, fingerprint_text
from .loop import asyncio_available, await_future

__all__ = ["Executor", "PageTimeout", "WorkerDied", "default_workers"]

T = TypeVar("T")


class PageTimeout(NearDupError):
    """Fingerprinting one page took longer than ``NEARDUP_PAGE_TIMEOUT``; it was abandoned."""


class WorkerDied(NearDupError):
    """The worker process fingerprinting this page died (killed, out of memory, crashed)."""


# -- worker processes ---------------------------------------------------------------------------
# Extractors that cost less CPU per page than the crawl's own event loop spends on it (resiliparse
# ~5.6 ms against Scrapy's ~7.4 ms on the real set's pages): the loop, one busy thread, bounds the
# crawl, and a worker on every CPU takes CPU from it (docs/operations.md, "Worker processes by
# extractor").
_CHEAP_EXTRACTORS = frozenset({"resiliparse"})


def default_workers(extractor: str, cpus: int | None = None) -> int:
    """Worker processes when ``NEARDUP_WORKERS`` is unset: one per usable CPU, at most 8, where
    extraction bounds the crawl (trafilatura); with a cheap extractor one CPU is left to the
    crawl's event loop (8 workers leave it one from 9 CPUs on)."""
    n = cpus if cpus is not None else usable_cpus()
    return max(1, min(8, n - 1 if extractor in _CHEAP_EXTRACTORS else n))


_MAIN_LOCK = threading.Lock()


class _NoMainProcess(multiprocessing.context.SpawnProcess):
    """A spawned process that is not told about the parent's ``__main__``.

    ``spawn.get_preparation_data`` reads ``sys.modules["__main__"]`` while the child is being
    launched, and the child re-runs that file or module (as ``__mp_main__``) before anything
    else. For the few milliseconds of the launch a bare module stands in for it, so the child
    starts clean. Only pebble's pool threads launch these processes.
    """

    @staticmethod
    def _Popen(process_obj: Any) -> Any:
        with _MAIN_LOCK:
            main = sys.modules["__main__"]
            sys.modules["__main__"] = types.ModuleType("__main__")
            try:
                return multiprocessing.context.SpawnProcess._Popen(process_obj)
            finally:
                sys.modules["__main__"] = main


class _NoMainSpawnContext(multiprocessing.context.SpawnContext):
    Process = _NoMainProcess


def _exit_with_parent(parent: int) -> None:
    # A crawl killed with SIGKILL cannot stop its pool; the idle workers would wait for tasks
    # forever. Being re-parented is the sign that the crawl is gone.
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(0)


class _ParamsRef:
    """Stands for the executor's :class:`FingerprintParams` in a page sent to a worker: each
    worker got them once, at its start, so a page carries a reference of a few bytes instead
    of the parameters (stop words included: ~2.4 KB, which cost more to pickle and unpickle
    than the page's HTML)."""

    def __reduce__(self) -> str:
        return "_PARAMS"  # pickled as a reference to this module's singleton


_PARAMS = _ParamsRef()
_worker_params: FingerprintParams | None = None  # in a worker: the parameters of its pool


def _with_params(fn: Callable[..., T], args: tuple[Any, ...]) -> T:
    """In a worker: ``fn(*args)`` with :data:`_PARAMS` replaced by the worker's parameters."""
    return fn(*[_worker_params if a is _PARAMS else a for a in args])


def _worker_init(params: FingerprintParams, parent: int) -> None:
    """Worker process start: leave Ctrl-C to the crawl process, exit with it even if it was
    killed (possibly before this worker finished starting: ``parent`` is the crawl's pid, not
    whatever ``getppid()`` says by now), keep the parameters pages refer to, load the
    dictionaries up front, and start loading the compiled SimHash reduction (numba: ~1 s, a
    few seconds to compile without a disk cache) on a thread: the worker takes pages at once,
    reduced by numpy (the same bits) until it is loaded."""
    from ..fingerprint.simhash import warm as warm_fingerprints

    global _worker_params
    _worker_params = params
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_exit_with_parent, args=(parent,), daemon=True).start()
    warm_fingerprints()
    fingerprint_text("预热分词词典 warm up the dictionaries " * 20, params)


# -- the executor -------------------------------------------------------------------------------
# Seconds beyond the page time limit that pages may wait with none ending before the pool is
# taken as stuck: its workers, new ones too, are started by then (spawn and dictionaries take
# ~1-3 s, several times that on a loaded machine; a false alarm only retries its pages).
STALL_GRACE = 20.0
# Pool breaks a page may wait through before it is WorkerDied (kept unchecked): every break is a
# new pool's start-up added to its wait, and no break is the page's doing (Executor).
BREAKS_PER_PAGE = 3


class _PoolGone(NearDupError):
    """The pool a page was queued on broke or was replaced before the page ran."""


def _settle(outer: concurrent.futures.Future[Any], inner: concurrent.futures.Future[Any]) -> None:
    """Copy ``inner``'s outcome to ``outer`` unless ``outer`` was already failed (its pool was
    replaced: the page is being retried elsewhere)."""
    with contextlib.suppress(concurrent.futures.InvalidStateError):
        if inner.cancelled():
            outer.set_exception(_PoolGone("cancelled by its pool"))
        elif inner.exception() is not None:
            outer.set_exception(inner.exception())
        else:
            outer.set_result(inner.result())


class Executor:
    """``run`` sends store calls to threads; ``compute`` sends CPU work to worker processes
    (``workers > 0``) or to the same threads (``workers == 0``), bounded by ``timeout``.

    Every page sent to the workers ends. pebble resolves a page whose own worker died
    (``ProcessExpired``), but when every worker dies at once it marks the pool broken and
    leaves the pages still queued in it unresolved. So each page waits on a future of this
    executor's own; when a pool breaks (noticed by a page that fails with it, by a schedule that
    is refused, or by a watch that looks once a second while pages wait) it is replaced once,
    and the pages it held are failed over to the new pool and retried there, through up to
    ``BREAKS_PER_PAGE`` breaks; a page whose own worker dies under it (pebble's
    ``ProcessExpired``) is :class:`WorkerDied` at once. ``on_restart(reason)`` is told of each
    replacement.

    A break blames no page: pebble breaks a pool when a worker dies while no worker holds a page
    (idle, or still starting), and a page that kills its own worker is ``ProcessExpired``. So a
    page is retried past one break: the OOM killer striking a pool and then its replacement as it
    starts failed every page the two held (16 in a CI run of the crawl test), none of which ran.

    A pool can also stop without breaking: a worker killed while it holds the lock of the
    pool's task channel (pebble#163) leaves every other worker waiting for that lock, and the
    pool never notices. Every page a worker runs ends within the time limit, so when pages
    wait and none has ended for ``timeout + STALL_GRACE`` seconds, the watch replaces the pool
    as a broken one."""

    def __init__(
        self,
        *,
        threads: int,
        workers: int,
        timeout: float,
        params: FingerprintParams,
        on_restart: Callable[[str], None] | None = None,
    ) -> None:
        self.timeout = timeout
        self.params = params
        self.workers = workers
        self.on_restart = on_restart
        self.restarts = 0  # pools replaced because they broke
        self.threads = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="nearduppipe")
        self._lock = threading.RLock()  # (a failed page's callbacks take it again)
        self._generation = 0  # which pool is current; a broken one is replaced once
        # pages on the current pool
        self._waiting: set[concurrent.futures.Future[Any] | _LoopWaiter] = set()
        self._closed = threading.Event()
        self._progress = time.monotonic()  # the last page ended, or pages began to wait
        self._processes: ProcessPool | None = self._new_pool() if workers else None
        if workers:
            threading.Thread(target=self._watch, name="neardup-pool-watch", daemon=True).start()

    def _new_pool(self) -> ProcessPool:
        return ProcessPool(
            max_workers=self.workers,
            initializer=_worker_init,
            initargs=(self.params, os.getpid()),
            context=_NoMainSpawnContext(),
        )

    @property
    def processes(self) -> ProcessPool | None:
        return self._processes

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in the thread pool (store calls)."""
        return await await_future(self.threads.submit(fn, *args))

    async def _on_thread(self, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
        """``fn(*args)`` on a thread, its time limit counted from its start, as a worker's is:
        a page queued behind store calls that wait on a slow store is not timed out unrun."""
        started: concurrent.futures.Future[None] = concurrent.futures.Future()
        future = self.threads.submit(_started_then, started, fn, *args)
        future.add_done_callback(lambda _: _mark(started))  # (cancelled unrun: no wait)
        try:
            await await_future(started)
        except BaseException:  # (the crawl closing: a page not yet started never starts)
            future.cancel()
            raise
        try:
            return await await_future(future, self.timeout)
        except TimeoutError:
            raise PageTimeout(
                f"no result within {self.timeout} s; its thread runs on, as threads cannot "
                "be stopped (NEARDUP_EXECUTOR = 'process' stops it)"
            ) from None

    async def compute(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in a worker; :class:`PageTimeout` past the time limit (the worker is
        replaced), :class:`WorkerDied` if its worker died, or if ``BREAKS_PER_PAGE`` pools broke
        under it (before that, it is retried on the new pool)."""
        if self._processes is None:
            return await self._on_thread(fn, args)
        for attempt in range(1, BREAKS_PER_PAGE + 1):
            waiter: _LoopWaiter | None = None
            try:
                if asyncio_available():
                    waiter, generation = self._schedule_on_loop(fn, args)
                    return cast(T, await waiter.future)
                future, generation = self._schedule(fn, args)
                return await await_future(future)
            except (TimeoutError, concurrent.futures.TimeoutError):
                raise PageTimeout(
                    f"no result within {self.timeout} s; its worker was replaced"
                ) from None
            except ProcessExpired as e:
                raise WorkerDied(f"worker process {e.pid} died (exit code {e.exitcode})") from None
            except (BrokenProcessPool, _PoolGone) as e:
                self._replace_pool(generation, f"worker processes died: {e}")
                if attempt == BREAKS_PER_PAGE:
                    raise WorkerDied(
                        f"worker processes died {BREAKS_PER_PAGE} times while this page waited: {e}"
                    ) from None
            finally:
                self._progress = time.monotonic()
                if waiter is not None:
                    self._waiting.discard(waiter)
        raise AssertionError("unreachable")

    def _schedule_on_loop(
        self, fn: Callable[..., T], args: tuple[Any, ...]
    ) -> tuple[_LoopWaiter, int]:
        """:meth:`compute`'s page on an asyncio loop: the worker's result goes straight to an
        asyncio future (one ``call_soon_threadsafe`` from pebble's thread), where
        :meth:`_schedule` chains a second ``concurrent.futures`` future that ``wrap_future``
        then copies across: ~0.1 ms less of the crawl process's CPU per page
        (benchmarks/crawl.py). The caller discards the waiter from ``_waiting`` when done."""
        loop = asyncio.get_running_loop()
        waiter = _LoopWaiter(loop, loop.create_future())
        inner, generation = self._submit(fn, args, waiter)
        inner.add_done_callback(waiter.hand_over)
        return waiter, generation

    def _submit(
        self, fn: Callable[..., T], args: tuple[Any, ...], waiter: Any
    ) -> tuple[concurrent.futures.Future[T], int]:
        """Schedule ``fn(*args)`` on the current pool; ``waiter`` (what the page waits on) is
        failed over if the pool breaks. Returns pebble's future and the pool's generation."""
        if any(a is self.params for a in args):  # the workers have them: send a reference
            fn, args = _with_params, (fn, tuple(_PARAMS if a is self.params else a for a in args))
        with self._lock:
            if self._processes is None:
                raise WorkerDied("the worker processes are stopped (the crawl is closing)")
            try:
                inner = self._processes.schedule(fn, args=args, timeout=self.timeout)
            except RuntimeError:  # the pool broke (every worker died while idle): a new one
                self._replace_locked("the worker pool broke while idle")
                inner = self._processes.schedule(fn, args=args, timeout=self.timeout)
            if not self._waiting:  # (the stall clock starts when pages begin to wait)
                self._progress = time.monotonic()
            self._waiting.add(waiter)
            return inner, self._generation

    def _schedule(
        self, fn: Callable[..., T], args: tuple[Any, ...]
    ) -> tuple[concurrent.futures.Future[T], int]:
        outer: concurrent.futures.Future[T] = concurrent.futures.Future()
        inner, generation = self._submit(fn, args, outer)
        outer.add_done_callback(self._forget)
        inner.add_done_callback(functools.partial(_settle, outer))
        return outer, generation

    def _forget(self, future: concurrent.futures.Future[Any]) -> None:
        with self._lock:
            self._progress = time.monotonic()
            self._waiting.discard(future)

    def _replace_pool(self, generation: int, reason: str) -> None:
        """Replace the pool unless another page already did since ``generation``."""
        with self._lock:
            if generation == self._generation and self._processes is not None:
                self._replace_locked(reason)

    def _replace_locked(self, reason: str) -> None:
        broken, self._processes = self._processes, self._new_pool()
        self._progress = time.monotonic()
        self._generation += 1
        self.restarts += 1
        orphans, self._waiting = self._waiting, set()
        gone = _PoolGone(reason)
        for future in orphans:
            _fail(future, gone)
        if broken is not None:  # stopping joins its threads: never on the crawl's thread
            threading.Thread(target=_stop_pool, args=(broken,), daemon=True).start()
        if self.on_restart is not None:
            self.on_restart(reason)

    def _watch(self) -> None:
        """Once a second while pages wait: a pool that broke with nobody to notice (every page
        it held still queued), or that stalled, is replaced, and its pages retried."""
        while not self._closed.wait(1.0):
            with self._lock:
                pool = self._processes
                if pool is None:
                    return
                if self._waiting and not pool.active:
                    self._replace_locked("the worker pool stopped working")
                elif self._waiting and stalled(self._progress, self.timeout, time.monotonic()):
                    self._replace_locked(
                        f"no page ended in {self.timeout + STALL_GRACE:g} s while "
                        f"{len(self._waiting)} waited (a worker killed while it held the "
                        "pool's task channel)"
                    )

    def close(self) -> None:
        """Stop the workers (running pages are abandoned) and the idle threads."""
        self._closed.set()
        with self._lock:
            pool, self._processes = self._processes, None
            orphans, self._waiting = self._waiting, set()
        for future in orphans:
            _fail(future, WorkerDied("the worker processes were stopped (the crawl is closing)"))
        if pool is not None:
            _stop_pool(pool)
        self.threads.shutdown(wait=False, cancel_futures=True)


def stalled(progress: float, timeout: float, now: float) -> bool:
    """Whether pages waiting since ``progress`` (the last page that ended) with none ending
    mean a stuck pool: each page a worker runs ends within ``timeout``."""
    return now - progress > timeout + STALL_GRACE


class _LoopWaiter:
    """A page's asyncio future, settled from any thread through its loop: by pebble's result
    (:meth:`hand_over`), or failed over when its pool broke (:meth:`fail`), whichever first."""

    __slots__ = ("future", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop, future: asyncio.Future[Any]) -> None:
        self.loop = loop
        self.future = future

    def _call(self, fn: Callable[..., None], arg: Any) -> None:
        if not self.loop.is_closed():
            with contextlib.suppress(RuntimeError):  # closed meanwhile
                self.loop.call_soon_threadsafe(fn, arg)

    def hand_over(self, done: concurrent.futures.Future[Any]) -> None:
        """pebble's future is done (on pebble's thread): its outcome, on the loop."""
        self._call(self._settle, done)

    def fail(self, error: BaseException) -> None:
        self._call(self._fail, error)

    def _settle(self, done: concurrent.futures.Future[Any]) -> None:
        future = self.future
        if future.done():  # failed over already, or the page was cancelled
            return
        if done.cancelled():
            future.set_exception(_PoolGone("cancelled by its pool"))
        elif (exc := done.exception()) is not None:
            future.set_exception(exc)
        else:
            future.set_result(done.result())

    def _fail(self, error: BaseException) -> None:
        if not self.future.done():
            self.future.set_exception(error)


def _started_then(started: concurrent.futures.Future[None], fn: Callable[..., T], *args: Any) -> T:
    _mark(started)
    return fn(*args)


def _mark(started: concurrent.futures.Future[None]) -> None:
    with contextlib.suppress(concurrent.futures.InvalidStateError):  # (marked, or cancelled)
        started.set_result(None)


def _fail(future: concurrent.futures.Future[Any] | _LoopWaiter, error: BaseException) -> None:
    if isinstance(future, _LoopWaiter):
        future.fail(error)
        return
    with contextlib.suppress(concurrent.futures.InvalidStateError):
        future.set_exception(error)


def _stop_pool(pool: ProcessPool) -> None:
    pool.stop()  # type: ignore[no-untyped-call]
    with contextlib.suppress(TimeoutError, RuntimeError):  # workers that ignore SIGTERM
        pool.join(timeout=10)
