"""The sqlite backend (``sqlite:///…`` or a bare path, the default store): one file per store.

:mod:`.store` is the store; records, files and locks, the index snapshot, the background writer
and format migrations each have a module of their own.
"""

from __future__ import annotations

from .store import FORMAT_VERSION, SqliteStore, sqlite_path

__all__ = ["FORMAT_VERSION", "SqliteStore", "sqlite_path"]
