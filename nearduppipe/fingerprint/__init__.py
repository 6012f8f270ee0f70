"""The fingerprint layer: HTML → main text → weighted features → 64-bit and wide SimHash.

Pure functions of their input (stdlib, trafilatura, resiliparse, jieba, xxhash, numpy, numba
for the SimHash sums; never Scrapy, never a store). The functions ``simhash``, ``features`` and
``tokenize`` share their modules' names, so they are re-exported by :mod:`nearduppipe`, not
here: import them from their modules.
"""

from __future__ import annotations

from .features import FeatureConfig
from .page import Fingerprinted, FingerprintParams, fingerprint_html, fingerprint_text
from .rule import PAPER_RULE, Fingerprints, Rule
from .simhash import EmptyFeaturesError, fingerprint, fingerprints, hamming, simhash_pair
from .text import Extraction, TextLimits, extract, extract_text

__all__ = [
    "PAPER_RULE",
    "EmptyFeaturesError",
    "Extraction",
    "FeatureConfig",
    "FingerprintParams",
    "Fingerprinted",
    "Fingerprints",
    "Rule",
    "TextLimits",
    "extract",
    "extract_text",
    "fingerprint",
    "fingerprint_html",
    "fingerprint_text",
    "fingerprints",
    "hamming",
    "simhash_pair",
]
