"""The batch layer: near-duplicates among exported records, all pairs at once, offline.

Feeds in and out (:mod:`.feeds`), the paper's sorted-table join over a fixed set of
fingerprints (:mod:`.pairs`) and the whole ``nearduppipe dedup`` job (:mod:`.records`); built on
the fingerprint, index and store layers, never on Scrapy.
"""

from __future__ import annotations

from .feeds import FEED_FORMATS, FeedError, FeedReader, FeedWriter, feed_format
from .pairs import all_pairs, components, near_pairs, verdicts
from .records import DedupResult, MissingFieldError, dedup_records

__all__ = [
    "FEED_FORMATS",
    "DedupResult",
    "FeedError",
    "FeedReader",
    "FeedWriter",
    "MissingFieldError",
    "all_pairs",
    "components",
    "dedup_records",
    "feed_format",
    "near_pairs",
    "verdicts",
]
