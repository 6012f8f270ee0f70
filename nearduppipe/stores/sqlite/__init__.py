"""The sqlite backend (``sqlite:///…`` or a bare path, the default store): one file per store.

:mod:`.store` is the store; records, files and locks, the index snapshot, the background writer
and format migrations each have a module of their own; :mod:`.backend` is the backend object
(the file a URI names, reads of a file without opening the store).
"""

from __future__ import annotations

from .backend import SqliteBackend
from .store import FORMAT_VERSION, SqliteStore, sqlite_path

__all__ = ["FORMAT_VERSION", "SqliteBackend", "SqliteStore", "sqlite_path"]
