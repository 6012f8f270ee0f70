"""The store interface, its records, and the URI registry that picks a backend.

A store answers one question atomically: "is this fingerprint within ``distance`` of one I
already hold? If not, hold it." Every backend keeps, for each stored fingerprint, its key (the
URL) and when it was stored, and for each near-duplicate decision the key, the earlier key it
matched and the distance, so reports can be built after the crawl.
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from types import TracebackType
from typing import Any, NamedTuple

from ..index import BlockIndex, Layout

__all__ = [
    "Decision",
    "Entry",
    "IndexedStore",
    "Match",
    "Store",
    "StoreError",
    "StoreUnavailable",
    "open_store",
    "register_store",
]


class Match(NamedTuple):
    """A stored fingerprint near a query: its key, its value and its Hamming distance."""

    key: str
    fingerprint: int
    distance: int


class Entry(NamedTuple):
    """A stored fingerprint with its key, the time (UNIX seconds) it was stored, and the text
    sample kept with it (``None`` unless the crawl keeps texts)."""

    key: str
    fingerprint: int
    stored_at: float
    text: str | None = None


class Decision(NamedTuple):
    """``key`` (fingerprint ``fingerprint``) was judged a near-duplicate of ``matched_key``."""

    key: str
    fingerprint: int
    matched_key: str
    matched_fingerprint: int
    distance: int
    decided_at: float
    text: str | None = None  # the dropped page's kept text sample


class StoreError(Exception):
    """A store cannot be opened or used; the message names the store and what is wrong."""


class StoreUnavailable(StoreError):
    """A networked store could not be reached or did not answer in time: a passing condition
    that the failure policy (``NEARDUP_ON_STORE_ERROR``) decides about."""


@dataclass(frozen=True)
class StoreInfo:
    uri: str
    entries: int
    decisions: int
    distance: int


def check_key(key: object) -> str:
    if not isinstance(key, str):
        raise TypeError(f"store keys are strings, not {type(key).__name__}")
    return key


class Store(ABC):
    """What every backend offers. Use as a context manager, or call :meth:`close`."""

    uri: str
    distance: int

    @abstractmethod
    def near(self, fp: int) -> list[Match]:
        """Stored fingerprints within the distance, nearest first (ties: oldest first)."""

    @abstractmethod
    def check_and_add(self, fp: int, key: str, text: str | None = None) -> Match | None:
        """Atomically: the nearest earlier match (recorded as a decision), or ``None`` after
        storing ``fp`` under ``key``. ``text``: a sample kept with the entry or decision."""

    @abstractmethod
    def add(self, fp: int, key: str, text: str | None = None) -> None:
        """Store ``fp`` under ``key`` without checking."""

    @abstractmethod
    def __len__(self) -> int:
        """Number of stored fingerprints."""

    @abstractmethod
    def entries(self) -> Iterator[Entry]:
        """Every stored fingerprint, oldest first."""

    @abstractmethod
    def decisions(self) -> Iterator[Decision]:
        """Every near-duplicate decision, oldest first."""

    @abstractmethod
    def decision_count(self) -> int:
        """Number of recorded decisions."""

    @abstractmethod
    def import_records(self, entries: Iterable[Entry], decisions: Iterable[Decision]) -> int:
        """Append entries (with their own times, unchecked, in order) and decisions, e.g. when
        copying a store to another backend. Returns the number of entries imported."""

    def flush(self) -> None:  # noqa: B027 - optional for backends that write through
        """Make everything so far durable (backends that batch writes override this)."""

    @abstractmethod
    def close(self) -> None:
        """Flush and release the store; idempotent."""

    def info(self) -> StoreInfo:
        return StoreInfo(self.uri, len(self), self.decision_count(), self.distance)

    def __enter__(self) -> Store:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class IndexedStore(Store):
    """A store whose search runs on an in-process :class:`BlockIndex` rebuilt from the stored
    fingerprints at open. Subclasses persist entries and decisions and look keys up by id; a
    lock makes check-and-add atomic across threads."""

    def __init__(self, uri: str, distance: int = 3, blocks: int | None = None) -> None:
        self.uri = uri
        self.distance = distance
        self._index = BlockIndex(Layout(distance=distance, blocks=blocks))
        self._lock = threading.RLock()
        self._closed = False

    # -- what subclasses provide -------------------------------------------------------------
    @abstractmethod
    def _key_of(self, i: int) -> str: ...

    @abstractmethod
    def _save_entry(self, i: int, fp: int, key: str, now: float, text: str | None) -> None: ...

    @abstractmethod
    def _save_decision(self, decision: Decision) -> None: ...

    # -- the interface ----------------------------------------------------------------------
    read_only = False

    def _check_open(self, write: bool = False) -> None:
        if self._closed:
            raise StoreError(f"store {self.uri} is closed")
        if write and self.read_only:
            raise StoreError(f"store {self.uri} was opened read-only")

    def near(self, fp: int) -> list[Match]:
        with self._lock:
            self._check_open()
            hits = self._index.query(fp)
            return [Match(self._key_of(i), self._index.fingerprint(i), d) for i, d in hits]

    def check_and_add(self, fp: int, key: str, text: str | None = None) -> Match | None:
        check_key(key)
        with self._lock:
            self._check_open(write=True)
            hit = self._index.nearest(fp)
            now = time.time()
            if hit is None:
                i = self._index.add(fp)
                self._save_entry(i, fp, key, now, text)
                return None
            i, d = hit
            match = Match(self._key_of(i), self._index.fingerprint(i), d)
            self._save_decision(Decision(key, fp, match.key, match.fingerprint, d, now, text))
            return match

    def add(self, fp: int, key: str, text: str | None = None) -> None:
        check_key(key)
        with self._lock:
            self._check_open(write=True)
            i = self._index.add(fp)
            self._save_entry(i, fp, key, time.time(), text)

    def __len__(self) -> int:
        return len(self._index)

    def import_records(self, entries: Iterable[Entry], decisions: Iterable[Decision]) -> int:
        n = 0
        with self._lock:
            self._check_open(write=True)
            for entry in entries:
                i = self._index.add(entry.fingerprint)
                self._save_entry(
                    i, entry.fingerprint, check_key(entry.key), entry.stored_at, entry.text
                )
                n += 1
            for decision in decisions:
                self._save_decision(decision)
        return n

    @property
    def index_nbytes(self) -> int:
        return self._index.nbytes


StoreFactory = Callable[..., Store]
_REGISTRY: dict[str, StoreFactory] = {}


def register_store(scheme: str, factory: StoreFactory) -> None:
    """Make ``open_store("scheme:...")`` call ``factory(uri, distance=..., **options)``."""
    _REGISTRY[scheme] = factory


def _scheme(uri: str) -> str:
    head, sep, _ = uri.partition(":")
    # A bare path (no scheme, or a one-letter Windows drive) is a sqlite file.
    if not sep or len(head) <= 1 or "/" in head or "\\" in head:
        return "sqlite"
    return head.lower()


def open_store(uri: str, distance: int = 3, **options: Any) -> Store:
    """Open the store a URI names: ``memory:``, ``sqlite:///relative.sqlite``,
    ``sqlite:////absolute/path.sqlite`` or a bare file path; ``redis://...`` once installed.
    ``options`` go to the backend (e.g. ``reset=True``, ``blocks=6``)."""
    if not isinstance(uri, str) or not uri.strip():
        raise StoreError(f"a store URI is a non-empty string, not {uri!r}")
    from . import _load_builtin_backends

    _load_builtin_backends()
    scheme = _scheme(uri)
    factory = _REGISTRY.get(scheme)
    if factory is None:
        known = ", ".join(sorted(f"{s}:" for s in _REGISTRY))
        raise StoreError(f"unknown store scheme {scheme!r} in {uri!r}; known: {known}")
    return factory(uri, distance=distance, **options)
