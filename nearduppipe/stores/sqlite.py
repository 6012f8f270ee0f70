"""``sqlite:///relative.sqlite``, ``sqlite:////absolute.sqlite`` or a bare path: the default store.

One sqlitedict table (``neardup``) in one file, so every write goes through one connection and
one commit covers entries and decisions alike. Records are JSON text, never pickle (a store file
is data, not code; a value that is not JSON text is refused, not loaded):

* ``m:<name>``   metadata: format version, creation time
* ``e:<id>``     ``["<fingerprint as 16 hex digits>", <stored_at>, "<key>"(, "<text sample>")]``
* ``d:<id>``     ``{"key", "fp", "match", "match_fp", "distance", "t"(, "text")}``

The file runs in WAL mode with ``synchronous=NORMAL`` (sqlitedict sets OFF, which a power cut can
corrupt) and a busy timeout. Writes are buffered and committed in batches: every
``commit_every`` writes or ``commit_interval`` seconds, whichever comes first (checked on each
write), and at :meth:`flush` / :meth:`close`; a killed process loses at most what came after the
last commit. Callers that may sit idle call :meth:`flush` on a timer (the Scrapy adapters do).
An advisory lock file (``<file>.lock``) keeps a second process from opening the same store:
the in-memory index of one process cannot see another's inserts, so sharing needs Redis.
``read_only=True`` opens without the lock and without a writer, e.g. to report on a store that a
running crawl holds; it sees what that crawl has committed.

At open, the fingerprints are read with a plain read-only sqlite3 cursor (sqlitedict's select
hands rows one by one through a thread queue, ~10x slower) and the index is built in one step.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np
from sqlitedict import SqliteDict

from .base import Decision, Entry, IndexedStore, StoreError, register_store

try:  # POSIX advisory locks; elsewhere the lock is not taken
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

__all__ = ["FORMAT_VERSION", "SqliteStore", "sqlite_path"]

FORMAT_VERSION = 1
TABLE = "neardup"
_SQLITE_MAGIC = b"SQLite format 3\x00"
_ROWS_PER_STATEMENT = 400  # 800 bound parameters, far below SQLite's limit


def sqlite_path(uri: str) -> Path:
    """File path of a sqlite store URI (SQLAlchemy style) or bare path."""
    if uri.lower().startswith("sqlite:"):
        rest = uri[len("sqlite:") :]
        if rest.startswith("///"):
            rest = rest[3:]  # "sqlite:///rel" → "rel"; "sqlite:////abs" → "/abs"
        elif rest.startswith("//"):
            raise StoreError(
                f"{uri!r}: write sqlite:///relative/path.sqlite or sqlite:////absolute/path.sqlite"
            )
        uri = rest
    if not uri:
        raise StoreError("a sqlite store needs a file path")
    return Path(uri).expanduser()


def _encode(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def _decode(value: Any) -> Any:
    if not isinstance(value, str):
        raise StoreError(
            "store record is not JSON text (a pickle or another program's data?); refusing it"
        )
    return json.loads(value)


def _entry_fp(value: Any) -> int:
    # Fast path for the fixed layout '["<16 hex>",...'; anything else goes through json.
    if isinstance(value, str) and value.startswith('["') and value[18:19] == '"':
        return int(value[2:18], 16)
    record = _decode(value)
    return int(record[0], 16)


class SqliteStore(IndexedStore):
    def __init__(
        self,
        path: str | os.PathLike[str],
        distance: int = 3,
        blocks: int | None = None,
        *,
        reset: bool = False,
        commit_every: int = 1000,
        commit_interval: float = 1.0,
        busy_timeout: float = 5.0,
        read_only: bool = False,
        uri: str | None = None,
    ) -> None:
        self.path = Path(path)
        super().__init__(uri or f"sqlite:///{self.path}", distance, blocks)
        if commit_every < 1 or commit_interval <= 0 or busy_timeout < 0:
            raise StoreError(
                f"{self.path}: commit_every must be >= 1, commit_interval > 0, busy_timeout >= 0"
            )
        self.commit_every = commit_every
        self.commit_interval = commit_interval
        self._buffer: list[tuple[str, str]] = []
        self._unwritten_keys: dict[int, str] = {}
        self._last_commit = time.monotonic()
        self._lockfile: int | None = None
        self._db: SqliteDict | None = None
        self._ndecisions = 0
        self.read_only = read_only
        try:
            if read_only:
                if not self.path.is_file():
                    raise StoreError(f"{self.path}: no such store file")
                self._validate_existing()
            else:
                self._prepare_path()
                if self.path.exists():
                    self._validate_existing()
                self._take_lock()
                self._open_db(reset, busy_timeout)
            self._load()
        except BaseException:
            self._release()
            raise

    # -- opening ---------------------------------------------------------------------------
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
                "a WAL and a lock file there)"
            )
        if self.path.exists() and not os.access(self.path, os.R_OK | os.W_OK):
            raise StoreError(f"{self.path}: the file is not readable and writable by this user")

    def _read_only(self) -> sqlite3.Connection:
        return sqlite3.connect(f"file:{quote(str(self.path.resolve()))}?mode=ro", uri=True)

    def _validate_existing(self) -> None:
        size = self.path.stat().st_size
        if size == 0:
            return  # an empty file is a new store
        with open(self.path, "rb") as f:
            head = f.read(100)
        if not head.startswith(_SQLITE_MAGIC):
            raise StoreError(f"{self.path}: not a sqlite database (nothing was changed)")
        if len(head) < 100:
            raise StoreError(f"{self.path}: truncated sqlite file (nothing was changed)")
        try:
            conn = self._read_only()
            try:
                tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
                if tables and TABLE not in tables:
                    raise StoreError(
                        f"{self.path}: a sqlite database of another program (tables: "
                        f"{', '.join(sorted(tables))}); nothing was changed"
                    )
                if TABLE in tables:
                    row = conn.execute(
                        f'SELECT value FROM "{TABLE}" WHERE key = ?', ("m:format",)
                    ).fetchone()
                    version = _decode(row[0]) if row else None
                    if version is not None and (not isinstance(version, int) or version < 1):
                        raise StoreError(f"{self.path}: unknown store format {version!r}")
                    if isinstance(version, int) and version > FORMAT_VERSION:
                        raise StoreError(
                            f"{self.path}: written by a newer nearduppipe (store format "
                            f"{version}, this version reads {FORMAT_VERSION}); upgrade nearduppipe"
                        )
            finally:
                conn.close()
        except sqlite3.DatabaseError as e:
            raise StoreError(f"{self.path}: damaged sqlite file ({e}); nothing was changed") from e

    def _take_lock(self) -> None:
        if fcntl is None:  # pragma: no cover
            return
        lock_path = f"{self.path}.lock"
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "?"
            os.close(fd)
            raise StoreError(
                f"{self.path}: in use by another process (pid {holder}). A sqlite store serves "
                "one process; to share one index between processes or machines, use a "
                "redis:// store"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._lockfile = fd

    def _open_db(self, reset: bool, busy_timeout: float) -> None:
        try:
            db = SqliteDict(
                str(self.path),
                tablename=TABLE,
                flag="w" if reset else "c",
                autocommit=False,
                journal_mode="WAL",
                encode=_encode,
                decode=_decode,
                outer_stack=False,
            )
        except Exception as e:
            raise StoreError(f"{self.path}: cannot open: {e}") from e
        self._db = db
        db.conn.execute("PRAGMA synchronous=NORMAL")
        db.conn.execute(f"PRAGMA busy_timeout={int(busy_timeout * 1000)}")
        if "m:format" not in db:
            db["m:format"] = FORMAT_VERSION
            db["m:created"] = round(time.time(), 3)
            db.commit()

    def _load(self) -> None:
        try:
            conn = self._read_only()
            try:
                rows = conn.execute(
                    f"SELECT key, value FROM \"{TABLE}\" WHERE key >= 'e:' AND key < 'e;' "
                    "ORDER BY key"
                )
                fps = np.fromiter((_entry_fp(v) for _, v in rows), dtype=np.uint64)
                last = conn.execute(
                    f"SELECT key FROM \"{TABLE}\" WHERE key >= 'e:' AND key < 'e;' "
                    "ORDER BY key DESC LIMIT 1"
                ).fetchone()
                (self._ndecisions,) = conn.execute(
                    f"SELECT count(*) FROM \"{TABLE}\" WHERE key >= 'd:' AND key < 'd;'"
                ).fetchone()
            finally:
                conn.close()
        except (sqlite3.DatabaseError, ValueError, IndexError, TypeError) as e:
            raise StoreError(f"{self.path}: damaged store ({e}); nothing was changed") from e
        if len(fps) and (last is None or int(last[0][2:], 16) != len(fps) - 1):
            raise StoreError(f"{self.path}: damaged store (entry ids are not contiguous)")
        self._index.add_many(fps)

    # -- persistence hooks -------------------------------------------------------------------
    @property
    def _sd(self) -> SqliteDict:
        if self._db is None:
            if self.read_only:
                raise StoreError(f"store {self.uri} was opened read-only")
            raise StoreError(f"store {self.uri} is closed")
        return self._db

    def _key_of(self, i: int) -> str:
        key = self._unwritten_keys.get(i)
        if key is not None:
            return key
        if self.read_only:
            conn = self._read_only()
            try:
                row = conn.execute(f'SELECT value FROM "{TABLE}" WHERE key = ?', (f"e:{i:012x}",))
                return str(_decode(row.fetchone()[0])[2])
            finally:
                conn.close()
        return str(self._sd[f"e:{i:012x}"][2])

    def _queue(self, row_key: str, value: str) -> None:
        self._buffer.append((row_key, value))
        now = time.monotonic()
        if (
            len(self._buffer) >= self.commit_every
            or now - self._last_commit >= self.commit_interval
        ):
            self._write_buffer(blocking=False)

    def _write_buffer(self, blocking: bool) -> None:
        """Send buffered rows to sqlitedict's writer thread as a few multi-row statements and
        commit them: one thread hand-off per batch instead of one per row."""
        db = self._sd
        rows, self._buffer = self._buffer, []
        for start in range(0, len(rows), _ROWS_PER_STATEMENT):
            chunk = rows[start : start + _ROWS_PER_STATEMENT]
            sql = f'REPLACE INTO "{TABLE}" (key, value) VALUES ' + ",".join(["(?,?)"] * len(chunk))
            db.conn.execute(sql, [x for row in chunk for x in row])
        db.commit(blocking=blocking)
        self._unwritten_keys.clear()
        self._last_commit = time.monotonic()

    def _save_entry(self, i: int, fp: int, key: str, now: float, text: str | None) -> None:
        self._unwritten_keys[i] = key
        sample = "" if text is None else "," + _encode(text)
        self._queue(f"e:{i:012x}", f'["{fp:016x}",{round(now, 3)!r},{_encode(key)}{sample}]')

    def _save_decision(self, decision: Decision) -> None:
        record = {
            "key": decision.key,
            "fp": f"{decision.fingerprint:016x}",
            "match": decision.matched_key,
            "match_fp": f"{decision.matched_fingerprint:016x}",
            "distance": decision.distance,
            "t": round(decision.decided_at, 3),
        }
        if decision.text is not None:
            record["text"] = decision.text
        self._queue(f"d:{self._ndecisions:012x}", _encode(record))
        self._ndecisions += 1

    # -- reading back ----------------------------------------------------------------------
    def _scan(self, prefix: str) -> Iterator[Any]:
        if not self.read_only:
            self.flush()
        conn = self._read_only()
        try:
            rows = conn.execute(
                f'SELECT value FROM "{TABLE}" WHERE key >= ? AND key < ? ORDER BY key',
                (f"{prefix}:", f"{prefix};"),
            )
            for (value,) in rows:
                yield _decode(value)
        finally:
            conn.close()

    def entries(self) -> Iterator[Entry]:
        for fp, t, key, *text in self._scan("e"):
            yield Entry(key, int(fp, 16), float(t), text[0] if text else None)

    def decisions(self) -> Iterator[Decision]:
        for r in self._scan("d"):
            yield Decision(
                r["key"],
                int(r["fp"], 16),
                r["match"],
                int(r["match_fp"], 16),
                r["distance"],
                float(r["t"]),
                r.get("text"),
            )

    def decision_count(self) -> int:
        return self._ndecisions

    # -- durability and shutdown -----------------------------------------------------------
    def flush(self) -> None:
        with self._lock:
            if self._db is not None:
                self._write_buffer(blocking=True)

    def _release(self) -> None:
        if self._db is not None:
            try:
                self._write_buffer(blocking=True)
            finally:
                db, self._db = self._db, None
                db.close()
        if self._lockfile is not None:
            os.close(self._lockfile)  # closing the descriptor releases the flock
            self._lockfile = None

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._release()


def _open(uri: str, distance: int = 3, **options: Any) -> SqliteStore:
    options.pop("name", None)  # the file path already names the store
    if options.pop("ttl", None) is not None:
        raise StoreError(f"{uri}: ttl is supported by the redis store only")
    try:
        return SqliteStore(sqlite_path(uri), distance, uri=uri, **options)
    except TypeError as e:
        raise StoreError(f"sqlite store {uri!r}: {e}") from e


register_store("sqlite", _open)
