"""One fingerprinted page → one decision against a store: the store half of the per-page job.

The fingerprints come from :mod:`nearduppipe.fingerprint.page`, computed anywhere (a worker
process); the store's atomic check is the only shared state and runs where the store lives.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..fingerprint.page import Fingerprinted
from ..fingerprint.rule import Fingerprints, distances
from .base import Match, Source, Store
from .counts import Status
from .scope import scoped, unmask

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
    wide: int | None = None  # the page's wide fingerprint (``None``: skipped, or none made)

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
        fps = result.fingerprints
        if fps is None:
            return Outcome(skipped=result.skipped, text_length=result.text_length)
        scope = self.store.rule.scope
        verdict = self.store.check(
            scoped(fps, key, scope), key, text=result.sample, job=self.job, source=source
        )
        match = _own(verdict.match, scope)
        return Outcome(fps.fp, match, None, result.text_length, verdict.status, fps.wide)

    def lookup(
        self, result: Fingerprinted, key: str | None = None, url: str | None = None
    ) -> Outcome:
        """What :meth:`decide` would answer, without writing anything (no entry, decision or
        counter): ``unchanged`` within the rule of ``key``'s own entry, else ``duplicate`` of
        the nearest other key, else ``changed`` (``key`` is stored with other content) or
        ``new``. Lets a spider ask before it acts (stop paginating what it has seen). Under a
        narrower scope than ``global``, the page's scope comes from ``key``, else ``url``."""
        true = result.fingerprints
        if true is None:
            return Outcome(skipped=result.skipped, text_length=result.text_length)
        store, n = self.store, result.text_length
        scope = store.rule.scope
        fps = scoped(true, key or url or "", scope)
        own = store.get(key) if key is not None else None
        if own is not None and store.ttl is not None and own.stored_at < store.now() - store.ttl:
            own = None  # (expired: a check would take it as new, as a crawl's does)
        if own is not None:
            mine = own.fingerprints
            d, dw = distances(mine, fps)
            if store.rule.is_near(d, dw):
                match = _own(Match(own.key, mine.fp, d, dw), scope)
                return Outcome(true.fp, match, None, n, "unchanged", true.wide)
        matches = store.near(fps, exclude=key)
        if matches:
            return Outcome(true.fp, _own(matches[0], scope), None, n, "duplicate", true.wide)
        status: Status = "changed" if own is not None else "new"
        return Outcome(true.fp, None, None, n, status, true.wide)


def _own(match: Match | None, scope: str) -> Match | None:
    """``match`` with its page's own fingerprint (the store keeps it masked by its scope)."""
    if match is None or scope == "global":
        return match
    fp = unmask(Fingerprints(match.fingerprint), match.key, scope).fp
    return match._replace(fingerprint=fp)
