"""``sqlite:///relative.sqlite``, ``sqlite:////absolute.sqlite`` or a bare path: the default store.

One sqlitedict table in one file (records: :mod:`.sqlite_records`; files and locks:
:mod:`.sqlite_files`). The in-memory index is rebuilt from the ``i:`` rows at open.

Durability: writes are buffered and committed every ``commit_every`` writes or
``commit_interval`` seconds, and at :meth:`flush` / :meth:`close`. A buffered row leaves the
buffer only once its commit succeeded, so a failed commit (disk full, I/O error, another
process holding the lock past ``busy_timeout``) loses nothing: the rows are retried, the failure
is raised as :class:`StoreUnavailable` on that call or the next write, and :meth:`close` raises
(after a bounded wait) if they still cannot be written. Commits go through sqlitedict's writer
thread as ordinary statements with a reply queue, so a failure can never kill the thread and no
call waits forever. A killed process loses at most what came after the last commit.

The file runs in WAL mode with ``synchronous=NORMAL`` and a busy timeout. One process writes a
store (:class:`~.sqlite_files.FileLock`); ``read_only=True`` opens without the lock or a writer
and never writes, e.g. to report on a store that a running crawl holds.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
from sqlitedict import SqliteDict

from ..rule import Fingerprints, Rule
from .base import (
    DEFAULT_MAX_DECISIONS,
    Decision,
    Entry,
    StoreError,
    StoreUnavailable,
    register_store,
)
from .indexed import COUNTERS, IndexedStore
from .sqlite_files import (
    FORMAT_VERSION,
    TABLE,
    FileLock,
    decode,
    encode,
    read_connection,
    sqlite_path,
    stored_format,
)
from .sqlite_migrate import migrate_v1, rule_of
from .sqlite_records import (
    decision_record,
    entry_record,
    load_v2,
    parse_decision,
    parse_entry,
    read_v1,
)

__all__ = ["FORMAT_VERSION", "SqliteStore", "sqlite_path"]

logger = logging.getLogger("nearduppipe")


class _Quiet(logging.Filter):
    """sqlitedict logs every failed statement of its writer thread as a multi-line ERROR dump;
    this store reports each failure itself (StoreUnavailable, retried), so those are noise."""

    def filter(self, record: logging.LogRecord) -> bool:
        return False


for _name in ("sqlitedict", "sqlitedict.SqliteMultithread"):
    logging.getLogger(_name).addFilter(_Quiet())
_ROWS_PER_STATEMENT = 400  # 800 bound parameters, far below SQLite's limit
_NO_MORE = "--no more--"  # sqlitedict's end-of-reply marker


def _rid(i: int) -> str:
    return f"{i:012x}"


class SqliteStore(IndexedStore):
    format_version = FORMAT_VERSION

    def __init__(
        self,
        path: str | os.PathLike[str],
        rule: Rule | None = None,
        *,
        blocks: int | None = None,
        reset: bool = False,
        commit_every: int = 1000,
        commit_interval: float = 1.0,
        busy_timeout: float = 5.0,
        read_only: bool = False,
        ttl: float | None = None,
        max_decisions: int | None = DEFAULT_MAX_DECISIONS,
        clock: Callable[[], float] = time.time,
        uri: str | None = None,
    ) -> None:
        self.path = Path(path)
        if commit_every < 1 or not 0 < commit_interval < 86400 or not 0 <= busy_timeout < 3600:
            raise StoreError(
                f"{self.path}: commit_every must be >= 1, commit_interval and busy_timeout "
                "positive numbers of seconds"
            )
        self.commit_every = commit_every
        self.commit_interval = commit_interval
        self.busy_timeout = busy_timeout
        self.read_only = read_only
        self._buffer: dict[str, str | None] = {}  # row key → value, None: delete
        self._trim_below: int | None = None  # decisions below this seq leave the file
        self._rids = np.zeros(1024, dtype=np.int64)
        self._state = {"rseq": 0, "dseq": 0, "dmin": 0}
        self._last_commit = time.monotonic()
        self._failure: StoreUnavailable | None = None
        self._retry_at = 0.0
        self._db: SqliteDict | None = None
        self._reader: sqlite3.Connection | None = None
        self._lock_file = FileLock(self.path)
        self._identity: tuple[int, int] | None = None
        self._legacy: tuple[list[Entry], list[Decision]] | None = None
        self._legacy_ids: dict[str, int] = {}
        self._closed = False
        try:
            self._open(rule, blocks, reset, ttl, max_decisions, clock, uri)
        except BaseException:
            self._release(flush=False)
            raise

    # -- opening ---------------------------------------------------------------------------
    def _open(
        self,
        rule: Rule | None,
        blocks: int | None,
        reset: bool,
        ttl: float | None,
        max_decisions: int | None,
        clock: Callable[[], float],
        uri: str | None,
    ) -> None:
        where = uri or f"sqlite:///{self.path}"
        if self.read_only:
            if not self.path.is_file():
                raise StoreError(f"{self.path}: no such store file")
            version = stored_format(self.path)
        else:
            self._prepare_path()
            self._lock_file.acquire_sidecar()
            version = None
            if self.path.exists():
                if reset and self.path.stat().st_size == 0:
                    self.path.unlink()
                else:
                    version = stored_format(self.path)
            if version == 1 and not reset:
                migrate_v1(self.path, rule)
                version = FORMAT_VERSION
        self._reader = read_connection(self.path) if self.path.exists() else None
        stored_rule = rule_of(self._reader) if self._reader is not None and not reset else None
        super().__init__(
            where,
            rule or stored_rule or Rule(),
            blocks=blocks,
            ttl=ttl,
            max_decisions=max_decisions,
            clock=clock,
        )
        if not self.read_only:
            self._open_writer(reset, stored_rule)
        if version == 1:  # read-only view of a format-1 store: converted in memory only
            assert self._reader is not None
            entries, decisions = read_v1(self._reader, self.path)
            self._legacy = (entries, list(decisions))
            self._load_legacy(entries)
        elif self._reader is not None and not reset:
            self._load()
        if self.ttl is not None and not self.read_only:
            pruned = self.prune()
            if pruned:
                logger.info(
                    "nearduppipe: %s: pruned %d entries older than the TTL", self.path, pruned
                )
                self.flush()

    def _prepare_path(self) -> None:
        parent = self.path.parent
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise StoreError(f"{self.path}: cannot create its directory: {e}") from e
        if self.path.exists() and not self.path.is_file():
            raise StoreError(f"{self.path}: exists and is not a file")
        if not os.access(parent, os.W_OK):
            raise StoreError(
                f"{self.path}: directory {parent} is not writable (the store writes its file, "
                "a WAL and a lock file there); open it read-only to read it"
            )
        if self.path.exists() and not os.access(self.path, os.R_OK | os.W_OK):
            raise StoreError(f"{self.path}: the file is not readable and writable by this user")

    def _open_writer(self, reset: bool, stored_rule: Rule | None) -> None:
        try:
            db = SqliteDict(
                str(self.path),
                tablename=TABLE,
                flag="w" if reset else "c",
                autocommit=False,
                journal_mode="WAL",
                encode=encode,
                decode=decode,
                outer_stack=False,
            )
        except Exception as e:
            raise StoreError(f"{self.path}: cannot open: {e}") from e
        self._db = db
        st = self._lock_file.acquire_file()
        self._identity = (st.st_dev, st.st_ino)
        self._statement("PRAGMA synchronous=NORMAL")
        self._statement(f"PRAGMA busy_timeout={int(self.busy_timeout * 1000)}")
        if self._reader is None:
            self._reader = read_connection(self.path)
        if reset or stored_rule is None:
            self._buffer["m:format"] = encode(FORMAT_VERSION)
            self._buffer["m:created"] = encode(round(time.time(), 3))
        if stored_rule != self.rule:
            if stored_rule is not None:
                logger.info(
                    "nearduppipe: %s: rule changed from %s to %s",
                    self.path,
                    stored_rule.describe(),
                    self.rule.describe(),
                )
            self._buffer["m:rule"] = encode(self.rule.as_dict())
        if self._buffer:
            self._write(force=True)

    def _load(self) -> None:
        assert self._reader is not None
        row = self._reader.execute(
            f'SELECT value FROM "{TABLE}" WHERE key = ?', ("m:state",)
        ).fetchone()
        if row is not None:
            state = decode(row[0], f"{self.path}: record m:state")
            if not isinstance(state, dict):
                raise StoreError(f"{self.path}: record m:state is damaged")
            for name in ("rseq", "dseq", "dmin"):
                self._state[name] = int(state.get(name, 0))
            for name in COUNTERS:
                self._counters[name] = int(state.get(name, 0))
        try:
            loaded = load_v2(self._reader, self.path)
        except sqlite3.DatabaseError as e:
            raise StoreError(f"{self.path}: damaged store ({e}); nothing was changed") from e
        self._load_arrays(loaded.fps, loaded.wide, loaded.has_wide, loaded.times)
        self._rids = loaded.rids.copy()
        if len(loaded.rids):
            self._state["rseq"] = max(self._state["rseq"], int(loaded.rids[-1]) + 1)

    def _load_legacy(self, entries: list[Entry]) -> None:
        for entry in entries:
            i = self._index_add(entry.fingerprints, entry.stored_at)
            self._set_rid(i, i)
            self._legacy_ids[entry.key] = i

    # -- key ↔ id ----------------------------------------------------------------------------
    def _row(self, row_key: str) -> Any:
        if row_key in self._buffer:
            return self._buffer[row_key]
        if self._reader is None:
            return None
        row = self._reader.execute(
            f'SELECT value FROM "{TABLE}" WHERE key = ?', (row_key,)
        ).fetchone()
        return None if row is None else row[0]

    def _set_rid(self, i: int, rid: int) -> None:
        if i >= len(self._rids):
            grown = np.zeros(max(i + 1, len(self._rids) * 3 // 2), dtype=np.int64)
            grown[: len(self._rids)] = self._rids
            self._rids = grown
        self._rids[i] = rid

    def _id_of_rid(self, rid: int) -> int | None:
        n = self._index.id_count
        i = int(np.searchsorted(self._rids[:n], rid))
        return i if i < n and self._rids[i] == rid and self._index.is_alive(i) else None

    def _find(self, key: str) -> tuple[int, str | None] | None:
        if self._legacy is not None:
            i = self._legacy_ids.get(key)
            return None if i is None else (i, None)
        value = self._row("k:" + key)
        if value is None:
            return None
        rid, job = decode(value, f"{self.path}: record for key {key!r:.80}")
        i = self._id_of_rid(int(rid))
        return None if i is None else (i, job)

    def _entry_at(self, i: int) -> Entry:
        if self._legacy is not None:
            return self._legacy[0][i]
        rid = _rid(int(self._rids[i]))
        value = self._row("i:" + rid)
        if value is None:
            raise StoreError(f"{self.path}: record i:{rid} is missing")
        return parse_entry(value, f"{self.path}: record i:{rid}")

    def _key_of(self, i: int) -> str:
        return self._entry_at(i).key

    def _extra_of(self, i: int) -> tuple[str | None, str | None]:
        e = self._entry_at(i)
        return e.text, e.job

    # -- writes ------------------------------------------------------------------------------
    def _writable(self) -> None:
        if self._failure is not None:
            if time.monotonic() < self._retry_at:
                raise self._failure
            self._write(force=True)

    def _persist_entry(
        self,
        i: int,
        key: str,
        fps: Fingerprints,
        t: float,
        job: str | None,
        text: str | None,
        replaces: int | None,
    ) -> None:
        rid = self._state["rseq"]
        self._state["rseq"] = rid + 1
        self._set_rid(i, rid)
        if replaces is not None:
            self._buffer["i:" + _rid(int(self._rids[replaces]))] = None
        self._buffer["k:" + key] = encode([rid, job])
        self._buffer["i:" + _rid(rid)] = entry_record(fps, t, job, key, text)
        self._queued()

    def _persist_touch(self, i: int, key: str, t: float, job: str | None) -> None:
        e = self._entry_at(i)
        rid = int(self._rids[i])
        self._buffer["k:" + key] = encode([rid, job])
        self._buffer["i:" + _rid(rid)] = entry_record(e.fingerprints, t, job, key, e.text)
        self._queued()

    def _persist_remove(self, i: int, key: str) -> None:
        self._buffer["k:" + key] = None
        self._buffer["i:" + _rid(int(self._rids[i]))] = None
        self._queued()

    def _persist_decision(self, decision: Decision) -> None:
        seq = self._state["dseq"]
        self._state["dseq"] = seq + 1
        self._buffer["d:" + _rid(seq)] = decision_record(decision)
        if self.max_decisions is not None and seq + 1 - self._state["dmin"] > self.max_decisions:
            low = seq + 1 - self.max_decisions
            for s in range(self._state["dmin"], low):
                self._buffer.pop("d:" + _rid(s), None)
            self._counters["decisions_trimmed"] += low - self._state["dmin"]
            self._state["dmin"] = self._trim_below = low
        self._queued()

    def _queued(self) -> None:
        if (
            len(self._buffer) >= self.commit_every
            or time.monotonic() - self._last_commit >= self.commit_interval
        ):
            with contextlib.suppress(StoreUnavailable):  # kept; raised by the next write
                self._write()

    def _statement(self, sql: str, args: tuple[Any, ...] | list[Any] = ()) -> None:
        assert self._db is not None
        self._db.conn.execute(sql, args)

    def _reply(self, sql: str) -> None:
        """Run ``sql`` on the writer thread and wait for it, at most busy_timeout + 10 s."""
        assert self._db is not None
        conn = self._db.conn
        if not conn.is_alive():
            raise OSError("the sqlite writer thread has stopped")
        replies: queue.Queue[Any] = queue.Queue()
        conn.execute(sql, (), replies)
        try:
            while replies.get(timeout=self.busy_timeout + 10.0) != _NO_MORE:
                pass
        except queue.Empty:
            raise OSError(f"no answer from sqlite within {self.busy_timeout + 10:g} s") from None
        conn.check_raise_error()

    def _write(self, force: bool = False) -> None:
        """Commit the buffer. On failure the rows stay buffered (every statement is an
        idempotent REPLACE or DELETE, so a partly applied batch is simply applied again)."""
        if self._db is None or (not self._buffer and self._trim_below is None):
            return
        if not force and self._failure is not None and time.monotonic() < self._retry_at:
            raise self._failure
        self._check_identity()
        state = {**self._state, **self._counters}
        rows = [*self._buffer.items(), ("m:state", encode(state))]
        puts = [(k, v) for k, v in rows if v is not None]
        deletes = [k for k, v in rows if v is None]
        try:
            self._db.conn.check_raise_error()
            for start in range(0, len(puts), _ROWS_PER_STATEMENT):
                chunk = puts[start : start + _ROWS_PER_STATEMENT]
                self._statement(
                    f'REPLACE INTO "{TABLE}" (key, value) VALUES '
                    + ",".join(["(?,?)"] * len(chunk)),
                    [x for r in chunk for x in r],
                )
            for start in range(0, len(deletes), _ROWS_PER_STATEMENT):
                chunk = deletes[start : start + _ROWS_PER_STATEMENT]
                self._statement(
                    f'DELETE FROM "{TABLE}" WHERE key IN (' + ",".join("?" * len(chunk)) + ")",
                    chunk,
                )
            if self._trim_below is not None:
                self._statement(
                    f"DELETE FROM \"{TABLE}\" WHERE key >= 'd:' AND key < ?",
                    ["d:" + _rid(self._trim_below)],
                )
            self._reply("COMMIT")
        except Exception as e:
            self._rollback()
            self._failure = StoreUnavailable(
                f"{self.path}: could not commit {len(rows)} writes ({type(e).__name__}: {e}); "
                "they are kept in memory and retried"
            )
            self._retry_at = time.monotonic() + min(5.0, self.commit_interval)
            raise self._failure from e
        self._buffer.clear()
        self._trim_below = None
        self._failure = None
        self._last_commit = time.monotonic()

    def _rollback(self) -> None:
        try:
            self._reply("ROLLBACK")
        except Exception:
            pass
        try:
            if self._db is not None:
                self._db.conn.check_raise_error()
        except Exception:
            pass

    def _check_identity(self) -> None:
        if self._identity is None:
            return
        try:
            st = os.stat(self.path)
            same = (st.st_dev, st.st_ino) == self._identity
        except OSError:
            same = False
        if not same:
            logger.warning(
                "nearduppipe: store file %s was deleted or replaced while open; "
                "writes go to the old file, which is lost at close",
                self.path,
            )
            self._identity = None

    # -- reading back ----------------------------------------------------------------------
    def _scan(self, prefix: str) -> Iterator[tuple[str, Any]]:
        with self._lock:
            if not self.read_only and self._db is not None:
                self.flush()
        if not self.path.exists():
            return
        conn = read_connection(self.path)
        try:
            rows = conn.execute(
                f'SELECT key, value FROM "{TABLE}" WHERE key >= ? AND key < ? ORDER BY key',
                (f"{prefix}:", f"{prefix};"),
            )
            yield from rows
        finally:
            conn.close()

    def entries(self) -> Iterator[Entry]:
        if self._legacy is not None:
            yield from self._legacy[0]
            return
        for row_key, value in self._scan("i"):
            yield parse_entry(value, f"{self.path}: record {row_key}")

    def decisions(self) -> Iterator[Decision]:
        if self._legacy is not None:
            yield from self._legacy[1]
            return
        for row_key, value in self._scan("d"):
            yield parse_decision(value, f"{self.path}: record {row_key}")

    def decision_count(self) -> int:
        if self._legacy is not None:
            return len(self._legacy[1])
        return self._state["dseq"] - self._state["dmin"]

    # -- durability and shutdown -----------------------------------------------------------
    def flush(self) -> None:
        with self._lock:
            if self._db is not None:
                self._write(force=True)

    def _release(self, flush: bool = True) -> None:
        error: BaseException | None = None
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        if self._db is not None:
            if flush:
                try:
                    self._write(force=True)
                    # Fold the WAL into the file: a copy of the file alone, or another name
                    # of it (a hard link has its own WAL name), then holds everything.
                    self._reply("PRAGMA wal_checkpoint(TRUNCATE)")
                except StoreUnavailable as e:
                    error = e
                except Exception:
                    pass
            db, self._db = self._db, None
            thread = db.conn
            db.close(force=True)  # never waits on a dead writer thread
            thread.join(timeout=10.0)
        self._lock_file.release()
        if error is not None:
            raise StoreUnavailable(
                f"{error} — closing without them: {len(self._buffer)} writes are lost"
            ) from error

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._release()


def _open(uri: str, rule: Rule | None = None, **options: Any) -> SqliteStore:
    options.pop("name", None)  # the file path already names the store
    try:
        return SqliteStore(sqlite_path(uri), rule, uri=uri, **options)
    except TypeError as e:
        raise StoreError(f"sqlite store {uri!r}: {e}") from e


register_store("sqlite", _open)
