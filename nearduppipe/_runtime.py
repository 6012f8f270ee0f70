"""Kept for imports from before the :mod:`nearduppipe.runtime` package."""

from __future__ import annotations

from .runtime import NearDupRuntime, default_store_uri

__all__ = ["NearDupRuntime", "default_store_uri"]
