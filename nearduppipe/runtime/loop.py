"""The one place that knows whether the crawl runs on asyncio or on a Twisted reactor.

Scrapy ≥ 2.15 can run without any reactor (``TWISTED_REACTOR_ENABLED = False``); importing
``twisted.internet.reactor`` then fails the crawl. Everything else in the runtime hands work to
``concurrent.futures`` executors and awaits their futures here: with asyncio (the asyncio
reactor, or no reactor at all) through :func:`asyncio.wrap_future`, and only under another
reactor through a ``Deferred`` fired with ``reactor.callFromThread``.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import weakref
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from scrapy.utils.asyncio import AsyncioLoopingCall, create_looping_call, is_asyncio_available
from scrapy.utils.reactor import is_reactor_installed

if TYPE_CHECKING:
    from twisted.internet.task import LoopingCall

    Periodic = AsyncioLoopingCall | LoopingCall

__all__ = [
    "Periodic",
    "asyncio_available",
    "await_future",
    "on_shutdown",
    "periodic",
    "start_coroutine",
]

T = TypeVar("T")


def asyncio_available() -> bool:
    """True when coroutines run on an asyncio loop (asyncio reactor, or no reactor)."""
    try:
        return is_asyncio_available()
    except RuntimeError:  # neither a running loop nor a reactor: plain asyncio code (tests)
        return True


async def await_future(future: concurrent.futures.Future[T], timeout: float | None = None) -> T:
    """Await a ``concurrent.futures`` future on whatever loop runs the crawl; past ``timeout``
    seconds raise :class:`TimeoutError` (the future is cancelled, a running thread is not)."""
    if asyncio_available():
        wrapped = asyncio.wrap_future(future)
        try:
            return await (wrapped if timeout is None else asyncio.wait_for(wrapped, timeout))
        except asyncio.TimeoutError:  # a distinct class before Python 3.11
            raise TimeoutError(f"no result within {timeout} s") from None
    return await _await_with_reactor(future, timeout)


async def _await_with_reactor(
    future: concurrent.futures.Future[T], timeout: float | None
) -> T:  # under a Twisted reactor other than asyncio's
    from scrapy.utils.defer import maybe_deferred_to_future
    from twisted.internet import defer, reactor

    def cancel(_: defer.Deferred[T]) -> None:
        future.cancel()

    d: defer.Deferred[T] = defer.Deferred(cancel)

    def fire(f: concurrent.futures.Future[T]) -> None:
        if d.called:
            return
        if f.cancelled():
            d.cancel()
            return
        exc = f.exception()
        if exc is not None:
            d.errback(exc)
        else:
            d.callback(f.result())

    future.add_done_callback(lambda f: reactor.callFromThread(fire, f))
    if timeout is not None:
        d.addTimeout(timeout, reactor)
    try:
        return await maybe_deferred_to_future(d)
    except defer.TimeoutError:
        raise TimeoutError(f"no result within {timeout} s") from None


def start_coroutine(coro: Coroutine[Any, Any, Any]) -> None:
    """Run ``coro`` in the background on the crawl's loop (fire and forget)."""
    if asyncio_available():
        task = asyncio.ensure_future(coro)
        _background.add(task)
        task.add_done_callback(_background.discard)
        return
    from scrapy.utils.defer import deferred_from_coro

    deferred_from_coro(coro)


_background: set[asyncio.Future[Any]] = set()


def periodic(fn: Callable[[], None]) -> Periodic:
    """A looping call on the crawl's loop: asyncio's without a Twisted reactor."""
    if asyncio_available():
        return AsyncioLoopingCall(fn)
    return create_looping_call(fn)  # Twisted's LoopingCall


def on_shutdown(fn: Callable[[], object]) -> None:
    """Call ``fn`` when the process winds down even if the crawl never closed normally: before
    the reactor shuts down where there is one, at interpreter exit otherwise. Holds ``fn``'s
    object weakly (a closed runtime may be collected)."""
    ref = weakref.WeakMethod(fn) if hasattr(fn, "__self__") else (lambda: fn)

    def call() -> None:
        target = ref()
        if target is not None:
            target()

    if is_reactor_installed():
        from twisted.internet import reactor

        reactor.addSystemEventTrigger("before", "shutdown", call)  # type: ignore[arg-type]
    else:
        atexit.register(call)
