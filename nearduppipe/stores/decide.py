"""One fingerprinted page → one decision against a store: the store half of the per-page job.

The fingerprints come from :mod:`nearduppipe.fingerprint.page`, computed anywhere (a worker
process); the store's atomic check is the only shared state and runs where the store lives.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..fingerprint.page import Fingerprinted
from .base import Match, Source, Store
from .counts import Status

__all__ = ["Deduplicator", "Outcome"]


@dataclass(frozen=True)
class Outcome:
    """What became of one page or item.

    ``status``: ``skipped`` (nothing checked; ``skipped`` names why), or the store's verdict:
    ``new`` (stored), ``duplicate`` (``match`` is the earlier near-duplicate; drop it),
    ``unchanged`` (a revisit of a stored key with the same content; ``match`` is its own
    entry), ``changed`` (a revisit with new content, stored in place of the old), ``again``
    (this crawl job already checked this key: a retry, a redirect back, a resumed job)."""

    fingerprint: int | None = None
    match: Match | None = None
    skipped: str | None = None
    text_length: int = 0
    status: Status | Literal["skipped"] = "skipped"

    @property
    def duplicate(self) -> bool:
        return self.status == "duplicate"


class Deduplicator:
    """The store half of the job, for fingerprints computed anywhere (a worker process).
    ``job`` identifies the crawl job (kept with each entry; see :class:`Outcome`)."""

    def __init__(self, store: Store, job: str | None = None) -> None:
        self.store = store
        self.job = job

    def decide(self, result: Fingerprinted, key: str, source: Source = "pages") -> Outcome:
        """Check a fingerprinted page against the store (``source``: whose check it is, for
        the store's counters); a skipped result touches no store."""
        if result.fingerprints is None:
            return Outcome(skipped=result.skipped, text_length=result.text_length)
        verdict = self.store.check(
            result.fingerprints, key, text=result.sample, job=self.job, source=source
        )
        return Outcome(
            result.fingerprints.fp, verdict.match, None, result.text_length, verdict.status
        )
