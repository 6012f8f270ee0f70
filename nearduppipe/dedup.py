"""One page or text → one decision against a store: the whole per-page job, free of Scrapy.

Everything here is CPU work plus one atomic store call, so adapters run it in a worker thread.
Texts shorter than ``min_text_length`` are never checked: short texts have few features, and a
store full of near-identical stubs ("Page not found", empty templates) would drop pages wholesale.
"""

from __future__ import annotations

from dataclasses import dataclass

from .features import DEFAULT_FEATURES, FeatureConfig, features
from .simhash import simhash
from .stores.base import Match, Store
from .text import DEFAULT_LIMITS, TextLimits, extract, normalise_whitespace

__all__ = ["Deduplicator", "Outcome"]


@dataclass(frozen=True)
class Outcome:
    """``skipped`` names why nothing was checked; otherwise ``match`` is the earlier near-duplicate
    (``None``: the page is new and now stored)."""

    fingerprint: int | None = None
    match: Match | None = None
    skipped: str | None = None
    text_length: int = 0

    @property
    def duplicate(self) -> bool:
        return self.match is not None


class Deduplicator:
    def __init__(
        self,
        store: Store,
        feature_config: FeatureConfig = DEFAULT_FEATURES,
        limits: TextLimits = DEFAULT_LIMITS,
        min_text_length: int = 200,
    ) -> None:
        self.store = store
        self.feature_config = feature_config
        self.limits = limits
        self.min_text_length = min_text_length

    def fingerprint_text(self, text: str) -> tuple[int | None, str | None, int]:
        """``(fingerprint, skip reason, text length)`` for already extracted text."""
        if len(text) > self.limits.max_text_chars:
            text = text[: self.limits.max_text_chars]
        text = normalise_whitespace(text)
        if len(text) < self.min_text_length:
            return None, "too_short" if text else "no_text", len(text)
        feats = features(text, self.feature_config)
        if not feats:
            return None, "no_features", len(text)
        return simhash(feats), None, len(text)

    def check_text(self, text: str, key: str) -> Outcome:
        fp, reason, n = self.fingerprint_text(text)
        if fp is None:
            return Outcome(skipped=reason, text_length=n)
        return Outcome(fp, self.store.check_and_add(fp, key), None, n)

    def check_html(self, html: str | bytes, key: str, url: str | None = None) -> Outcome:
        extraction = extract(html, url, self.limits)
        if extraction.text is None:
            return Outcome(skipped=extraction.reason)
        return self.check_text(extraction.text, key)
