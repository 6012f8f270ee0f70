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
The adds come last, once every output of the batch is written (:func:`.records.dedup_records`):
a run that fails before them adds nothing, so running it again gives the same output. A record
whose key no store can hold (:class:`~nearduppipe.stores.base.BadKey`: a lone surrogate, over
65,536 characters) is kept and written but not added, and counted (``unstorable``), as a
crawl's pipeline skips such a page.

The fingerprints given are each page's own; under a store's ``domain`` or ``host`` scope they
are masked by their key's scope here, as a crawl's are (:mod:`nearduppipe.stores.scope`). The
store refuses a run whose scope, extractor or stated rule differ from what it was built with
(:func:`against_rule`): its fingerprints could not answer it.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

import numpy as np

from ..fingerprint.page import Fingerprinted
from ..fingerprint.rule import Fingerprints, Rule
from ..index.words import WIDE_WORDS, words_to_int
from ..stores.base import BadKey, Store, StoreError
from ..stores.decide import Deduplicator, Outcome
from .unicode_out import escape_surrogates

if TYPE_CHECKING:
    from .engine_local import Engine, Side

__all__ = ["Against", "AgainstMatch", "AgainstResult", "against_rule", "check_against"]


class AgainstMatch(NamedTuple):
    """Record ``record`` (the batch's record number) with key ``key`` is near the stored page
    ``matched_key``: ``unchanged`` (its own key, stored with content near it) or
    ``duplicate`` (another key); or ``superseded``: a later record of the inputs has its key
    (a key is one page: the last record of a key is the one checked and stored). Distances
    as in :class:`~nearduppipe.stores.base.Match`."""

    record: int
    key: str
    status: Literal["unchanged", "duplicate", "superseded"]
    matched_key: str
    distance: int
    wide_distance: int | None


@dataclass
class AgainstResult:
    """``matches``: every record near something stored (or superseded by a later record of its
    key), in input order. ``looked_up``: the store's verdicts by status, for every record
    looked up: ``unchanged``, ``duplicate``, or ``new`` (new to the store, or its key stored
    with other content; :func:`check_against` tells ``changed`` apart); a record the store
    refused at ``add`` counts under the status it gave. ``added``: records stored by ``add``;
    a record another writer stored a near copy of meanwhile is in ``matches``.
    ``unstorable``: kept records not added because the store cannot hold their key
    (:class:`~nearduppipe.stores.base.BadKey`), the first few named in ``unstorable_named``.
    ``refused_written``: records the store refused that stay in an output that could not be
    written again (a FIFO: :func:`.records.dedup_records`)."""

    matches: list[AgainstMatch] = field(default_factory=list)
    looked_up: Counter[str] = field(default_factory=Counter)
    added: int = 0
    unstorable: int = 0
    unstorable_named: list[str] = field(default_factory=list)
    refused_written: int = 0  # refused records already written to an -o not written again

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
    store: Store,
    *,
    scope: str,
    extractor: str,
    rule: Rule | None = None,
    where: str = "",
    extraction: int | None = None,
) -> Rule:
    """The rule a run against ``store`` uses: the store's own. A ``scope``, ``extractor`` or
    ``extraction`` version other than the store's is refused (its fingerprints are masked by
    their scope and made from one extraction's text, so they cannot answer another), and so is
    a ``rule`` the user stated that differs from the store's (the batch's own pairs and the
    store's answers would follow two rules); ``rule=None`` takes the store's. Raises
    :class:`StoreError` naming both."""
    stored = store.rule
    where = where or f"--against {store.uri}"
    for what, flag, have, asked in (
        ("scope", "--scope", stored.scope, scope),
        ("extractor", "--extractor", stored.extractor, extractor),
        ("extraction version", "--extraction", stored.extraction, extraction),
    ):
        if have != asked and asked is not None:  # (None: no extraction version asked)
            raise StoreError(
                f"{where}: the store was built with {what} {have!r} and this run asks for "
                f"{asked!r} ({flag}): its fingerprints cannot answer another {what}. Run with "
                f"{flag} {have}, or against another store"
            )
    if rule is not None:
        for name, flag in _RULE_FLAGS:
            have, asked = getattr(stored, name), getattr(rule, name)
            if name == "radius" and not rule.radius_given:
                continue  # (no --distance: the store's)
            if have != asked:
                raise StoreError(
                    f"{where}: the store decides with {stored.describe()}, and this run asks "
                    f"for {rule.describe()} ({flag}): leave the rule out to use the store's"
                )
    return stored


