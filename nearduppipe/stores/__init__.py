"""Fingerprint stores: one small interface, one module per backend, chosen by URI scheme."""

from __future__ import annotations

import functools

from .base import (
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
    "Decision",
    "Entry",
    "Match",
    "Store",
    "StoreError",
    "StoreUnavailable",
    "open_store",
    "register_store",
]


@functools.cache
def _load_builtin_backends() -> None:
    """Import the bundled backends so they register their schemes (lazily: a missing optional
    client library only matters to the URI that needs it)."""
    from . import memory, redis, redis_cluster, sqlite  # noqa: F401
