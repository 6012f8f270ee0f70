"""A batch's kept records against an existing store (``dedup --against STORE [--add]``): dedup
today's export against what earlier crawls and exports kept.

Each record the batch kept is looked up in the store with the store's own rule, without writing
(:meth:`~nearduppipe.stores.decide.Deduplicator.lookup`: ``Store.get`` for its own key, then
``Store.near``): it is ``unchanged`` (its key is stored, with content near it), a ``duplicate``
(near another stored key, the nearest named), or new to the store (``new``, or ``changed`` when
its key is stored with other content). The first two are the store's near-duplicates: the batch
drops them and names the stored key each one matches.

``add=True`` then stores the records that were near nothing stored, in input order, from this
one process (the driver: Spark and Dask executors only compute), through the store's ordinary
check (:meth:`~nearduppipe.stores.decide.Deduplicator.decide`, that is ``Store.check``): the
same path a crawl takes, so the store's counters, TTL and decisions stay what a crawl would have
made them, and a record some other writer stored near it in the meantime is caught there rather
than added twice. Run twice, the second run finds every record already stored and adds nothing.

The fingerprints given are each page's own; under a store's ``domain`` or ``host`` scope they
are masked by their key's scope here, as a crawl's are (:mod:`nearduppipe.stores.scope`). The
store refuses a run whose scope, extractor or stated rule differ from what it was built with
(:func:`against_rule`): its fingerprints could not answer it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

from ..fingerprint.page import Fingerprinted
from ..fingerprint.rule import Fingerprints, Rule
from ..stores.base import Store, StoreError
from ..stores.decide import Deduplicator, Outcome

__all__ = ["Against", "AgainstMatch", "AgainstResult", "against_rule", "check_against"]


class AgainstMatch(NamedTuple):
    """Record ``record`` (the batch's record number) with key ``key`` is near the stored page
    ``matched_key``: ``unchanged`` (its own key, stored with content near it) or
    ``duplicate`` (another key). Distances as in :class:`~nearduppipe.stores.base.Match`."""

    record: int
    key: str
    status: Literal["unchanged", "duplicate"]
    matched_key: str
    distance: int
    wide_distance: int | None


@dataclass
class AgainstResult:
    """``matches``: every record near something stored, in input order. ``looked_up``: the
    lookups' verdicts by status. ``added``: records stored by ``add`` (``new`` or
    ``changed``); a record another writer stored a near copy of meanwhile is in ``matches``."""

    matches: list[AgainstMatch] = field(default_factory=list)
    looked_up: Counter[str] = field(default_factory=Counter)
    added: int = 0

    @property
    def dropped(self) -> set[int]:
        """Record numbers of the records the batch drops: near something stored."""
        return {m.record for m in self.matches}


_RULE_FLAGS = (
    ("similarity", "--similarity/--paper"),
    ("radius", "--distance"),
    ("legacy_distance", "the legacy distance"),
)


def against_rule(
    store: Store, *, scope: str, extractor: str, rule: Rule | None = None, where: str = ""
) -> Rule:
    """The rule a run against ``store`` uses: the store's own. A ``scope`` or ``extractor``
    other than the store's is refused (its fingerprints are masked by their scope and made from
    one extractor's text, so they cannot answer another), and so is a ``rule`` the user stated
    that differs from the store's (the batch's own pairs and the store's answers would follow
    two rules); ``rule=None`` takes the store's. Raises :class:`StoreError` naming both."""
    stored = store.rule
    where = where or f"--against {store.uri}"
    for what, flag, have, asked in (
        ("scope", "--scope", stored.scope, scope),
        ("extractor", "--extractor", stored.extractor, extractor),
    ):
        if have != asked:
            raise StoreError(
                f"{where}: the store was built with {what} {have!r} and this run asks for "
                f"{asked!r} ({flag}): its fingerprints cannot answer another {what}. Run with "
                f"{flag} {have}, or against another store"
            )
    if rule is not None:
        for name, flag in _RULE_FLAGS:
            have, asked = getattr(stored, name), getattr(rule, name)
            if have != asked:
                raise StoreError(
                    f"{where}: the store decides with {stored.describe()}, and this run asks "
                    f"for {rule.describe()} ({flag}): leave the rule out to use the store's"
                )
    return stored


Progress = Callable[[int], Any]


class Against:
    """One run against a store, fed the kept records one by one in input order (as the batch's
    second pass reads them): :meth:`check` looks one up (never writes) and notes it for
    :meth:`finish`, which adds the new ones when ``add`` is set. Holds only the new records'
    keys and fingerprints until then."""

    def __init__(self, store: Store, *, add: bool = False, job: str | None = None) -> None:
        if add and store.read_only:
            raise StoreError(f"{store.uri}: opened read-only, so nothing can be added to it")
        self.store = store
        self.add = add
        self._dedup = Deduplicator(store, job)
        self._new: list[tuple[int, str, Fingerprints]] = []
        self.result = AgainstResult()

    def check(self, record: int, key: str, fps: Fingerprints) -> AgainstMatch | None:
        """The stored page record ``record`` (its page's own fingerprints ``fps``) is near, or
        ``None`` when it is new to the store."""
        outcome = self._dedup.lookup(Fingerprinted(fps, None, 0), key)
        self.result.looked_up[outcome.status] += 1
        found = _near(record, key, outcome)
        if found is not None:
            self.result.matches.append(found)
            return found
        if self.add:
            self._new.append((record, key, fps))
        return None

    def finish(self, progress: Progress | None = None) -> AgainstResult:
        """Store the records new to the store (with ``add``), in input order; then flush."""
        if self.add:
            for record, key, fps in self._new:
                outcome = self._dedup.decide(Fingerprinted(fps, None, 0), key)
                if outcome.status in ("new", "changed"):
                    self.result.added += 1
                elif (found := _near(record, key, outcome)) is not None:
                    # another writer stored a near copy since the lookup: this record is its
                    # near-duplicate after all (store.check recorded the decision)
                    self.result.matches.append(found)
                if progress is not None:
                    progress(1)
            self._new.clear()
            self.store.flush()
            self.result.matches.sort(key=lambda m: m.record)
        return self.result


def _near(record: int, key: str, outcome: Outcome) -> AgainstMatch | None:
    m = outcome.match
    if m is None or outcome.status not in ("unchanged", "duplicate"):
        return None
    status: Literal["unchanged", "duplicate"] = (
        "unchanged" if outcome.status == "unchanged" else "duplicate"
    )
    return AgainstMatch(record, key, status, m.key, m.distance, m.wide_distance)


def check_against(
    store: Store,
    records: Iterable[tuple[int, str, Fingerprints]],
    *,
    add: bool = False,
    job: str | None = None,
    progress: Progress | None = None,
) -> AgainstResult:
    """Every record of ``records`` (record number, key, its page's own fingerprints; the kept
    records of a batch, in input order) against ``store`` (module doc)."""
    against = Against(store, add=add, job=job)
    for record, key, fps in records:
        against.check(record, key, fps)
        if progress is not None:
            progress(1)
    return against.finish()
