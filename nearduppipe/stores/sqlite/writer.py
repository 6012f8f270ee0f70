"""Durable, pipelined batch writes through sqlitedict's writer thread.

sqlitedict queues statements to one thread that owns the connection. Its own ``commit()`` runs
``conn.commit()`` unguarded on that thread: a failed commit (disk full) kills the thread, and
every later ``commit(blocking=True)`` waits forever. So this writer never uses it: it sends
``BEGIN IMMEDIATE``, then the batch, then ``COMMIT``, as ordinary statements with reply queues.
A failure is caught by the thread (which lives on), re-raised here by ``check_raise_error()``,
and every wait is bounded.

Why pipelined: the crawl must not wait for sqlite. A batch is handed to the thread and the
caller goes on; :meth:`poll` (one queue check per write) learns how it ended. One batch is in
flight at a time, so batches commit in order and a failed one is merged back *under* the rows
written since (newer values win) and retried. A batch is sent in two phases: the rows follow
``BEGIN IMMEDIATE`` only once it holds the write lock, so a lock held by another process costs
one busy timeout per attempt, never one per statement (the statements after it run inside
the transaction that already holds the lock).

Failures are of two kinds:

* transient (another process holds the write lock past ``busy_timeout``): writes are still
  accepted into the buffer and retried in the background, until the buffer holds
  ``max_pending`` rows or the lock has been failing for ``retry_deadline`` seconds; then every
  write raises :class:`StoreUnavailable` until a retry succeeds;
* anything else (disk full, I/O error): writes are refused at once, as nothing suggests the
  next attempt will do better; a retry is made at most once a second.

Rows leave the buffer only once their commit succeeded; every statement is an idempotent
``REPLACE`` or ``DELETE``, so a batch partly applied before a failure is simply applied again.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlitedict import SqliteDict

from ..base import StoreUnavailable
from .files import TABLE

__all__ = ["Snapshot", "Statement", "WriteOptions", "Writer"]


@dataclass(frozen=True)
class WriteOptions:
    """When a store commits and how long it waits out a lock (the store's keyword options)."""

    commit_every: int = 1000  # writes
    commit_interval: float = 1.0  # seconds
    busy_timeout: float = 5.0  # seconds another writer may hold the lock per attempt
    max_pending: int = 200_000  # rows accepted while commits wait for the lock
    retry_deadline: float = 300.0  # seconds commits may keep failing before writes are refused

    def __post_init__(self) -> None:
        if (
            self.commit_every < 1
            or not 0 < self.commit_interval < 86400
            or not 0 <= self.busy_timeout < 3600
            or self.max_pending < 1
            or not self.retry_deadline > 0
        ):
            raise ValueError(
                "commit_every and max_pending must be >= 1; commit_interval, busy_timeout "
                "and retry_deadline positive numbers of seconds"
            )


logger = logging.getLogger("nearduppipe")
CACHE_KIB = 64 * 1024  # the writer's page cache: the key index's inner pages stay in memory
# WAL pages between automatic checkpoints (sqlite's default: 1000). A commit rewrites each page
# it touches into the WAL, and new keys land on random leaves of the key index: checkpoints
# every 1000 pages copied the same leaves into the file over and over. 10,000 (a WAL of up to
# ~40 MB) cut the writer thread's CPU time by about a quarter (1 M checks: 33 -> 24 s).
CHECKPOINT_PAGES = 10_000


_NO_MORE = "--no more--"  # sqlitedict's end-of-reply marker
_PUT = f'REPLACE INTO "{TABLE}" (key, value) VALUES '
_DELETE = f'DELETE FROM "{TABLE}" WHERE key IN '
# Multi-row statements: 2,000 rows bind 4,000 parameters (sqlite allows 32,766). Measured
# against executemany (+15 % CPU) and one JSON array through json_each (+75 %).
_ROWS_PER_STATEMENT = 2000
_TRIM = f"DELETE FROM \"{TABLE}\" WHERE key >= 'd:' AND key < ?"
_TRANSIENT = ("locked", "busy")  # sqlite's messages for SQLITE_BUSY / SQLITE_LOCKED


Statement = tuple[str, tuple[Any, ...]]  # more statements of a batch's transaction
Snapshot = tuple[Callable[[], tuple[str, str]], list[Statement]]  # state row, statements


@dataclass
class _Batch:
    rows: dict[str, str | None]
    trim_below: str | None
    replies: queue.Queue[Any] = field(default_factory=queue.Queue)
    writing: bool = False  # False: BEGIN IMMEDIATE sent; True: rows and COMMIT sent
    extra: list[Statement] = field(default_factory=list)


class Writer:
    def __init__(
        self,
        path: Path,
        db: SqliteDict,
        identity: tuple[int, int],
        state: Callable[[], tuple[str, str]],
        options: WriteOptions,
    ) -> None:
        self.path = path
        self.db = db
        self.state = state  # the m:state row, written with every batch
        self.busy_timeout = options.busy_timeout
        self.wait = options.busy_timeout + 10.0  # the longest one reply may take
        self.commit_every = options.commit_every
        self.commit_interval = options.commit_interval
        self.max_pending = options.max_pending
        self.retry_deadline = options.retry_deadline
        self.buffer: dict[str, str | None] = {}  # row key → value, None: delete
        self.trim_below: str | None = None  # decision rows below this key leave the file
        self.batch: _Batch | None = None
        self.failure: StoreUnavailable | None = None
        self.failing_since: float | None = None  # transient failures only
        self.retry_at = 0.0
        self.last_commit = time.monotonic()
        self.identity: tuple[int, int] | None = identity

    def pragmas(self) -> list[str]:
        return [
            "PRAGMA synchronous=NORMAL",
            f"PRAGMA busy_timeout={int(self.busy_timeout * 1000)}",
            f"PRAGMA cache_size={-CACHE_KIB}",
            f"PRAGMA wal_autocheckpoint={CHECKPOINT_PAGES}",
        ]

    # -- statements --------------------------------------------------------------------------
    def statement(self, sql: str, args: tuple[Any, ...] | list[Any] = ()) -> None:
        self.db.conn.execute(sql, args)

    def reply(self, sql: str, args: tuple[Any, ...] | list[Any] = ()) -> None:
        """Run ``sql`` on the writer thread and wait for it (bounded)."""
        replies: queue.Queue[Any] = queue.Queue()
        self._send(sql, args, replies)
        self._wait(replies, time.monotonic() + self.wait)
        self.db.conn.check_raise_error()

    def _send(self, sql: str, args: Any, replies: queue.Queue[Any] | None = None) -> None:
        conn = self.db.conn
        if not conn.is_alive():
            raise OSError("the sqlite writer thread has stopped")
        conn.execute(sql, args, replies)

    @staticmethod
    def _wait(replies: queue.Queue[Any], until: float) -> None:
        try:
            while replies.get(timeout=max(0.0, until - time.monotonic())) != _NO_MORE:
                pass
        except queue.Empty:
            raise TimeoutError("no answer from sqlite in time") from None

    # -- reading the unwritten rows ----------------------------------------------------------
    def lookup(self, row_key: str) -> tuple[bool, str | None]:
        """``(True, value)`` if the row is buffered or in flight (value ``None``: deleted)."""
        if row_key in self.buffer:
            return True, self.buffer[row_key]
        if self.batch is not None and row_key in self.batch.rows:
            return True, self.batch.rows[row_key]
        return False, None

    def pending(self) -> bool:
        return bool(self.buffer) or self.trim_below is not None or self.batch is not None

    def unwritten(self) -> int:
        return len(self.buffer) + (len(self.batch.rows) if self.batch is not None else 0)

    # -- the pipeline ------------------------------------------------------------------------
    def send(self, extra: Sequence[Statement] = ()) -> None:
        """Hand the buffer (and the state row) to the thread as one transaction."""
        assert self.batch is None
        self.check_identity()
        rows = self.buffer
        key, value = self.state()
        rows[key] = value
        self.batch = _Batch(rows, self.trim_below, extra=list(extra))
        self.buffer = {}
        self.trim_below = None
        self.last_commit = time.monotonic()
        try:
            self.db.conn.check_raise_error()  # a stale error from an unrelated statement
            self._send("BEGIN IMMEDIATE", (), self.batch.replies)
        except Exception as e:
            self._failed(e)

    def poll(self, until: float | None = None) -> bool:
        """Advance the batch in flight; ``until``: wait for it to end (bounded). True when no
        batch is in flight any more."""
        b = self.batch
        while b is not None:
            try:
                if until is None:
                    if not b.replies.queue:  # (empty(), without its lock: called per write)
                        return False
                    self._wait(b.replies, time.monotonic() + self.wait)
                else:
                    self._wait(b.replies, until)
            except TimeoutError:
                return False
            try:
                self.db.conn.check_raise_error()
                if not b.writing:
                    self._write(b)
                    continue
            except Exception as e:
                self._failed(e)
                return True
            self.batch = b = None
            self.failure = None
            self.failing_since = None
        return True

    def _write(self, b: _Batch) -> None:
        b.writing = True
        puts = [(k, v) for k, v in b.rows.items() if v is not None]
        gone = [k for k, v in b.rows.items() if v is None]
        for start in range(0, len(puts), _ROWS_PER_STATEMENT):
            chunk = puts[start : start + _ROWS_PER_STATEMENT]
            values = ",".join(["(?,?)"] * len(chunk))
            self._send(_PUT + values, [x for row in chunk for x in row])
        for start in range(0, len(gone), _ROWS_PER_STATEMENT):
            keys = gone[start : start + _ROWS_PER_STATEMENT]
            self._send(_DELETE + "(" + ",".join("?" * len(keys)) + ")", keys)
        if b.trim_below is not None:
            self._send(_TRIM, (b.trim_below,))
        for sql, args in b.extra:
            self._send(sql, args)
        self._send("COMMIT", (), b.replies)

    def _failed(self, e: BaseException) -> None:
        b, self.batch = self.batch, None
        self.rollback()
        if b is not None:  # back under what was written since: newer values win
            b.rows.update(self.buffer)
            self.buffer = b.rows
            marks = [m for m in (self.trim_below, b.trim_below) if m is not None]
            self.trim_below = max(marks) if marks else None
        now = time.monotonic()
        transient = isinstance(e, Exception) and any(w in str(e).lower() for w in _TRANSIENT)
        if transient:
            self.failing_since = self.failing_since or now
        else:
            self.failing_since = None
        self.failure = StoreUnavailable(
            f"{self.path}: could not commit {len(self.buffer)} writes ({type(e).__name__}: {e}); "
            "they are kept in memory and retried"
        )
        self.retry_at = now + (0.2 if transient else 1.0)

    def rollback(self) -> None:
        # nothing to roll back, or the thread is gone; then the ROLLBACK's own error
        with contextlib.suppress(Exception):
            self.reply("ROLLBACK")
        with contextlib.suppress(Exception):
            self.db.conn.check_raise_error()

    # -- what the store calls ----------------------------------------------------------------
    def writable(self) -> None:
        """Before a write: raise if writes cannot be accepted now."""
        self.poll()
        f = self.failure
        if f is None:
            return
        now = time.monotonic()
        if self.failing_since is not None:  # the lock: buffer, within bounds
            if (
                self.unwritten() < self.max_pending
                and now - self.failing_since < self.retry_deadline
            ):
                return
            raise StoreUnavailable(
                f"{f} — for {now - self.failing_since:.0f} s, {self.unwritten()} writes waiting "
                f"(bounds: {self.retry_deadline:g} s, {self.max_pending} writes)"
            )
        if now < self.retry_at:
            raise f
        self.commit()  # time to retry: once, now (bounded); raises if it fails again

    def after_write(self) -> None:
        """After a write was buffered: start a commit if one is due."""
        if self.batch is not None and not self.poll():
            if len(self.buffer) < 16 * self.commit_every or self.failing_since is not None:
                return
            self.poll(time.monotonic() + self.wait)  # the disk is slower than the crawl: wait
            if self.batch is not None:
                return
        now = time.monotonic()
        if self.failure is not None and now < self.retry_at:
            return
        if len(self.buffer) >= self.commit_every or now - self.last_commit >= self.commit_interval:
            self.send()

    def commit(self, within: float = 10.0, extra: Sequence[Statement] = ()) -> None:
        """Write everything buffered and wait for it, for at most ``within`` seconds; raise
        :class:`StoreUnavailable` if it could not be written."""
        until = time.monotonic() + within
        self.poll(until)
        if self.batch is None and (self.buffer or self.trim_below is not None or extra):
            self.send(extra)
            self.poll(until)
        if self.batch is not None:
            n = self.unwritten()
            raise StoreUnavailable(
                f"{self.path}: could not commit {n} writes within {within:g} s (waiting for the "
                "write lock or the disk); they are kept in memory and retried"
            )
        if self.failure is not None:
            raise self.failure

    def check_identity(self) -> None:
        if self.identity is None:
            return
        try:
            st = os.stat(self.path)
            same = (st.st_dev, st.st_ino) == self.identity
        except OSError:
            same = False
        if not same:
            logger.warning(
                "nearduppipe: store file %s was deleted or replaced while open; "
                "writes go to the old file, which is lost at close",
                self.path,
            )
            self.identity = None

    def close(self, flush: bool, snapshot: Callable[[], Snapshot | None] | None = None) -> None:
        """Commit (if asked), fold the WAL into the file, stop the thread, within about 10 s.
        Raises :class:`StoreUnavailable` naming how many writes could not be saved.

        ``snapshot`` (asked for only once every row is committed) gives the index snapshot's
        statements and the state row that goes with them: one more transaction, best effort,
        with a wait that grows with its size. If it cannot be written in time, nothing is
        lost: the next open reads the rows."""
        error: StoreUnavailable | None = None
        if flush:
            try:
                self.commit(within=8.0)
                made = snapshot() if snapshot is not None else None
                if made is not None:
                    self.state, extra = made
                    size = sum(len(a) for _, args in extra for a in args if isinstance(a, bytes))
                    try:
                        self.commit(within=10.0 + size / 20e6, extra=extra)
                    except StoreUnavailable as e:
                        logger.info(
                            "nearduppipe: %s: index snapshot not written (%s)", self.path, e
                        )
                # Fold the WAL into the file: a copy of the file alone, or another name of it
                # (a hard link has its own WAL name), then holds everything.
                self.reply("PRAGMA wal_checkpoint(TRUNCATE)")
            except StoreUnavailable as e:
                error = e
            except Exception:  # the checkpoint is best effort
                pass
        thread = self.db.conn
        self.db.close(force=True)  # never waits on a dead writer thread
        thread.join(timeout=1.0)
        if error is not None:
            raise StoreUnavailable(
                f"{error} — closing without them: {self.unwritten()} writes are lost"
            ) from error