Progress = Callable[[int], Any]
UNSTORABLE_NAMED = 5  # (unstorable keys named in AgainstResult, each cut to 80 characters)


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

    def judge(
        self, engine: Engine, queries: Side, keys: list[str], records: np.ndarray, rule: Rule
    ) -> dict[int, AgainstMatch]:
        """Every query record against the whole store at once, by the engine's join
        (:meth:`Engine.search_against`): ``queries`` are the records' fingerprints masked by
        their scope, ``keys`` their keys, ``records`` their record numbers. Returns the
        records near a stored page, by record number (the caller puts them, with the
        superseded and refused ones, in ``result.matches``): the answers :meth:`check` gives
        one at a time (the store's verdict for its own key first, expired entries matching
        nothing), without a round trip per record."""
        stored = read_stored(self.store, self.store.now())  # (its TTL by its clock)
        side = (stored.fp, stored.wide, stored.has_wide)
        pairs = engine.search_against(queries, side, rule) if len(stored.fp) else None
        found: dict[int, AgainstMatch] = {}
        if pairs is not None and len(pairs):
            q, st, d, dw = pairs[:, 0], pairs[:, 1], pairs[:, 2], pairs[:, 3]
            rows = np.unique(st)  # (only the matched entries' keys are read)
            name = dict(zip(rows.tolist(), stored.keys(rows), strict=True))
            mine = np.fromiter(
                (name[s] == keys[i] for i, s in zip(q.tolist(), st.tolist(), strict=True)),
                dtype=bool,
                count=len(q),
            )
            for row in np.flatnonzero(mine).tolist():  # near its own key's entry
                i = int(q[row])
                found[i] = _match(records[i], keys[i], "unchanged", name, pairs[row])
            # else the nearest other entry: by the wide distance (8 x the 64-bit one where a
            # side has none), then the 64-bit distance, then the oldest (Store.near's order)
            other = np.flatnonzero(~mine & ~np.isin(q, q[mine]))
            if len(other):
                score = np.where(dw[other] >= 0, dw[other], WIDE_WORDS * d[other])
                order = other[np.lexsort((st[other], d[other], score, q[other]))]
                first = order[np.r_[True, q[order][1:] != q[order][:-1]]]
                for row in first.tolist():
                    i = int(q[row])
                    found[i] = _match(records[i], keys[i], "duplicate", name, pairs[row])
        status: Counter[str] = Counter(m.status for m in found.values())
        status["new"] = len(keys) - len(found)  # (new to the store, or its key changed)
        self.result.looked_up.update(+status)
        return {m.record: m for m in found.values()}

    def add_kept(self, record: int, key: str, fps: Fingerprints) -> AgainstMatch | None:
        """Store one record the batch keeps, through the store's check (``add``): ``None``
        when the store took it (``new`` or ``changed``), else the stored page another writer
        put near it since :meth:`judge` (the record is then dropped, not written)."""
        outcome = self._dedup.decide(Fingerprinted(fps, None, 0), key)
        if outcome.status in ("new", "changed"):
            self.result.added += 1
            return None
        self.result.looked_up[outcome.status] += 1  # (a refusal: another writer was first)
        self.result.looked_up["new"] -= 1  # (the join had found it new)
        found = _near(record, key, outcome)
        if found is None:  # (again, claimed: the key is this or a running job's: not ours)
            m = outcome.match
            found = AgainstMatch(record, key, "duplicate", key, m.distance if m else 0, None)
        return found

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


class StoredSide(NamedTuple):
    """A store's entries that still match (its TTL), as the columns a join takes, and how to
    read the keys of some of them."""

    fp: np.ndarray
    wide: np.ndarray
    has_wide: np.ndarray
    keys: Callable[[np.ndarray], list[str]]


def read_stored(store: Store, now: float) -> StoredSide:
    """Every entry of ``store`` that still matches at ``now`` (its TTL), read once
    (:meth:`Store.columns`: a sqlite or memory store answers from its index's arrays)."""
    cols = store.columns()
    live = np.ones(len(cols.fp), dtype=bool)
    if store.ttl is not None:
        live = cols.stored_at >= now - store.ttl
    rows = np.flatnonzero(live)
    wide = np.ascontiguousarray(cols.wide[rows], dtype=np.uint64).reshape(-1, WIDE_WORDS)
    return StoredSide(
        np.ascontiguousarray(cols.fp[rows], dtype=np.uint64),
        wide,
        np.asarray(cols.has_wide[rows], dtype=bool),
        lambda some: cols.keys(rows[some]),
    )


