"""The store interface, its records, and the URI registry that picks a backend.

A store answers one question atomically: "is this page a near-duplicate of another page I hold?
If not, hold it." A key (the URL) is one page: a store holds at most one entry per key, and a
page is never a near-duplicate of its own key. Seeing a stored key again is a *revisit*:

* ``again``     the same crawl job stored it (a retry, a redirect back, a resumed job): the page
  is kept and nothing is written;
* ``claimed``   another crawl job stored it and its lease (:meth:`Store.lease`) holds: that crawl
  is running and exports the page, so this one drops it; nothing is written (docs/verdicts.md);
* ``unchanged`` its fingerprints match its stored ones under the rule: the entry's time and job
  are refreshed;
* ``changed``   otherwise: it is checked against the other keys like a new page and, if kept,
  replaces its old entry (the old fingerprint leaves the index).

Every backend keeps, for each entry, its key, fingerprints, time, job and optional text sample;
for each near-duplicate decision the key, the key it matched and both distances; and counters
(revisits, decisions recorded and trimmed), so reports can be built after the crawl.
"""

from __future__ import annotations

import math
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from types import TracebackType
from typing import Any, NamedTuple

from ..errors import NearDupError
from ..fingerprint.rule import Fingerprints, Rule
from .checks import (
    BadKey,
    check_fingerprints,
    check_key,
    check_source,
    check_time,
    clean_aliases,
    clean_decision,
    clean_entries,
    clean_text,
)
from .columns import Columns, columns_of
from .counts import COUNTERS, STATUSES, Source, Status, StoreInfo, Tally

__all__ = [
    "COUNTERS",
    "LEASE_SECONDS",
    "Alias",
    "BadKey",
    "Columns",
    "Decision",
    "Entry",
    "Match",
    "Source",
    "Store",
    "StoreError",
    "StoreInfo",
    "StoreUnavailable",
    "Tally",
    "Verdict",
    "check_key",
    "clean_text",
    "open_store",
    "register_store",
]

# How long a crawl job's lease lasts (Store.lease); the crawl renews it every quarter of that.
# A crawler killed without closing holds its pages for at most this long.
LEASE_SECONDS = 60.0
DEFAULT_MAX_DECISIONS = 100_000


class Match(NamedTuple):
    """A stored page near a query: its key, 64-bit fingerprint, 64-bit distance and wide
    distance (``None`` when either side has no wide fingerprint)."""

    key: str
    fingerprint: int
    distance: int
    wide_distance: int | None = None


class Entry(NamedTuple):
    """A stored page: key, 64-bit fingerprint, time stored (UNIX seconds), text sample (``None``
    unless the crawl keeps texts), wide fingerprint (``None`` for format-1 entries) and the id
    of the crawl job that stored it."""

    key: str
    fingerprint: int
    stored_at: float
    text: str | None = None
    wide: int | None = None
    job: str | None = None

    @property
    def fingerprints(self) -> Fingerprints:
        return Fingerprints(self.fingerprint, self.wide)


class Alias(NamedTuple):
    """A page dropped for the entry ``root`` (a page key), kept as a candidate for it
    (:attr:`Rule.aliases`): its key, fingerprints, time and job, no text."""

    key: str
    fingerprint: int
    stored_at: float
    root: str
    wide: int | None = None
    job: str | None = None

    @property
    def fingerprints(self) -> Fingerprints:
        return Fingerprints(self.fingerprint, self.wide)


class Decision(NamedTuple):
    """``key`` (fingerprint ``fingerprint``) was judged a near-duplicate of ``matched_key``."""

    key: str
    fingerprint: int
    matched_key: str
    matched_fingerprint: int
    distance: int
    decided_at: float
    text: str | None = None  # the dropped page's kept text sample
    wide_distance: int | None = None


