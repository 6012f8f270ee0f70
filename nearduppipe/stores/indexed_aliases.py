"""The in-process stores' aliases (:attr:`Rule.aliases`) beyond the search: storing one,
counting, listing (:meth:`~.base.Store.aliases`) and importing them (``nearduppipe copy``), on
the columns of :class:`~.indexed.IndexedStore`, which is built on this class (the steps on the
columns themselves, resolve and dead, are :mod:`.aliases`'). Apart as the Redis Cluster store's
reads across shards are (stores/redis/cluster_aliases.py): the check and the search call one
piece each; listing and importing are one concern.
"""

from __future__ import annotations

import threading
from abc import abstractmethod
from collections.abc import Callable, Iterable, Iterator

import numpy as np

from ..fingerprint.rule import Fingerprints
from ..index.search import BlockIndex
from .base import Alias, Store, StoreError

__all__ = ["IndexedAliases"]


class IndexedAliases(Store):
    """Aliases on an index's columns; the columns, the lock and the checks are
    :class:`~.indexed.IndexedStore`'s, the key map and rows its backends'."""

    clock: Callable[[], float]
    _lock: threading.RLock
    _index: BlockIndex
    _root1: np.ndarray  # 0 for an entry; for an alias, 1 + the id of its kept page
    _times: np.ndarray
    _alias_count: int

    # -- what subclasses provide -------------------------------------------------------------
    @abstractmethod
    def _find(self, key: str) -> tuple[int, str | None] | None:
        """Index id and job of ``key``'s entry, or ``None``."""

    @abstractmethod
    def _key_of(self, i: int) -> str: ...

    @abstractmethod
    def _extra_of(self, i: int) -> tuple[str | None, str | None]:
        """Text sample and job of id ``i``."""

    def _persist_alias(
        self, i: int, key: str, fps: Fingerprints, t: float, job: str | None, root: int,
        replaces: int | None,
    ) -> None:  # fmt: skip
        """Persist id ``i``: ``key``'s fingerprints, an alias of the entry at id ``root``."""
        raise StoreError(f"store {self.uri}: this backend does not keep aliases yet")

    # -- IndexedStore's ----------------------------------------------------------------------
    @abstractmethod
    def _check_open(self, write: bool = False) -> None: ...

    @abstractmethod
    def _index_add(self, fps: Fingerprints, t: float) -> int: ...

    @abstractmethod
    def _drop_id(self, i: int) -> None: ...

    @abstractmethod
    def _fingerprints_of(self, i: int) -> Fingerprints: ...

    @abstractmethod
    def _expired(self, i: int, now: float) -> bool: ...

    # -- aliases -----------------------------------------------------------------------------
    def _is_alias(self, i: int) -> bool:
        return bool(self._root1[i] > 0)

    @property
    def alias_count(self) -> int:
        """Aliases in the index (Rule.aliases): pages dropped, kept as candidates."""
        return self._alias_count

    def _store_alias(
        self,
        fps: Fingerprints,
        key: str,
        t: float,
        job: str | None,
        root: int,
        replaces: int | None,
    ) -> None:
        i = self._index_add(fps, t)
        self._root1[i] = root + 1
        self._alias_count += 1
        if replaces is not None:
            self._drop_id(replaces)
        self._persist_alias(i, key, fps, t, job, root, replaces)

    def _import_aliases(self, aliases: Iterable[Alias]) -> int:
        n = 0
        with self._lock:
            self._check_open(write=True)
            if not self.rule.aliases:
                return super()._import_aliases(aliases)
            now = self.clock()
            for a in aliases:
                root, own = self._find(a.root), self._find(a.key)
                if root is None or self._is_alias(root[0]) or self._expired(root[0], now):
                    continue  # (it would stand for nothing)
                if own is not None and not self._is_alias(own[0]):
                    continue  # (the key's own entry: a page kept)
                replaces = None if own is None else own[0]
                self._store_alias(a.fingerprints, a.key, a.stored_at, a.job, root[0], replaces)
                n += 1
        return n

    def aliases(self) -> Iterator[Alias]:
        """The live aliases whose kept page is live and within the TTL, 1,024 per read; an
        alias or kept page changed meanwhile (another thread, or a crawl writing the file a
        read-only store reads) is left out."""
        with self._lock:
            self._check_open()
            if not self._alias_count:
                return
            ids = self._standing(np.flatnonzero(self._root1[: self._index.id_count] > 0))
        for start in range(0, len(ids), 1024):
            with self._lock:
                self._check_open()
                part = self._standing(ids[start : start + 1024]).tolist()
                rows = self._alias_rows(part, [int(self._root1[i]) - 1 for i in part])
                head = [(self._fingerprints_of(i), float(self._times[i])) for i in part]
            for row, (fps, t) in zip(rows, head, strict=True):
                if row is not None:
                    key, job, root = row
                    yield Alias(key, fps.fp, t, root, fps.wide, job)

    def _standing(self, ids: np.ndarray) -> np.ndarray:
        """Of alias ids, those live whose kept page is a live entry within the TTL."""
        alive = self._index.alive()
        ids = ids[alive[ids] & (self._root1[ids] > 0)]
        roots = self._root1[ids].astype(np.int64) - 1
        ok = alive[roots] & (self._root1[roots] == 0)
        if self.ttl is not None:
            ok &= self._times[roots] >= self.clock() - self.ttl
        return np.asarray(ids[ok])

    def _alias_rows(
        self, ids: list[int], roots: list[int]
    ) -> list[tuple[str, str | None, str] | None]:
        """(key, job, kept page's key) of aliases (``None``: a row gone from under a
        read-only store)."""
        return [
            (self._key_of(i), self._extra_of(i)[1], self._key_of(r))
            for i, r in zip(ids, roots, strict=True)
        ]
