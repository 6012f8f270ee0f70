"""The root of every exception nearduppipe raises on purpose.

Each exception class of the package derives from :class:`NearDupError` (and keeps the
built-in or Scrapy base it had: ``except ValueError`` or ``except IgnoreRequest`` still
catch what they caught), so a caller can catch "anything nearduppipe refused" in one clause.
This module imports nothing of the package: it is the bottom layer, importable from any other.
"""

from __future__ import annotations

__all__ = ["NearDupError"]


class NearDupError(Exception):
    """Something nearduppipe refused or could not do (a bad setting, key or feed, a store it
    cannot use, a page it gave up on): the one class to catch them all."""