class Verdict(NamedTuple):
    """What :meth:`Store.check` did with a page. ``match`` is the stored page it was judged a
    near-duplicate of (``duplicate``), or its own stored entry (``unchanged``)."""

    status: Status
    match: Match | None = None

    @property
    def kept(self) -> bool:
        return self.status in ("new", "changed", "again")


class StoreError(NearDupError):
    """A store cannot be opened or used; the message names the store and what is wrong."""


class StoreUnavailable(StoreError):
    """The store could not be reached or could not write (a server down, a disk full, a lock
    held too long): a passing condition that the failure policy (``NEARDUP_ON_STORE_ERROR``)
    decides about. Nothing acknowledged before it is lost."""


def check_ttl(ttl: float | None, where: str) -> float | None:
    if ttl is None:
        return None
    try:
        value = float(ttl)
    except (TypeError, ValueError):
        raise StoreError(f"{where}: ttl must be a number of seconds, not {ttl!r}") from None
    if not math.isfinite(value) or not 1.0 <= value <= 100 * 365 * 86400:
        raise StoreError(f"{where}: ttl must be between 1 second and 100 years, not {ttl!r}")
    return value


def check_max_decisions(n: int | None, where: str) -> int | None:
    if n is None:
        return None
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 10**9:
        raise StoreError(f"{where}: max_decisions must be an integer from 1 to 10**9, not {n!r}")
    return n


