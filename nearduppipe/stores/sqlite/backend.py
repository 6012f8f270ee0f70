"""The sqlite backend's object (:class:`~nearduppipe.stores.backend.Backend`): a store is one
file, which a URI names (``sqlite:///…`` or a bare path). Its metadata, its damaged rows and the
rows a copy leaves are read from the file, read only, without opening the store."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..backend import Backend, Damage, register_backend
from ..base import Store, StoreError
from .fields import hint
from .files import TABLE, check_links, decode, read_connection, sqlite_path, stored_format
from .migrate import read_only_view
from .store import SqliteStore

if TYPE_CHECKING:
    from ...fingerprint.rule import Rule

__all__ = ["SqliteBackend"]


class SqliteBackend(Backend):
    name = "sqlite"

    def open(self, uri: str, *, rule: Rule | None = None, **options: Any) -> Store:
        options.pop("name", None)  # the file path already names the store
        path = sqlite_path(uri)
        if options.get("read_only") and path.is_file():
            options.pop("change_ttl", None)  # (readers record nothing)
            check_links(path, read_only=True)  # (before sqlite opens it by this name)
            if stored_format(path) == 1:
                return read_only_view(path, uri, rule, options)  # reads never write: no migration
        try:
            return SqliteStore(path, rule, uri=uri, **options)
        except TypeError as e:
            raise StoreError(f"sqlite store {uri!r}: {e}") from e

    def file(self, uri: str) -> Path:
        return sqlite_path(uri)

    def with_file(self, uri: str, path: Path) -> str:
        return f"sqlite:///{path}" if uri.lower().startswith("sqlite:") else str(path)

    def meta(self, uri: str, name: str | None = None) -> dict[str, str] | None:
        """The ``m:`` rows of the file (``m:ttl`` → ``ttl``), read only; ``None`` when there is
        no file, or no store table in it (the open says what is wrong with it)."""
        path = self.file(uri)
        if not path.is_file():
            return None
        conn = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True)
        try:
            rows = conn.execute(
                f"SELECT key, value FROM \"{TABLE}\" WHERE key >= 'm:' AND key < 'm;'"
            ).fetchall()
        except sqlite3.Error:
            return None  # (no table yet, or not a store)
        finally:
            conn.close()
        out = {}
        for key, raw in rows:
            value = decode(raw, f"{path}: record {key}")
            out[key[2:]] = value if isinstance(value, str) else json.dumps(value)
        return out

    def is_damage(self, error: BaseException) -> bool:
        return isinstance(error, StoreError) and "decode to UTF-8" in str(error)

    def damaged_records(self, uri: str, name: str | None = None) -> list[Damage]:
        """The rows whose key or value sqlite cannot give as text (bytes that are not UTF-8)."""
        path = self.file(uri)
        conn = read_connection(path)
        conn.text_factory = bytes
        try:
            found = []
            for key, value in conn.execute(f'SELECT key, value FROM "{TABLE}"'):
                try:
                    key.decode("utf-8")
                    if isinstance(value, bytes):
                        value.decode("utf-8")
                except UnicodeDecodeError:
                    where = f"{path}: record {key.decode('utf-8', 'backslashreplace')!r}"
                    found.append(Damage(where, "not UTF-8 text", hint(where)))
            return found
        finally:
            conn.close()

    def leftovers(self, uri: str, name: str | None, store: Store, copied: int) -> list[str]:
        known = " OR ".join(f"(key >= '{k}:' AND key < '{k};')" for k in "mkidea")
        conn = read_connection(self.file(uri))
        try:
            unknown, first = conn.execute(
                f'SELECT count(*), min(key) FROM "{TABLE}" WHERE NOT ({known})'
            ).fetchone()
            (entry_rows,) = conn.execute(
                f"SELECT count(*) FROM \"{TABLE}\" WHERE key >= 'i:' AND key < 'i;'"
            ).fetchone()
        finally:
            conn.close()
        out = []
        if unknown:
            out.append(
                f"{unknown} row(s) of no kind a store writes (the first: {first!r:.60}) were "
                "not copied"
            )
        if entry_rows > copied:
            out.append(
                f"{entry_rows - copied} entry row(s) (i:…) that no page key (k:…) points to "
                "were not copied: they are no page of the store"
            )
        return out


register_backend("sqlite", SqliteBackend())
