"""nearduppipe: SimHash near-duplicate filtering for Scrapy crawls.

The core (text → features → fingerprint; index; stores) knows nothing of Scrapy; the Scrapy
adapters live in :mod:`nearduppipe.middlewares` and :mod:`nearduppipe.pipelines`.
"""

from __future__ import annotations

from .features import FeatureConfig, features
from .index import BlockIndex, Layout
from .simhash import EmptyFeaturesError, fingerprint, hamming, simhash
from .stores import Decision, Entry, Match, Store, StoreError, open_store
from .text import Extraction, TextLimits, extract, extract_text

__version__ = "0.2.0"  # the one place the version is written (pyproject reads it)

__all__ = [
    "BlockIndex",
    "Decision",
    "EmptyFeaturesError",
    "Entry",
    "Extraction",
    "FeatureConfig",
    "Layout",
    "Match",
    "Store",
    "StoreError",
    "TextLimits",
    "__version__",
    "extract",
    "extract_text",
    "features",
    "fingerprint",
    "hamming",
    "open_store",
    "simhash",
]


def __getattr__(name: str) -> object:
    # ``nearduppipe.Addon`` (ADDONS = {"nearduppipe.Addon": 0}) is imported on first use, so
    # that importing the core does not import Scrapy.
    if name == "Addon":
        from .addon import Addon

        return Addon
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