class Store(ABC):
    """What every backend offers. Use as a context manager, or call :meth:`close`.

    ``rule`` decides; ``ttl`` (seconds) makes older entries stop matching; ``max_decisions``
    bounds the decisions log (oldest trimmed first)."""

    uri: str
    rule: Rule
    ttl: float | None = None
    max_decisions: int | None = DEFAULT_MAX_DECISIONS
    read_only: bool = False
    format_version: int = 2

    # The public calls check and clean their arguments once, here, then call the backend's
    # protected ones: a backend never sees a key it cannot hold or a text it cannot store.
    def check(
        self,
        fps: Fingerprints | int,
        key: str,
        *,
        text: str | None = None,
        job: str | None = None,
        source: Source = "pages",
    ) -> Verdict:
        """Atomically decide and record what ``key`` with ``fps`` is (see the module doc);
        ``source`` says whose check it is, for the counters."""
        fps, key = check_fingerprints(fps), check_key(key)
        return self._check(fps, key, clean_text(text), clean_text(job), check_source(source))

    def near(self, fps: Fingerprints | int, *, exclude: str | None = None) -> list[Match]:
        """Stored pages that are near-duplicates of ``fps`` under the rule, nearest first
        (``exclude``: a key to leave out). Never writes."""
        fps = check_fingerprints(fps)
        return self._near(fps, None if exclude is None else check_key(exclude))

    def add(
        self,
        fps: Fingerprints | int,
        key: str,
        *,
        text: str | None = None,
        job: str | None = None,
        stored_at: float | None = None,
    ) -> None:
        """Store ``key`` without checking, replacing its entry if it has one."""
        fps, key = check_fingerprints(fps), check_key(key)
        t = None if stored_at is None else check_time(stored_at)
        self._add(fps, key, clean_text(text), clean_text(job), t)

    def get(self, key: str) -> Entry | None:
        """The entry stored under ``key`` (expired ones included), or ``None``."""
        return self._get(check_key(key))

    def remove(self, key: str) -> bool:
        """Forget ``key``: its fingerprints leave the index. ``False`` if it was not stored."""
        return self._remove(check_key(key))

    def import_records(self, entries: Iterable[Entry], decisions: Iterable[Decision]) -> int:
        """Store entries (with their own times and jobs, unchecked; a later entry for a key
        replaces an earlier one) and append decisions, e.g. when copying a store to another
        backend. Returns the number of entries imported. Each entry is checked as it is
        read: a bad one stops the import there, the entries before it stored."""
        return self._import_records(clean_entries(entries), map(clean_decision, decisions))

    def import_aliases(self, aliases: Iterable[Alias]) -> int:
        """Store aliases (``nearduppipe copy``), after the entries they stand for: an alias
        whose kept page is not a live entry here, or whose key holds an entry, is skipped (it
        would stand for nothing). Returns the number stored. A store that keeps no aliases
        refuses the first one with :class:`StoreError`."""
        return self._import_aliases(clean_aliases(aliases))

    def aliases(self) -> Iterator[Alias]:
        """Every alias that stands for a live entry (:meth:`import_aliases` takes them); a
        store without aliases has none."""
        return iter(())

    def _import_aliases(self, aliases: Iterable[Alias]) -> int:
        """:meth:`import_aliases`, each alias checked and cleaned as it is read."""
        for _ in aliases:
            raise StoreError(f"store {self.uri}: keeps no aliases (NEARDUP_ALIASES)")
        return 0

    @abstractmethod
    def _check(
        self, fps: Fingerprints, key: str, text: str | None, job: str | None, source: Source
    ) -> Verdict:
        """:meth:`check`, its arguments checked and cleaned."""

    @abstractmethod
    def _near(self, fps: Fingerprints, exclude: str | None) -> list[Match]:
        """:meth:`near`, its arguments checked."""

    @abstractmethod
    def _add(
        self,
        fps: Fingerprints,
        key: str,
        text: str | None,
        job: str | None,
        stored_at: float | None,
    ) -> None:
        """:meth:`add`, its arguments checked and cleaned."""

    @abstractmethod
    def _get(self, key: str) -> Entry | None:
        """:meth:`get`, its key checked."""

    @abstractmethod
    def _remove(self, key: str) -> bool:
        """:meth:`remove`, its key checked."""

    @abstractmethod
    def _import_records(self, entries: Iterable[Entry], decisions: Iterable[Decision]) -> int:
        """:meth:`import_records`: each entry and decision is checked and cleaned as the
        iterables are read."""

    @abstractmethod
    def __len__(self) -> int:
        """Number of stored entries (one per key)."""

    @abstractmethod
    def entries(self) -> Iterator[Entry]:
        """Every stored entry, in the order stored (a replaced entry counts as stored anew; a
        refreshed unchanged one keeps its place)."""

    @abstractmethod
    def decisions(self) -> Iterator[Decision]:
        """Every recorded (not yet trimmed) near-duplicate decision, oldest first."""

    @abstractmethod
    def decision_count(self) -> int:
        """Number of recorded decisions still held."""

    @property
    def alias_count(self) -> int:
        """Aliases the store holds (:attr:`Rule.aliases`): pages dropped, kept as candidates
        for their kept page; none in a store without them."""
        return 0

    @abstractmethod
    def counters(self) -> dict[str, int]:
        """Every name in :data:`COUNTERS`: ``new_total`` (entries stored as new, by checks
        and imports), ``revisits_unchanged``, ``revisits_changed``, ``decisions_total`` (ever
        recorded), ``decisions_trimmed``, ``again`` (checks of a key by the job that stored it),
        ``claimed`` (checks of a key another running job holds) and ``items_<status>`` (the
        item pipeline's verdicts)."""

    def now(self) -> float:
        """The time by the store's clock, the one its TTL is judged by (a Redis store without
        a ``clock``: the server's ``TIME``)."""
        return time.time()

    def columns(self) -> Columns:
        """Every stored entry (expired ones included) as columns, read once: a batch's join
        against the store (``dedup --against``). The default reads :meth:`entries`; a backend
        that holds its index in arrays answers from them."""
        return columns_of(self.entries())

    def lease(self, job: str, seconds: float) -> None:
        """Say that crawl job ``job`` runs for ``seconds`` more (``0``: it has ended). While
        the lease holds, another job's check of a key ``job`` stored is ``claimed`` and leaves
        the entry as it is: crawlers sharing a store export each page once between them. A
        crawl renews its lease well before it runs out (:data:`LEASE_SECONDS`)."""
        if not isinstance(job, str) or not job:
            raise ValueError(f"a crawl job is a non-empty string, not {job!r}")
        value = float(seconds)
        if not math.isfinite(value) or not 0 <= value <= 86400:
            raise ValueError(f"a lease lasts from 0 to 86400 seconds, not {seconds!r}")
        self._lease(clean_text(job), value)

    def _lease(self, job: str, seconds: float) -> None:  # noqa: B027 - optional
        """Record the lease (arguments checked). A backend with one writer at a time, or one
        that keeps no leases, never answers ``claimed``: the default does nothing."""

    def prune(self) -> int:
        """Remove entries older than the TTL; returns how many (backends whose entries expire
        by themselves return 0)."""
        return 0

    def flush(self) -> None:  # noqa: B027 - optional for backends that write through
        """Make everything so far durable (backends that batch writes override this)."""

    def tick(self) -> None:  # noqa: B027 - optional for backends that write through
        """Start whatever commit is due, without waiting for it: what a long-running user (the
        crawl, every ``NEARDUP_COMMIT_INTERVAL``) calls between writes. Unlike :meth:`flush`
        it raises only when the store refuses writes, not while a commit is being retried."""

    @abstractmethod
    def close(self) -> None:
        """Flush and release the store; idempotent."""

    def check_and_add(
        self, fp: Fingerprints | int, key: str, text: str | None = None
    ) -> Match | None:
        """The near-duplicate ``key`` was dropped against, or ``None`` if it was kept (or is an
        unchanged revisit). Shorthand for :meth:`check` for callers that only need a match."""
        verdict = self.check(fp, key, text=text)
        return verdict.match if verdict.status == "duplicate" else None

    def info(self) -> StoreInfo:
        c = self.counters()
        return StoreInfo(
            self.uri,
            len(self),
            self.decision_count(),
            self.rule,
            self.format_version,
            c.get("revisits_unchanged", 0),
            c.get("revisits_changed", 0),
            c.get("decisions_total", 0),
            c.get("decisions_trimmed", 0),
            self.ttl,
            self.max_decisions,
            c.get("again", 0),
            c.get("new_total", 0),
            Tally(*(c.get(f"items_{status}", 0) for status in STATUSES)),
            c.get("claimed", 0),
            self.alias_count,
        )

    def __enter__(self) -> Store:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


