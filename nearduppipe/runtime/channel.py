"""Worker processes fed by the crawl's asyncio loop itself: no thread in the crawl process.

Each worker has two pipes of its own, one for pages and one for results. The loop writes a page
to a worker's pipe without blocking (what the pipe cannot take yet is written when it can:
``add_writer``) and reads results when the loop sees them arrive (``add_reader``). Each worker
holds at most two pages: the one it runs and the next, already in its pipe (grown to 1 MiB on
Linux, so most pages fit whole), so a worker that finishes a page starts the next at once
without waiting for the crawl process.

A page's time limit starts when its worker takes it: when the worker said it is ready (after
its start-up: dictionaries, the compiled sums), or when the page before it in that worker ended.
A worker past the limit is killed and replaced, and its page fails; a worker that dies fails
the page it was running; its queued page, never started, goes to another worker. A worker that
dies before it is ready fails no page (its pages are queued again), unless workers keep dying
as they start (three in a row): then the pages waiting fail rather than wait forever.

What pebble's pool does with three threads in the crawl process (one to pickle and send pages,
one to receive acknowledgements and results, one to watch the workers) and two messages per page
costs the crawl's busiest process ~0.6-0.7 ms of CPU per page and a thread wake-up per message
(benchmarks/crawl.py, docs/operations.md); here a page is one write and one read on the loop.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import multiprocessing.connection
import multiprocessing.context
import os
import pickle
import struct
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["LoopWorkers"]

_HEADER = struct.Struct("!i")  # (multiprocessing.connection's framing: recv_bytes reads it)
_READY = -1  # the task id of a worker's first message: its start-up is done
_PIPE_BYTES = 1 << 20
_DEPTH = 2  # pages held by a worker: the one it runs and the next
_STARTUP_DEATHS = 3  # workers in a row that die before they are ready: the pages waiting fail


def _grow_pipe(fd: int) -> None:
    """Linux: a pipe that holds a whole page (most of them), so a worker's next page is in it
    before the worker asks (the system's limit, /proc/sys/fs/pipe-max-size, may refuse)."""
    try:
        import fcntl

        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), _PIPE_BYTES)
    except (ImportError, OSError):
        pass