def _match(
    record: int, key: str, status: Literal["unchanged", "duplicate"], name: dict[int, str],
    row: np.ndarray,
) -> AgainstMatch:  # fmt: skip
    wide = int(row[3])
    return AgainstMatch(
        int(record), key, status, name[int(row[1])], int(row[2]), wide if wide >= 0 else None
    )


def superseded(keys: list[str], records: np.ndarray) -> dict[int, AgainstMatch]:
    """Records whose key a later record has (a key is one page: the last one is checked and
    stored, so a re-run finds it unchanged instead of replacing it with an earlier one)."""
    if len(set(keys)) == len(keys):  # (every key once: the usual export)
        return {}
    last = {k: j for j, k in enumerate(keys)}
    out = {}
    for j, k in enumerate(keys):
        if last[k] != j:
            r = int(records[j])
            out[r] = AgainstMatch(r, k, "superseded", k, 0, None)
    return out


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


def judge_records(
    against: Against,
    engine: Engine,
    rule: Rule,
    index: np.ndarray,
    queries: Side,
    keys: list[str],
) -> tuple[dict[int, AgainstMatch], np.ndarray]:
    """Pass 1's records (``index``: the record numbers with fingerprints; ``queries`` their
    fingerprints masked by scope; ``keys`` every record's key) against the store, before the
    batch's own search: the records it drops (a key's earlier records, superseded; those near
    a stored page), and a mask over ``index`` of those left for the search."""
    query, query_wide, has_wide = queries
    keys_q = [keys[i] for i in index.tolist()]
    by_store = superseded(keys_q, index)
    live = ~np.isin(index, np.fromiter(by_store, dtype=np.int64, count=len(by_store)))
    keys_live = keys_q if live.all() else [keys_q[j] for j in np.flatnonzero(live).tolist()]
    judged = against.judge(
        engine,
        (query[live], query_wide[live], has_wide[live]),
        keys_live,
        index[live],
        rule,
    )
    by_store.update(judged)
    live &= ~np.isin(index, np.fromiter(judged, dtype=np.int64, count=len(judged)))
    return by_store, live


def add_kept_records(
    against: Against,
    label: np.ndarray,
    by_store: dict[int, AgainstMatch],
    keys: list[str],
    fp: np.ndarray,
    wide_fps: np.ndarray,
    ok: np.ndarray,
    *,
    regroup: bool = True,
) -> None:
    """``--add``: the records this run keeps, stored in input order through the store's
    check. One the store refuses (another writer stored a near page since the join) is
    dropped, and its group's records are checked in its place, in input order, as a crawl
    would meet them: each is kept only if the store takes it (``label`` and ``by_store``
    updated in place). ``regroup=False`` (the kept records already written where they stay):
    a refused keeper's records stay its copies, none checked. A record whose key the store
    cannot hold is kept, not added: counted in ``unstorable`` (the first few named, lone
    surrogates escaped)."""
    n = len(label)
    members: dict[int, list[int]] | None = None
    todo = np.flatnonzero((label == np.arange(n)) & ok).tolist()
    heapq.heapify(todo)  # (record numbers: a refused keeper's records join in their place)
    while todo:
        i = heapq.heappop(todo)
        if i in by_store:
            continue
        fps = Fingerprints(int(fp[i]), words_to_int(wide_fps[i]))
        try:
            refused = against.add_kept(i, keys[i], fps)
        except BadKey:  # (checked before anything is written: the store is untouched)
            result = against.result
            result.unstorable += 1
            if len(result.unstorable_named) < UNSTORABLE_NAMED:
                result.unstorable_named.append(escape_surrogates(keys[i][:80]))
            continue
        if refused is None:
            continue
        by_store[i] = refused
        if not regroup:
            continue
        if members is None:  # (once: every group's records)
            members = {}
            for j in np.flatnonzero(label != np.arange(n)).tolist():
                members.setdefault(int(label[j]), []).append(j)
        for j in members.get(i, []):
            label[j] = j  # (each is checked in its turn, kept only if the store takes it)
            heapq.heappush(todo, j)
