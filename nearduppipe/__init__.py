"""nearduppipe: SimHash near-duplicate filtering for Scrapy crawls.

The core (:mod:`.fingerprint`: text → features → fingerprints; :mod:`.index`; :mod:`.stores`;
:mod:`.batch`) knows nothing of Scrapy; the Scrapy adapters live at this level
(:mod:`nearduppipe.middlewares`, :mod:`nearduppipe.pipelines`, ...). The layers and where each
kind of change goes: docs/architecture.md.
"""

from __future__ import annotations

from .errors import NearDupError
from .fingerprint.features import FeatureConfig, features
from .fingerprint.rule import Fingerprints, Rule
from .fingerprint.simhash import (
    EmptyFeaturesError,
    fingerprint,
    fingerprints,
    hamming,
    simhash,
    simhash_pair,
)
from .fingerprint.text import Extraction, TextLimits, extract, extract_text
from .index import BlockIndex, Layout
from .stores import Decision, Entry, Match, Store, StoreError, open_store
from .stores.base import BadKey, StoreUnavailable, Verdict

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
    "NearDupError",
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
    if name == "lookup":
        from .runtime import lookup

        return lookup
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
