"""Versions of the extraction: what is done to a page around the extractor before its text is
fingerprinted.

A store records the version its fingerprints were made with (in its rule), and a crawl on that
store extracts with that version, so a release that improves extraction never compares one
version's text with another's (a recrawled page would turn ``changed``, a copy would be missed).
New stores get the newest version; ``--reset`` (``NEARDUP_RESET``) starts a store on it.

1. The extractor's text as it is (releases up to 0.2, and every store that records no version).
2. Blocks that are mostly link text (related-article lists, tag clouds, "more news" boxes) are
   removed before the extractor runs (:mod:`.blocks`): the extractors keep them on some
   templates and not on others, which made two copies of one article differ.
"""

from __future__ import annotations

__all__ = ["EXTRACTIONS", "EXTRACTION_VERSION"]

EXTRACTIONS = frozenset({1, 2})
EXTRACTION_VERSION = 2  # what new stores, batch runs without a store and `fingerprint` use
