"""The store layer: fingerprints kept across crawls, behind one small interface (:mod:`.base`).

A backend is chosen by URI scheme: :mod:`.memory` here, :mod:`.sqlite` and :mod:`.redis` in
folders of their own, each one object (:mod:`.backend`: :func:`backend_for`) that opens its
stores and answers what the command line asks beside the store interface. Below them: the
in-memory index every backend searches (:mod:`.indexed`), counters (:mod:`.counts`), one page's
decision (:mod:`.decide`) and the report model (:mod:`.report`). Imports the fingerprint and
index layers, never Scrapy.
"""

from __future__ import annotations

import functools

from .backend import (
    Backend,
    Damage,
    Migration,
    StoreListing,
    Unsupported,
    backend_for,
    find_backend,
    register_backend,
    scheme_of,
)
from .base import (
    Alias,
    Decision,
    Entry,
    Match,
    Store,
    StoreError,
    StoreUnavailable,
    open_store,
    register_store,
)

__all__ = [
    "Alias",
    "Backend",
    "Damage",
    "Decision",
    "Entry",
    "Match",
    "Migration",
    "Store",
    "StoreError",
    "StoreListing",
    "StoreUnavailable",
    "Unsupported",
    "backend_for",
    "find_backend",
    "open_store",
    "register_backend",
    "register_store",
    "scheme_of",
]


@functools.cache
def _load_builtin_backends() -> None:
    """Import the bundled backends so they register their schemes (lazily: a missing optional
    client library only matters to the URI that needs it)."""
    from . import memory, redis, sqlite  # noqa: F401
