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
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from types import TracebackType
from typing import Any, NamedTuple, overload

from ..errors import NearDupError
from ..fingerprint.rule import Fingerprints, Rule
from .counts import COUNTERS, STATUSES, Source, Status, StoreInfo, Tally

__all__ = [
    "COUNTERS",
    "LEASE_SECONDS",
    "BadKey",
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

MAX_KEY_CHARS = 65_536
# How long a crawl job's lease lasts (Store.lease); the crawl renews it every quarter of that.
# A crawler killed without closing holds its pages for at most this long.
LEASE_SECONDS = 60.0
_SURROGATE = re.compile("[\ud800-\udfff]")
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


class BadKey(NearDupError, ValueError):
    """A key no store can hold (not text, empty, too long, or not encodable as UTF-8, e.g. a
    lone surrogate from a JSON feed). Only that page is affected; the store is untouched."""


def check_key(key: object) -> str:
    """The key, if a store can hold it; :class:`BadKey` otherwise."""
    if not isinstance(key, str):
        raise BadKey(f"store keys are strings, not {type(key).__name__}")
    if not key:
        raise BadKey("store keys are non-empty strings")
    if len(key) > MAX_KEY_CHARS:
        raise BadKey(f"store key of {len(key)} characters (at most {MAX_KEY_CHARS})")
    try:
        key.encode("utf-8")
    except UnicodeEncodeError as e:
        raise BadKey(f"store key is not valid Unicode text ({e.reason}): {key!r:.80}") from None
    return key


def check_time(t: object) -> float:
    """A stored time (seconds since the epoch) as a float; a time that is not a finite number
    is refused before anything is written (a sqlite record holding it could not be read)."""
    try:
        value = float(t)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError(f"stored_at must be a number of seconds, not {t!r}") from None
    if not math.isfinite(value):
        raise ValueError(f"stored_at must be a finite time, not {value}")
    return value


@overload
def clean_text(text: str) -> str: ...
@overload
def clean_text(text: None) -> None: ...
@overload
def clean_text(text: str | None) -> str | None: ...
def clean_text(text: str | None) -> str | None:
    """A text sample (or a crawl job's id) as every backend can store it: lone surrogates
    become U+FFFD (the sqlite store's UTF-8 rows cannot hold them)."""
    if text is None:
        return None
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)


def clean_decision(d: Decision) -> Decision:
    """A decision as every backend can store it (its keys and text through :func:`clean_text`:
    an imported decision may come from a store that kept lone surrogates)."""
    return d._replace(
        key=clean_text(d.key), matched_key=clean_text(d.matched_key), text=clean_text(d.text)
    )


_WIDE_END = 1 << 512  # (CPython folds no constant this large: computed once here)


def check_fingerprints(fps: Fingerprints | int) -> Fingerprints:
    if (
        type(fps) is Fingerprints
        and type(fps.fp) is int
        and 0 <= fps.fp < 1 << 64
        and (fps.wide is None or (type(fps.wide) is int and 0 <= fps.wide < _WIDE_END))
    ):
        return fps  # (every check of a crawl: first, and cheap)
    if isinstance(fps, int) and not isinstance(fps, bool):
        fps = Fingerprints(fps, None)
    if not isinstance(fps, Fingerprints):
        raise TypeError(f"expected Fingerprints or an int, not {type(fps).__name__}")
    if not isinstance(fps.fp, int) or not 0 <= fps.fp < 1 << 64:
        raise ValueError("fingerprint must be an integer in [0, 2**64)")
    if fps.wide is not None and (not isinstance(fps.wide, int) or not 0 <= fps.wide < 1 << 512):
        raise ValueError("wide fingerprint must be an integer in [0, 2**512)")
    return fps


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

    @abstractmethod
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

    @abstractmethod
    def near(self, fps: Fingerprints | int, *, exclude: str | None = None) -> list[Match]:
        """Stored pages that are near-duplicates of ``fps`` under the rule, nearest first
        (``exclude``: a key to leave out). Never writes."""

    @abstractmethod
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

    @abstractmethod
    def get(self, key: str) -> Entry | None:
        """The entry stored under ``key`` (expired ones included), or ``None``."""

    @abstractmethod
    def remove(self, key: str) -> bool:
        """Forget ``key``: its fingerprints leave the index. ``False`` if it was not stored."""

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

    @abstractmethod
    def counters(self) -> dict[str, int]:
        """Every name in :data:`COUNTERS`: ``new_total`` (entries stored as new, by checks
        and imports), ``revisits_unchanged``, ``revisits_changed``, ``decisions_total`` (ever
        recorded), ``decisions_trimmed``, ``again`` (checks of a key by the job that stored it),
        ``claimed`` (checks of a key another running job holds) and ``items_<status>`` (the
        item pipeline's verdicts)."""

    @abstractmethod
    def import_records(self, entries: Iterable[Entry], decisions: Iterable[Decision]) -> int:
        """Store entries (with their own times and jobs, unchecked; a later entry for a key
        replaces an earlier one) and append decisions, e.g. when copying a store to another
        backend. Returns the number of entries imported."""

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
