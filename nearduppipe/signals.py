"""Signals nearduppipe sends, for extensions that count, archive or re-queue dropped pages.

``neardup_dropped`` is sent (``crawler.signals.send_catch_log``) for every page the middleware
drops and every item the pipeline drops, with these arguments (a handler takes the ones it
needs):

- ``key``: the dropped page's URL, or the item's key;
- ``match``: the earlier near-duplicate, a :class:`nearduppipe.Match` (``key``, ``fingerprint``,
  ``distance``);
- ``source``: ``"pages"`` (middleware) or ``"items"`` (pipeline);
- ``request`` and ``response`` for a page, ``item`` for an item.

Example::

    class DropArchive:
        @classmethod
        def from_crawler(cls, crawler):
            ext = cls()
            crawler.signals.connect(ext.dropped, signal=nearduppipe.signals.neardup_dropped)
            return ext

        def dropped(self, key, match, source):
            ...
"""

from __future__ import annotations

__all__ = ["neardup_dropped"]

neardup_dropped = object()
