"""The file side of the sqlite store: paths, validation, locking, record encoding, and opening
the sqlitedict table (with its writer thread).

Kept apart from :mod:`.sqlite` (the store's logic) because none of it depends on what the store
holds: it answers "is this file ours, can we use it, and is anyone else using it?".
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

from sqlitedict import SqliteDict

from ..base import StoreError

try:  # POSIX advisory locks; elsewhere the lock is not taken
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "FORMAT_VERSION",
    "PLAIN_FORMAT",
    "TABLE",
    "FileLock",
    "check_links",
    "decode",
    "encode",
    "format_for",
    "open_db",
    "prepare_path",
    "read_connection",
    "scan_rows",
    "sqlite_path",
    "stored_format",
]

# The newest format this version reads: 3, a store whose rule keeps aliases (``a:`` rows,
# records.py); a store without them is written as format 2, which releases before aliases read.
FORMAT_VERSION = 3
PLAIN_FORMAT = 2


def format_for(aliases: bool) -> int:
    """The format a store is written in: 3 with aliases (older releases must refuse it: they
    would take an alias's key for a page they never saw), else 2."""
    return FORMAT_VERSION if aliases else PLAIN_FORMAT


TABLE = "neardup"
_SQLITE_MAGIC = b"SQLite format 3\x00"

logger = logging.getLogger("nearduppipe")
_WARNED: set[tuple[str, int, int]] = set()  # (path, device, inode): one warning each


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


def encode(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def decode(value: Any, where: str = "record") -> Any:
    """JSON text → value; anything else (a pickle, another program's bytes, broken JSON) is a
    :class:`StoreError` naming the record, never a raw exception and never unpickled."""
    if not isinstance(value, str):
        raise StoreError(
            f"{where} is not JSON text (a pickle or another program's data?); refusing it"
        )
    try:
        return json.loads(value)
    except ValueError as e:
        raise StoreError(f"{where} is not valid JSON ({e})") from None


class _Quiet(logging.Filter):
    """sqlitedict logs every failed statement of its writer thread as a multi-line ERROR dump;
    this store reports each failure itself (StoreUnavailable, retried), so those are noise."""

    def filter(self, record: logging.LogRecord) -> bool:
        return False


for _name in ("sqlitedict", "sqlitedict.SqliteMultithread"):
    logging.getLogger(_name).addFilter(_Quiet())


def open_db(path: Path, reset: bool) -> SqliteDict:
    """The sqlitedict table (created if new, emptied with ``reset``) and its writer thread."""
    try:
        return SqliteDict(
            str(path),
            tablename=TABLE,
            flag="w" if reset else "c",
            autocommit=False,
            journal_mode="WAL",
            encode=encode,
            decode=decode,
            outer_stack=False,
        )
    except Exception as e:
        raise StoreError(f"{path}: cannot open: {e}") from e


def read_connection(path: Path) -> sqlite3.Connection:
    """A read-only connection. In a directory this process cannot write, sqlite cannot create
    the WAL index; the file is then opened as immutable (a snapshot), not reported damaged."""
    target = quote(str(path.resolve()))
    try:
        conn = sqlite3.connect(f"file:{target}?mode=ro", uri=True, check_same_thread=False)
        conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
        return conn
    except sqlite3.OperationalError:
        if os.access(path.parent, os.W_OK):
            raise
        wal = path.with_name(path.name + "-wal")
        if wal.exists() and wal.stat().st_size > 0:
            # an immutable open would not see the writes committed in the WAL
            raise StoreError(
                f"{path}: its {wal.name} holds committed writes that a read-only open cannot "
                f"read from a directory it may not write ({path.parent}); open the store once "
                "where it can be written (a crawl, or nearduppipe info as the directory's owner)"
            ) from None
        conn = sqlite3.connect(f"file:{target}?immutable=1", uri=True, check_same_thread=False)
        conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
        return conn


def scan_rows(path: Path, prefix: str) -> Iterator[tuple[str, Any]]:
    """Every committed row of one kind (``prefix``: ``i``, ``d``…) in key order, through a
    read-only connection of its own."""
    if not path.exists():
        return
    conn = read_connection(path)
    try:
        yield from conn.execute(
            f'SELECT key, value FROM "{TABLE}" WHERE key >= ? AND key < ? ORDER BY key',
            (f"{prefix}:", f"{prefix};"),
        )
    except sqlite3.DatabaseError as e:  # (a damaged page found while scanning)
        raise StoreError(
            f"{path}: damaged: {e} (sqlite3 {path} '.recover' may save the rest)"
        ) from None
    finally:
        conn.close()


def stored_format(path: Path) -> int | None:
    """The store format of an existing file (``None``: a sqlite file with no store yet).
    Raises :class:`StoreError` for anything that is not a usable nearduppipe store."""
    try:
        size = path.stat().st_size
    except OSError as e:
        raise StoreError(f"{path}: cannot read it: {e.strerror}") from None
    if size == 0:
        raise StoreError(
            f"{path}: an empty file (0 bytes), not a store; delete it to start a new store, "
            "or open it with reset"
        )
    try:
        with open(path, "rb") as f:
            head = f.read(100)
    except OSError as e:
        raise StoreError(f"{path}: cannot read it: {e.strerror}") from None
    if not head.startswith(_SQLITE_MAGIC):
        raise StoreError(f"{path}: not a sqlite database (nothing was changed)")
    if len(head) < 100:
        raise StoreError(f"{path}: truncated sqlite file (nothing was changed)")
    try:
        conn = read_connection(path)
    except sqlite3.OperationalError as e:
        if not os.access(path, os.R_OK):
            raise StoreError(f"{path}: not readable by this user ({e})") from None
        raise StoreError(f"{path}: cannot be read here ({e}); nothing was changed") from None
    except sqlite3.DatabaseError as e:
        raise StoreError(f"{path}: damaged sqlite file ({e}); nothing was changed") from None
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        if tables and TABLE not in tables:
            raise StoreError(
                f"{path}: a sqlite database of another program (tables: "
                f"{', '.join(sorted(tables))}); nothing was changed"
            )
        if TABLE not in tables:
            return None
        row = conn.execute(f'SELECT value FROM "{TABLE}" WHERE key = ?', ("m:format",)).fetchone()
    except sqlite3.DatabaseError as e:
        raise StoreError(f"{path}: damaged sqlite file ({e}); nothing was changed") from None
    finally:
        conn.close()
    if row is None:
        return None
    version = decode(row[0], f"{path}: record m:format")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise StoreError(f"{path}: unknown store format {version!r}")
    if version > FORMAT_VERSION:
        raise StoreError(
            f"{path}: written by a newer nearduppipe (store format {version}, this version "
            f"reads {FORMAT_VERSION}); upgrade nearduppipe"
        )
    return version


def not_a_store_file(path: Path) -> str:
    """Why ``path`` (which is not a regular file) can not be read as a store, in a few words:
    a FIFO or a device is named as such, not "no such file" (reading one could block)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return "no such store file"
    kinds = [
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ]
    kind = next((name for test, name in kinds if test(mode)), "not a regular file")
    return f"is {kind}, not a store file"


def prepare_path(path: Path) -> None:
    """Make sure a store can be created or written at ``path``, with a clear error if not."""
    parent = path.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise StoreError(f"{path}: cannot create its directory: {e}") from e
    if path.exists() and not path.is_file():
        raise StoreError(f"{path}: {not_a_store_file(path)}")
    if not os.access(parent, os.W_OK):
        raise StoreError(
            f"{path}: directory {parent} is not writable (the store writes its file, "
            "a WAL and a lock file there); open it read-only to read it"
        )
    if path.exists() and not os.access(path, os.R_OK | os.W_OK):
        raise StoreError(f"{path}: the file is not readable and writable by this user")


def check_links(path: Path, read_only: bool) -> None:
    """Refuse to write a store file that has more than one name (a hard link).

    SQLite names a database's ``-wal`` and ``-shm`` after the path it was opened by, so each
    name of one file gets a write-ahead log of its own: a writer through one name never sees
    the commits a killed writer left in the other name's log, and the two logs later overwrite
    each other's pages (acknowledged rows lost, or a malformed file). Checked before sqlite
    opens the file through this name."""
    try:
        st = os.stat(path)
    except OSError:
        return  # (none yet: a new store; unreadable: the open says so)
    if st.st_nlink <= 1 or not stat.S_ISREG(st.st_mode):
        return
    names = f"{path} has {st.st_nlink} names (hard links)"
    why = (
        "SQLite keeps a database's -wal and -shm files by name, so each name has a write-ahead "
        "log of its own and a crash then loses or corrupts committed rows"
    )
    fix = (
        "keep one name: remove the other link(s) (keep the name the crawls used: its -wal holds "
        f"their last commits), or make a copy of its own: nearduppipe copy {path} NEW.sqlite "
        "(or cp, once no -wal file is left beside either name)"
    )
    if not read_only:
        raise StoreError(f"{names}: refusing to write it. {why}. To use it, {fix}")
    # Read-only opens are let through: they never write the file (nothing to lose), and they
    # are the way out (nearduppipe copy reads its source read-only). They see only what was
    # committed through their own name, so they are refused while a writer holds the file
    # (its log is probably another name's: it opened the file before the link was made).
    if fcntl is not None:
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            return  # (unreadable: the open says so)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            raise StoreError(
                f"{names} and is being written: a read through a name other than the "
                f"writer's would miss its write-ahead log; read it once the writer closes. {why}"
            ) from None
        finally:
            os.close(fd)  # (closing releases the shared lock)
    if (str(path), st.st_dev, st.st_ino) in _WARNED:
        return
    _WARNED.add((str(path), st.st_dev, st.st_ino))
    logger.warning(
        "nearduppipe: %s: read through this name only: rows committed through another name "
        "and left in its -wal are not seen. A writer refuses the file: %s",
        names,
        fix,
    )


class FileLock:
    """One writer per store file, whatever path reaches it.

    Two locks: an ``flock`` on ``<resolved path>.lock`` (a sidecar named after the path with
    symlinks resolved, holding the owner's pid for the error message), and an ``flock`` on the
    database file itself, which every hard link shares. sqlite's own locks are POSIX record
    locks, which do not interact with ``flock`` on Linux."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fds: list[int] = []

    def _busy(self, holder: str) -> StoreError:
        who = f" (pid {holder})" if holder else ""
        return StoreError(
            f"{self.path}: in use by another process{who}. A sqlite store serves one process; "
            "to share one index between processes or machines, use a redis:// store"
        )

    def acquire_sidecar(self) -> None:
        if fcntl is None:  # pragma: no cover
            return
        real = Path(os.path.realpath(self.path))
        fd = os.open(f"{real}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
            os.close(fd)
            raise self._busy(holder) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._fds.append(fd)

    def acquire_file(self) -> os.stat_result:
        """Lock the database file itself (it must exist); returns its identity."""
        if fcntl is None:  # pragma: no cover
            return os.stat(self.path)
        fd = os.open(self.path, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise self._busy("") from None
        self._fds.append(fd)
        return os.fstat(fd)

    def release(self) -> None:
        while self._fds:
            os.close(self._fds.pop())  # closing the descriptor releases the flock
