"""The worker processes fed by the crawl's loop (nearduppipe/runtime/channel.py), on real
spawned processes: results, failures, the time limit counted from when a worker takes its page,
deaths, workers that cannot start, closing; and no thread of the crawl process to feed them."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import pytest

from nearduppipe.runtime.channel import LoopWorkers
from nearduppipe.runtime.executor import PageTimeout, WorkerDied, _NoMainSpawnContext

T = TypeVar("T")


def nap(seconds: float, value: Any = None) -> Any:
    time.sleep(seconds)
    return value


def fail(message: str) -> None:
    raise ValueError(message)


def ready() -> None:
    pass


def broken() -> None:
    os._exit(3)


def workers(n: int, timeout: float = 30, init: Callable[[], None] = ready) -> LoopWorkers:
    return LoopWorkers(
        workers=n,
        timeout=timeout,
        context=_NoMainSpawnContext(),
        initializer=init,
        initargs=(),
        timed_out=lambda: PageTimeout("too slow"),
        died=WorkerDied,
    )


def run(coro: Coroutine[Any, Any, T]) -> T:
    loop = asyncio.new_event_loop()  # (never made current: the adapter tests expect Scrapy's)
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.close()


def test_results_and_failures_come_back_to_their_pages() -> None:
    pool = workers(2)

    async def scenario() -> list[Any]:
        pages = [pool.submit(nap, (0.01 * (i % 3), i)) for i in range(20)]
        pages.append(pool.submit(fail, ("bad page",)))
        pages.append(pool.submit(len, ("x" * 3_000_000,)))  # (bigger than the pipe)
        return await asyncio.gather(*pages, return_exceptions=True)

    try:
        out = run(scenario())
    finally:
        pool.close()
    assert out[:20] == list(range(20))
    assert isinstance(out[20], ValueError) and str(out[20]) == "bad page"
    assert out[21] == 3_000_000


def test_a_pages_time_limit_starts_when_its_worker_takes_it() -> None:
    # one worker, two pages of 0.8 s sent at once with a limit of 1.5 s: the second waits
    # 0.8 s in the worker's pipe, which its limit does not count
    pool = workers(1, timeout=1.5)

    async def scenario() -> tuple[Any, ...]:
        await pool.submit(nap, (0,))  # started and ready
        first = pool.submit(nap, (0.8, "a"))
        second = pool.submit(nap, (0.8, "b"))
        slow = pool.submit(nap, (30, "c"))  # past the limit: its worker is replaced
        after = pool.submit(nap, (0, "d"))
        return tuple(await asyncio.gather(first, second, slow, after, return_exceptions=True))

    try:
        a, b, slow, d = run(scenario())
    finally:
        pool.close()
    assert (a, b, d) == ("a", "b", "d")
    assert isinstance(slow, PageTimeout)


def test_a_dead_worker_fails_its_running_page_only() -> None:
    pool = workers(1)

    async def scenario() -> tuple[Any, Any]:
        await pool.submit(nap, (0,))
        running = pool.submit(nap, (30, "never"))
        queued = pool.submit(nap, (0, "queued"))  # in the same worker's pipe, not started
        for _ in range(100):
            await asyncio.sleep(0.02)
            if pool.pids(running=True):
                break
        (pid,) = pool.pids(running=True)
        os.kill(pid, signal.SIGKILL)
        got = await asyncio.gather(running, queued, return_exceptions=True)
        return got[0], got[1]

    try:
        running, queued = run(scenario())
    finally:
        pool.close()
    assert isinstance(running, WorkerDied) and "exit code -9" in str(running)
    assert queued == "queued"  # retried on the new worker


def test_workers_that_die_as_they_start_fail_the_pages_instead_of_hanging() -> None:
    pool = workers(1, init=broken)

    async def scenario() -> Any:
        return await asyncio.wait_for(pool.submit(nap, (0, "x")), 120)

    try:
        with pytest.raises(WorkerDied, match="died starting"):
            run(scenario())
    finally:
        pool.close()


def test_closing_fails_the_pages_not_done() -> None:
    pool = workers(1)

    async def scenario() -> list[Any]:
        await pool.submit(nap, (0,))
        pages = [pool.submit(nap, (30,)) for _ in range(3)]
        await asyncio.sleep(0.1)
        pool.close()
        return await asyncio.gather(*pages, return_exceptions=True)

    out = run(scenario())
    assert all(isinstance(e, WorkerDied) for e in out)
    with pytest.raises(WorkerDied):
        pool.submit(nap, (0,))


def test_the_crawl_process_runs_no_thread_to_feed_its_workers(make_crawler: Any) -> None:
    """(pebble's pool ran three in the crawl process: a thread wake-up per message, two
    messages per page.)"""
    from .support.adapters import ARTICLE, html, middleware, page, respond

    before = set(threading.enumerate())
    mw = middleware(make_crawler, NEARDUP_WORKERS=2)
    for i in range(4):
        respond(mw, html(f"http://a/{i}", page(ARTICLE + f" {i}" * 40 * i)))
    assert len(mw.runtime.executor.processes.pids()) == 2  # type: ignore[union-attr]
    started = [t for t in set(threading.enumerate()) - before if t.is_alive()]
    # (the store's threads and the lease's are the only ones)
    assert all(t.name.startswith(("nearduppipe_", "neardup-lease")) for t in started), started
