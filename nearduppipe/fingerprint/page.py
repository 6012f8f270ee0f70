"""One page or text → its fingerprints: the CPU half of the per-page job, free of Scrapy.

The job has two halves. :func:`fingerprint_html` / :func:`fingerprint_text` (here) are pure CPU
work on picklable arguments, so adapters may run them in worker processes; the store's atomic
check (:mod:`nearduppipe.stores.decide`) is the only shared state and runs where the store lives.

Texts shorter than ``min_text_length`` are never compared with other pages: short texts have
few features, and a store full of near-identical stubs ("Page not found", empty templates) would
drop pages wholesale. A short *item* is still recognised when it comes again under its own key
(:func:`exact_fingerprinted`: the key and the text's exact digest), so that a crawl exports it
once and a listing of short items is known as seen.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import xxhash

from .features import DEFAULT_FEATURES, FeatureConfig, features
from .rule import Fingerprints
from .simhash import simhash_pair
from .text import (
    DEFAULT_EXTRACTOR,
    DEFAULT_LIMITS,
    Extractor,
    TextLimits,
    extract,
    normalise_whitespace,
    require_extractor,
)
from .versions import settled_extraction

__all__ = [
    "FingerprintParams",
    "Fingerprinted",
    "exact_fingerprinted",
    "fingerprint_html",
    "fingerprint_text",
]


@dataclass(frozen=True)
class FingerprintParams:
    """Everything the CPU half needs; frozen and picklable (sent to worker processes)."""

    features: FeatureConfig = field(default=DEFAULT_FEATURES)
    limits: TextLimits = field(default=DEFAULT_LIMITS)
    min_text_length: int = 200
    keep_text: int = 0  # characters of text kept as a sample with each decision (0: none)
    # the HTML → text extractor (see .text); fingerprints of two extractors are not comparable
    extractor: Extractor = DEFAULT_EXTRACTOR
    # the extraction version (.versions; 0: the extractor's newest, set when made): a store's
    # own, so its pages compare like with like
    extraction: int = 0

    def __post_init__(self) -> None:
        # an unknown name or a missing extra fails here, when a crawl builds its parameters
        require_extractor(self.extractor)
        object.__setattr__(self, "extraction", settled_extraction(self.extractor, self.extraction))


class Fingerprinted(NamedTuple):
    """Fingerprints, or ``None`` with the reason nothing could be fingerprinted."""

    fingerprints: Fingerprints | None
    skipped: str | None
    text_length: int
    sample: str | None = None

    @property
    def fingerprint(self) -> int | None:
        """The 64-bit SimHash (what logs and ``neardup_fingerprint`` show)."""
        return None if self.fingerprints is None else self.fingerprints.fp


def fingerprint_text(text: str, params: FingerprintParams) -> Fingerprinted:
    """Fingerprint already extracted text (cut to the text limit, white space normalised)."""
    if len(text) > params.limits.max_text_chars:
        text = text[: params.limits.max_text_chars]
    return _fingerprint_normalised(normalise_whitespace(text), params)


def _fingerprint_normalised(text: str, params: FingerprintParams) -> Fingerprinted:
    """:func:`fingerprint_text` of a text already cut and white-space normalised."""
    if len(text) < params.min_text_length:
        return Fingerprinted(None, "too_short" if text else "no_text", len(text))
    if text.count("\ufffd") > len(text) // 50:
        # More than 2% replacement characters: bytes decoded with the wrong charset. Such text
        # says nothing about the page's content, so it is neither stored nor compared.
        return Fingerprinted(None, "bad_encoding", len(text))
    feats = features(text, params.features)
    if not feats:
        return Fingerprinted(None, "no_features", len(text))
    sample = text[: params.keep_text] if params.keep_text else None
    return Fingerprinted(simhash_pair(feats), None, len(text), sample)


def fingerprint_html(
    html: str | bytes, url: str | None, params: FingerprintParams
) -> Fingerprinted:
    """Extract the main text of a page and fingerprint it."""
    extraction = extract(html, url, params.limits, params.extractor, params.extraction)
    if extraction.text is None:
        return Fingerprinted(None, extraction.reason, 0)
    if extraction.truncated or params.limits.max_text_chars < len(extraction.text):
        # a cut can leave white space at the end: normalise again
        return fingerprint_text(extraction.text, params)
    return _fingerprint_normalised(extraction.text, params)  # extract() normalised it


def exact_fingerprinted(key: str | None, text: str) -> Fingerprinted:
    """A short text's identity: digests of its key and the text (white space normalised), 64
    and 512 bits. Its own entry matches it exactly (a revisit: ``again`` in the same crawl,
    ``unchanged`` in the next). Another entry matches it by chance only: a verifying rule
    needs the 64-bit digest within its radius (10^-8 a pair at 10) and the wide one within its
    threshold (8x10^-75 at 61 bits, cosine 0.93), the paper's rule the 64-bit one within its
    distance (about 2.4x10^-15 a pair at distance 3; 3x10^-10 at 8, which is why a crawl checks
    short items only under a verifying rule or a distance of at most 3). ``key=None``: an item
    whose only identity is its text (a listing item keyed ``<page>#item-<digest>``): the same
    text under another such key is the same item, found again (moved to another page)."""
    normal = normalise_whitespace(text)
    data = (
        (key or "").encode("utf-8", "surrogatepass")
        + b"\0"
        + normal.encode("utf-8", "surrogatepass")
    )
    wide = 0
    for seed in range(4):
        wide = (wide << 128) | xxhash.xxh3_128_intdigest(data, seed=seed)
    return Fingerprinted(Fingerprints(xxhash.xxh3_64_intdigest(data), wide), None, len(normal))