def _worker_main(
    tasks: multiprocessing.connection.Connection,
    results: multiprocessing.connection.Connection,
    initializer: Callable[..., None],
    initargs: tuple[Any, ...],
) -> None:
    """A worker process: start up, say so, then run pages in the order they come."""
    initializer(*initargs)
    results.send_bytes(pickle.dumps((_READY, True, None)))
    while True:
        try:
            data = tasks.recv_bytes()
        except (EOFError, OSError):  # the crawl closed the pipe: done
            return
        task, fn, args = pickle.loads(data)
        try:
            out = (task, True, fn(*args))
        except BaseException as e:  # (the page's failure, for the crawl to handle)
            out = (task, False, e)
        try:
            payload = pickle.dumps(out, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as e:  # a result or an exception that does not pickle
            payload = pickle.dumps((task, False, RuntimeError(f"unpicklable result: {e!r}")))
        results.send_bytes(payload)


class _Page:
    __slots__ = ("data", "future", "id", "timer")

    def __init__(self, id_: int, data: bytes, future: asyncio.Future[Any]) -> None:
        self.id = id_
        self.data = data
        self.future = future
        self.timer: asyncio.TimerHandle | None = None


class _Worker:
    __slots__ = (
        "gone",
        "inbox",
        "outbox",
        "pages",
        "process",
        "ready",
        "results",
        "results_fd",
        "tasks",
        "tasks_fd",
    )

    def __init__(
        self,
        process: multiprocessing.process.BaseProcess,
        tasks: multiprocessing.connection.Connection,
        results: multiprocessing.connection.Connection,
    ) -> None:
        self.process = process
        self.tasks = tasks
        self.results = results
        self.tasks_fd = tasks.fileno()
        self.results_fd = results.fileno()
        self.pages: collections.deque[_Page] = collections.deque()  # [0]: running (if ready)
        self.outbox: collections.deque[memoryview] = collections.deque()  # not yet written
        self.inbox = bytearray()  # read, not yet a whole message
        self.ready = False
        self.gone = False


class LoopWorkers:
    """``workers`` processes started with ``context`` (each runs ``initializer(*initargs)``
    first) when the first page is submitted, fed from that page's loop; every method but
    :meth:`close` runs on that loop's thread. :meth:`submit` returns the page's future: its
    result, ``timed_out()`` past ``timeout`` seconds, or ``died(why)``. ``on_death(why)`` is
    told of each worker that died by itself (not one killed for its time limit)."""

    def __init__(
        self,
        *,
        workers: int,
        timeout: float,
        context: multiprocessing.context.BaseContext,
        initializer: Callable[..., None],
        initargs: tuple[Any, ...],
        timed_out: Callable[[], BaseException],
        died: Callable[[str], BaseException],
        on_death: Callable[[str], None] | None = None,
    ) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None  # the first page's (workers start)
        self.timeout = timeout
        self._size = workers
        self._context = context
        self._init = (initializer, initargs)
        self._timed_out = timed_out
        self._died = died
        self._on_death = on_death
        self._ids = itertools.count()
        self._waiting: collections.deque[_Page] = collections.deque()  # in no worker yet
        self._workers: list[_Worker] = []
        self._startup_deaths = 0
        self.closed = False

    # -- the crawl's side ------------------------------------------------------------------
    def submit(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> asyncio.Future[Any]:
        if self.closed:
            raise self._died("the worker processes are stopped (the crawl is closing)")
        loop = asyncio.get_running_loop()
        if loop is not self.loop:  # the first page (or a new loop: tests run several)
            self._stop_all(self._died("the crawl's event loop was replaced"))
            self.loop = loop
            for _ in range(self._size):
                self._start_worker()
        page = _Page(next(self._ids), b"", loop.create_future())
        page.data = pickle.dumps((page.id, fn, args), protocol=pickle.HIGHEST_PROTOCOL)
        self._waiting.append(page)
        self._feed()
        return page.future

    def pids(self, *, running: bool = False) -> list[int]:
        """The workers' process ids (``running``: only those running a page now)."""
        return [
            w.process.pid
            for w in self._workers
            if w.process.pid is not None and (not running or (w.ready and w.pages))
        ]

    def close(self) -> None:
        """Stop the workers; pages not done fail (``died``). From any thread: the workers are
        killed at once, the pages' futures settled on their loop."""
        if self.closed:
            return
        self.closed = True
        error = self._died("the worker processes were stopped (the crawl is closing)")
        for w in list(self._workers):
            with contextlib.suppress(OSError, ValueError, AttributeError):
                w.process.kill()
        loop = self.loop
        try:
            here = asyncio.get_running_loop()
        except RuntimeError:
            here = None
        if loop is None or here is loop or not loop.is_running():
            self._stop_all(error)
        else:
            with contextlib.suppress(RuntimeError):  # (closed meanwhile)
                loop.call_soon_threadsafe(self._stop_all, error)

    def _stop_all(self, error: BaseException) -> None:
        for w in list(self._workers):
            with contextlib.suppress(OSError, ValueError, AttributeError):
                w.process.kill()
            self._drop(w)
            for page in w.pages:
                self._settle(page, error=error)
        self._workers.clear()
        while self._waiting:
            self._settle(self._waiting.popleft(), error=error)

    # -- workers ---------------------------------------------------------------------------
    def _start_worker(self) -> None:
        tasks_r, tasks_w = self._context.Pipe(duplex=False)
        results_r, results_w = self._context.Pipe(duplex=False)
        _grow_pipe(tasks_w.fileno())
        process = self._context.Process(  # type: ignore[attr-defined]
            target=_worker_main,
            args=(tasks_r, results_w, *self._init),
            name="nearduppipe-worker",
            daemon=True,
        )
        process.start()
        tasks_r.close()  # (the worker's ends: closed here, so a dead worker reads as EOF)
        results_w.close()
        worker = _Worker(process, tasks_w, results_r)
        os.set_blocking(worker.tasks_fd, False)
        os.set_blocking(worker.results_fd, False)
        assert self.loop is not None
        self.loop.add_reader(worker.results_fd, self._read, worker)
        self._workers.append(worker)

    def _drop(self, w: _Worker) -> None:
        """Stop watching ``w``'s pipes and close them."""
        w.gone = True
        with contextlib.suppress(Exception):  # (a loop already closed: nothing to remove)
            assert self.loop is not None
            self.loop.remove_reader(w.results_fd)
            self.loop.remove_writer(w.tasks_fd)
        w.tasks.close()
        w.results.close()
        if w in self._workers:
            self._workers.remove(w)
        # reaped on a thread: a killed worker may take a moment to exit
        threading.Thread(target=w.process.join, daemon=True).start()

    def _lost(self, w: _Worker, error: BaseException | None = None) -> None:
        """``w`` died (or was killed: ``error`` for its page): its running page fails, the
        pages it had not started go back to the front of the line, a new worker starts."""
        if w.gone:
            return
        pages = list(w.pages)
        if error is None:  # it died by itself
            w.process.join(1.0)  # (its exit code, for the message: it is exiting)
            why = f"worker process {w.process.pid} died (exit code {w.process.exitcode})"
            error = self._died(why)
            if self._on_death is not None and not self.closed:
                self._on_death(why)
        self._drop(w)
        if w.ready and pages:
            self._settle(pages.pop(0), error=error)
        elif not w.ready:
            self._startup_deaths += 1
        for page in reversed(pages):
            if page.timer is not None:
                page.timer.cancel()
                page.timer = None
            self._waiting.appendleft(page)
        if self.closed:
            return
        if self._startup_deaths >= _STARTUP_DEATHS:
            self._startup_deaths = 0
            failed = self._died(f"{_STARTUP_DEATHS} worker processes in a row died starting")
            while self._waiting:
                self._settle(self._waiting.popleft(), error=failed)
        while len(self._workers) < self._size:
            self._start_worker()
        self._feed()

    # -- pages -----------------------------------------------------------------------------
    def _feed(self) -> None:
        """Give waiting pages to workers: first to those with none, then a next page to those
        running one."""
        waiting = self._waiting
        for depth in range(_DEPTH):
            for w in self._workers:
                if not waiting:
                    return
                if len(w.pages) == depth and not w.gone:
                    page = waiting.popleft()
                    if page.future.done():  # (given up meanwhile: cancelled)
                        continue
                    w.pages.append(page)
                    if w.ready and len(w.pages) == 1:
                        self._start_clock(w, page)
                    self._write(w, page.data)

    def _start_clock(self, w: _Worker, page: _Page) -> None:
        assert self.loop is not None
        page.timer = self.loop.call_later(self.timeout, self._expired, w, page)

    def _expired(self, w: _Worker, page: _Page) -> None:
        if w.gone or not w.pages or w.pages[0] is not page:
            return
        with contextlib.suppress(OSError, ValueError, AttributeError):
            w.process.kill()
        self._lost(w, self._timed_out())

    def _write(self, w: _Worker, data: bytes) -> None:
        w.outbox.append(memoryview(_HEADER.pack(len(data))))
        w.outbox.append(memoryview(data))
        if len(w.outbox) == 2:  # (else a write is pending already)
            self._flush(w)

    def _flush(self, w: _Worker) -> None:
        box, loop = w.outbox, self.loop
        assert loop is not None
        if w.gone:
            return
        try:
            while box:
                n = os.write(w.tasks_fd, box[0])
                if n < len(box[0]):
                    box[0] = box[0][n:]
                    loop.add_writer(w.tasks_fd, self._flush, w)
                    return
                box.popleft()
        except BlockingIOError:
            loop.add_writer(w.tasks_fd, self._flush, w)
            return
        except OSError:  # the worker is gone: its results pipe says so
            box.clear()
        loop.remove_writer(w.tasks_fd)

    def _read(self, w: _Worker) -> None:
        try:
            chunk = os.read(w.results_fd, 1 << 16)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:
            self._lost(w)
            return
        inbox = w.inbox
        inbox += chunk
        while len(inbox) >= _HEADER.size:
            (n,) = _HEADER.unpack_from(inbox)
            if len(inbox) < _HEADER.size + n:
                break
            message = bytes(inbox[_HEADER.size : _HEADER.size + n])
            del inbox[: _HEADER.size + n]
            self._message(w, message)
            if w.gone:
                return

    def _message(self, w: _Worker, message: bytes) -> None:
        try:
            task, ok, value = pickle.loads(message)
        except Exception as e:  # (a result that does not unpickle here)
            task, ok, value = (w.pages[0].id if w.pages else None), False, e
        if task == _READY:
            w.ready = True
            self._startup_deaths = 0
            if w.pages:
                self._start_clock(w, w.pages[0])
            return
        if not w.pages or w.pages[0].id != task:  # (never: pages run in the order sent)
            self._lost(w, RuntimeError(f"worker sent the result of page {task} out of order"))
            return
        page = w.pages.popleft()
        if ok:
            self._settle(page, result=value)
        else:
            self._settle(page, error=value)
        if w.pages:  # the next page, already in its pipe, runs from now
            self._start_clock(w, w.pages[0])
        self._feed()

    @staticmethod
    def _settle(page: _Page, *, result: Any = None, error: BaseException | None = None) -> None:
        if page.timer is not None:
            page.timer.cancel()
            page.timer = None
        future = page.future
        if future.done():  # (cancelled: given up by its caller)
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)
