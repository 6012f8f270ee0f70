"""Durable batched writes through sqlitedict's writer thread.

sqlitedict queues statements to one thread that owns the connection. Its own ``commit()`` runs
``conn.commit()`` unguarded on that thread: a failed commit (disk full) kills the thread, and
every later ``commit(blocking=True)`` waits forever. So this writer never uses it. It sends
``REPLACE``/``DELETE`` statements and then ``COMMIT`` as an ordinary statement with a reply
queue: a failure is caught by the thread (which lives on), re-raised here by
``check_raise_error()``, and every wait is bounded.

Rows leave the buffer only once their commit succeeded. Every statement is an idempotent
``REPLACE`` or ``DELETE``, so a batch that was partly applied before a failure is simply applied
again. After a failure, writes are refused (``StoreUnavailable``) until a retry succeeds, so the
buffer cannot grow without bound while the disk is full.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import time
from pathlib import Path
from typing import Any

from sqlitedict import SqliteDict

from .base import StoreUnavailable
from .sqlite_files import TABLE

__all__ = ["Writer"]

logger = logging.getLogger("nearduppipe")
_ROWS_PER_STATEMENT = 400  # 800 bound parameters, far below SQLite's limit
_NO_MORE = "--no more--"  # sqlitedict's end-of-reply marker


class Writer:
    def __init__(
        self, path: Path, db: SqliteDict, busy_timeout: float, identity: tuple[int, int]
    ) -> None:
        self.path = path
        self.db = db
        self.wait = busy_timeout + 10.0
        self.buffer: dict[str, str | None] = {}  # row key → value, None: delete
        self.trim_below: str | None = None  # decision rows below this key leave the file
        self.failure: StoreUnavailable | None = None
        self.retry_at = 0.0
        self.last_commit = time.monotonic()
        self.identity: tuple[int, int] | None = identity

    def statement(self, sql: str, args: tuple[Any, ...] | list[Any] = ()) -> None:
        self.db.conn.execute(sql, args)

    def reply(self, sql: str) -> None:
        """Run ``sql`` on the writer thread and wait for it (bounded)."""
        conn = self.db.conn
        if not conn.is_alive():
            raise OSError("the sqlite writer thread has stopped")
        replies: queue.Queue[Any] = queue.Queue()
        conn.execute(sql, (), replies)
        try:
            while replies.get(timeout=self.wait) != _NO_MORE:
                pass
        except queue.Empty:
            raise OSError(f"no answer from sqlite within {self.wait:g} s") from None
        conn.check_raise_error()

    def refuse_if_failing(self) -> None:
        """Before a write: raise the last failure, unless it is time to retry (then retry)."""
        if self.failure is not None:
            if time.monotonic() < self.retry_at:
                raise self.failure
            self.commit(None, force=True)

    def pending(self) -> bool:
        return bool(self.buffer) or self.trim_below is not None

    def commit(self, state: tuple[str, str] | None, force: bool = False) -> None:
        """Write the buffer (and the ``state`` row) in one transaction."""
        if not self.pending():
            return
        if not force and self.failure is not None and time.monotonic() < self.retry_at:
            raise self.failure
        self.check_identity()
        rows = [*self.buffer.items(), *([state] if state else [])]
        puts = [(k, v) for k, v in rows if v is not None]
        deletes = [k for k, v in rows if v is None]
        try:
            self.db.conn.check_raise_error()
            for start in range(0, len(puts), _ROWS_PER_STATEMENT):
                chunk = puts[start : start + _ROWS_PER_STATEMENT]
                values = ",".join(["(?,?)"] * len(chunk))
                self.statement(
                    f'REPLACE INTO "{TABLE}" (key, value) VALUES {values}',
                    [x for r in chunk for x in r],
                )
            for start in range(0, len(deletes), _ROWS_PER_STATEMENT):
                gone = deletes[start : start + _ROWS_PER_STATEMENT]
                marks = ",".join("?" * len(gone))
                self.statement(f'DELETE FROM "{TABLE}" WHERE key IN ({marks})', gone)
            if self.trim_below is not None:
                self.statement(
                    f"DELETE FROM \"{TABLE}\" WHERE key >= 'd:' AND key < ?", [self.trim_below]
                )
            self.reply("COMMIT")
        except Exception as e:
            self.rollback()
            self.failure = StoreUnavailable(
                f"{self.path}: could not commit {len(rows)} writes ({type(e).__name__}: {e}); "
                "they are kept in memory and retried"
            )
            self.retry_at = time.monotonic() + 1.0
            raise self.failure from e
        self.buffer.clear()
        self.trim_below = None
        self.failure = None
        self.last_commit = time.monotonic()

    def rollback(self) -> None:
        # nothing to roll back, or the thread is gone; then the ROLLBACK's own error
        with contextlib.suppress(Exception):
            self.reply("ROLLBACK")
        with contextlib.suppress(Exception):
            self.db.conn.check_raise_error()

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

    def close(self, state: tuple[str, str] | None, flush: bool) -> None:
        """Commit (if asked), fold the WAL into the file, stop the thread: never hangs.
        Raises :class:`StoreUnavailable` naming how many writes could not be saved."""
        error: StoreUnavailable | None = None
        if flush:
            try:
                self.commit(state, force=True)
                # Fold the WAL into the file: a copy of the file alone, or another name of it
                # (a hard link has its own WAL name), then holds everything.
                self.reply("PRAGMA wal_checkpoint(TRUNCATE)")
            except StoreUnavailable as e:
                error = e
            except Exception:  # the checkpoint is best effort
                pass
        thread = self.db.conn
        self.db.close(force=True)  # never waits on a dead writer thread
        thread.join(timeout=10.0)
        if error is not None:
            raise StoreUnavailable(
                f"{error} — closing without them: {len(self.buffer)} writes are lost"
            ) from error
