"""nearduppipe: SimHash near-duplicate filtering for Scrapy crawls.

The core (text → features → fingerprint; index; stores) knows nothing of Scrapy; the Scrapy
adapters live in :mod:`nearduppipe.middlewares` and :mod:`nearduppipe.pipelines`.
"""

from __future__ import annotations

from .features import FeatureConfig, features
from .index import BlockIndex, Layout
from .rule import Fingerprints, Rule
from .simhash import (
    EmptyFeaturesError,
    fingerprint,
    fingerprints,
    hamming,
    simhash,
    simhash_pair,
)
from .stores import Decision, Entry, Match, Store, StoreError, open_store
from .stores.base import BadKey, StoreUnavailable, Verdict
from .text import Extraction, TextLimits, extract, extract_text

__version__ = "0.2.0"  # the one place the version is written (pyproject reads it)

__all__ = [
    "BadKey",
    "BlockIndex",
    "Decision",
    "EmptyFeaturesError",
    "Entry",
    "Extraction",
    "FeatureConfig",
    "Fingerprints",
    "Layout",
    "Match",
    "Rule",
    "Store",
    "StoreError",
    "StoreUnavailable",
    "TextLimits",
    "Verdict",
    "__version__",
    "extract",
    "extract_text",
    "features",
    "fingerprint",
    "fingerprints",
    "hamming",
    "open_store",
    "simhash",
    "simhash_pair",
]


def __getattr__(name: str) -> object:
    # ``nearduppipe.Addon`` (ADDONS = {"nearduppipe.Addon": 0}) is imported on first use, so
    # that importing the core does not import Scrapy.
    if name == "Addon":
        from .addon import Addon

        return Addon
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