StoreFactory = Callable[..., Store]


def register_store(scheme: str, factory: StoreFactory) -> None:
    """Make ``open_store("scheme:...")`` call ``factory(uri, **options)``: a backend that
    offers opening only (:func:`.backend.register_backend` registers one that offers more)."""
    from .backend import FactoryBackend, register_backend

    register_backend(scheme, FactoryBackend(scheme, factory))


def open_store(uri: str, *, rule: Rule | None = None, **options: Any) -> Store:
    """Open the store a URI names: ``memory:``, ``sqlite:///relative.sqlite``,
    ``sqlite:////absolute/path.sqlite`` or a bare file path, ``redis://...``.

    ``rule=None`` takes the rule the store was created with (a new store gets the default
    :class:`~nearduppipe.fingerprint.rule.Rule`). Common options: ``read_only=True`` (never writes),
    ``reset=True`` (empty it first), ``ttl`` (seconds), ``max_decisions``, ``clock`` (a
    ``time.time`` stand-in for tests and replays; a Redis store without one uses the Redis
    server's ``TIME``, so that every client of a store shares one clock). Others go to the
    backend (:func:`.backend.backend_for`)."""
    if not isinstance(uri, str) or not uri.strip():
        raise StoreError(f"a store URI is a non-empty string, not {uri!r}")
    if rule is not None and not isinstance(rule, Rule):
        raise StoreError(f"rule must be a nearduppipe.Rule, not {type(rule).__name__}")
    from .backend import backend_for

    return backend_for(uri).open(uri, rule=rule, **options)
