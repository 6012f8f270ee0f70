"""Exact Hamming-ball search over 64-bit fingerprints with block-keyed tables.

Split the bits into ``b`` blocks. Two fingerprints within distance ``r`` differ, over all
blocks, in at most ``r`` bits, so (pigeonhole) some block differs in at most
``floor(r / b)`` bits. With one table per block, keyed by that block's bits, probing every key
within Hamming radius ``p = ceil((r + 1) / b) - 1`` of the query's block finds every stored
fingerprint within ``(p + 1) * b - 1 >= r`` bits (multi-index hashing, Norouzi et al. 2012).
``p = 0`` is the paper's scheme: ``b = r + 1`` blocks, exact lookups. Manku et al.'s larger
tables (one per choice of ``b - r`` of ``b`` blocks, keys of several blocks) are the other
option, for ``b > r``. Candidates are verified by popcount, so the result is exactly what a
full scan returns.

Probe radii may differ per table: with radius ``r_t`` for table ``t`` the search is exact when
``sum(r_t + 1) >= r + 1``. Unless ``blocks`` is given, each run picks the cheapest such table
set for its size (:meth:`Layout.table_sets`, :class:`nearduppipe.index.runs.Geometry`): at radius
8, 5 tables of 12-13 bits for runs up to ~190 k ids, 4 tables of 16 bits probed at radii
2, 1, 1, 1 (188 keys) up to ~3 M, and 3 blocks of 21-22 bits probed at radius 2 (~700 keys)
beyond, where a 16-bit bucket would hold hundreds of ids.

Layout in memory, for ``n`` fingerprints and ``T`` tables:

* ``fps``: every fingerprint, ``uint64``, in insertion order; its position is its id. ``alive``
  marks ids not removed (removal leaves a tombstone, dropped when its run is rebuilt).
* *runs* (a log-structured merge): each run files a contiguous range of ids in every table of
  its set: per table the ids and their fingerprints grouped by the top ``d`` bits of the key, and
  a directory of ``2**d + 1`` offsets, ``d`` growing with the run's size up to the key's width
  (about 1 id per group where the key is that long; the 12-13-bit keys of small runs' sets
  hold up to ~50). Runs are immutable; adjacent runs of similar size are merged into one (a binary
  counter), so each id is rebuilt ``O(log n)`` times and an add costs the same amortised time
  at 1 M and 30 M. Merges larger than :data:`SYNC_MERGE` ids are built a slice at a time, each
  add advancing them by :data:`~nearduppipe.index.merge.MERGE_STEP` ids or buckets
  (:mod:`.merge`), while the old runs keep answering; a later add swaps the result in. So no
  add waits for more than a small merge, and no other thread needs the GIL for the index.
* a tail of the newest ids not yet in a run, scanned directly (a few microseconds).

When the tail becomes a run and which runs merge: :mod:`.schedule`. The loops are compiled
(:mod:`nearduppipe.index.compiled`). Queries never modify the index.
"""

from __future__ import annotations

import bisect
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from .columns import Column, fork_generation
from .layout import Layout, table_key, table_keys
from .merge import MERGE_STEP, Merge
from .merge import warm as warm_merges
from .runs import Geometry, Run, bind, kernels
from .schedule import SYNC_MERGE, MergeSchedule

__all__ = ["SYNC_MERGE", "BlockIndex", "Layout", "kernels", "table_key", "table_keys"]

_U64 = np.uint64


class BlockIndex(MergeSchedule):
    """Exact search of all fingerprints within ``layout.distance`` of a query. Not thread-safe:
    callers that share one index across threads hold a lock around calls (the stores do)."""

    def __init__(
        self,
        layout: Layout | None = None,
        tail_capacity: int = 4096,
        sync_merge: int = SYNC_MERGE,
        merge_step: int = MERGE_STEP,
    ) -> None:
        self.layout = layout or Layout()
        if tail_capacity < 1 or sync_merge < 1 or merge_step < 1:
            raise ValueError("tail_capacity, sync_merge and merge_step must be positive")
        self.tail_capacity = tail_capacity
        self.sync_merge = sync_merge
        self.merge_step = merge_step
        self._geo = Geometry(self.layout)
        # growing these copies nothing (see index.columns): no pause at tens of millions of ids
        self._fps_column, self._alive_column = Column(_U64), Column(np.bool_)
        self._fps, self._alive = self._fps_column.array, self._alive_column.array
        self._n = 0
        self._live = 0
        self._runs: list[Run] = []
        self._tail = 0  # first id not yet in a run
        self._pending: list[Merge] = []  # merges being built, on disjoint runs
        self._owner = fork_generation()  # (a forked child copies the columns before writing)
        self._out_ids = np.empty(1024, dtype=np.int64)
        self._out_d = np.empty(1024, dtype=np.int64)
        self._mask = (1 << self.layout.bits) - 1
        self._query: Any = None  # the search's compiled loops, bound at the first search
        self._scan: Any = None
        kernels().warm()
        warm_merges()

    @property
    def distance(self) -> int:
        return self.layout.distance

    def __len__(self) -> int:
        """Number of live (not removed) fingerprints."""
        return self._live

    @property
    def id_count(self) -> int:
        """Ids handed out so far (live or removed): the next id."""
        return self._n

    @property
    def runs(self) -> int:
        """Runs searched per query (besides the tail): about ``log2`` of the size."""
        return len(self._runs)

    @property
    def nbytes(self) -> int:
        """Bytes held by the index arrays (fingerprints, flags, ids, directories)."""
        own = self._fps[: self._n].nbytes + self._alive[: self._n].nbytes
        return int(own) + sum(r.nbytes for r in self._runs)

    def fingerprint(self, i: int) -> int:
        if not 0 <= i < self._n:
            raise IndexError(i)
        return int(self._fps[i])

    def is_alive(self, i: int) -> bool:
        return 0 <= i < self._n and bool(self._alive[i])

    def fingerprints(self) -> np.ndarray:
        """A read-only view of all fingerprints in id order (removed ones included)."""
        view = self._fps[: self._n]
        view.flags.writeable = False
        return view

    def alive(self) -> np.ndarray:
        """A read-only view of the live flags in id order."""
        view = self._alive[: self._n]
        view.flags.writeable = False
        return view

    def _check(self, fp: int) -> int:
        if type(fp) is int and 0 <= fp <= self._mask:  # (the common case, first)
            return fp
        if not isinstance(fp, (int, np.integer)) or not 0 <= fp <= self._mask:
            raise ValueError(f"fingerprint must be an integer in [0, 2**{self.layout.bits})")
        return int(fp)

    # -- writes ------------------------------------------------------------------------------
    def add(self, fp: int) -> int:
        """Store ``fp``; returns its id (ids count from 0 in insertion order)."""
        fp = self._check(fp)
        if self._owner != fork_generation():
            self._own()
        if self._n == len(self._fps):
            self._grow(self._n + 1)
        self._fps[self._n] = fp
        self._alive[self._n] = True
        self._n += 1
        self._live += 1
        if self._n - self._tail >= self.tail_capacity:
            self._seal()
        for merge in self._pending:  # (a slice each: see .merge)
            if not merge.done:
                merge.advance(self.merge_step)
        return self._n - 1

    def add_many(self, fps: np.ndarray | list[int], alive: np.ndarray | None = None) -> None:
        """Store many fingerprints at once (one run, not one per ``tail_capacity``). ``alive``
        (same length, bool) marks which of them are live: the others take ids as tombstones."""
        arr = np.asarray(fps, dtype=_U64)
        if len(arr) == 0:
            return
        if self._owner != fork_generation():
            self._own()
        if self.layout.bits < 64 and bool(np.any(arr > _U64(self._mask))):
            raise ValueError(f"fingerprint must be an integer in [0, 2**{self.layout.bits})")
        flags = np.ones(len(arr), dtype=bool) if alive is None else np.asarray(alive, dtype=bool)
        if flags.shape != arr.shape:
            raise ValueError("alive must have one flag per fingerprint")
        self._grow(self._n + len(arr))
        self._fps[self._n : self._n + len(arr)] = arr
        self._alive[self._n : self._n + len(arr)] = flags
        self._n += len(arr)
        self._live += int(flags.sum())
        self._seal()

    def remove(self, i: int) -> None:
        """Remove id ``i`` from every table (its id is never reused)."""
        if not self.is_alive(i):
            raise KeyError(i)
        if self._owner != fork_generation():
            self._own()
        self._alive[i] = False
        self._live -= 1
        if i >= self._tail:
            return
        run = self._runs[bisect.bisect_right([r.lo for r in self._runs], i) - 1]
        run.dead += 1
        # Tombstones cost a filter per candidate: rebuild a run once half of it is dead.
        if run.dead > max(1024, run.size // 2) and not self._busy(run):
            self._rebuild([run])

    def _own(self) -> None:
        """In a forked child, before its first write: copy the columns, whose memory files the
        parent maps too (a write would reach the parent). Until then the child reads that
        shared memory, removals its parent makes meanwhile included (recounted here). Merges
        still pending are finished first, on this thread (from the memory they were given: a
        run built after the copy could miss an id the copy holds live). A one-time cost, O(n):
        seconds at tens of millions of ids."""
        for merge in self._pending:
            merge.take()
        self._collect()
        self._fps_column = self._fps_column.owned(self._n)
        self._alive_column = self._alive_column.owned(self._n)
        self._fps, self._alive = self._fps_column.array, self._alive_column.array
        self._owner = fork_generation()
        alive = self._alive
        self._live = int(alive[: self._n].sum())
        for run in self._runs:
            run.recount(alive)

    def _grow(self, need: int) -> None:
        # a merge being built keeps reading the arrays it was given: growth maps the same
        # pages anew, and ids below its range's end only ever change by removals, which
        # queries filter anyway
        self._fps = self._fps_column.reserve(need)
        self._alive = self._alive_column.reserve(need)

    # -- reads -------------------------------------------------------------------------------
    def search(self, fp: int, radius: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(ids, distances)`` of every live fingerprint within the distance (or a smaller
        ``radius``), unordered: what the stores verify further."""
        count = self.search_into(fp, radius)
        return self._out_ids[:count].copy(), self._out_d[:count].copy()

    def search_into(self, fp: int, radius: int | None = None) -> int:
        """:meth:`search` without the copies: returns the number of hits, whose ids and
        distances are the first entries of :attr:`hit_ids` and :attr:`hit_distances` until
        the next search (what a store's check reads once, under its lock)."""
        q = _U64(self._check(fp))
        k = self.layout.distance if radius is None else min(radius, self.layout.distance)
        while True:
            out_ids, out_d = self._out_ids, self._out_d
            count = 0
            alive = self._alive
            for run in self._runs:
                query = self._query or self._bind_query(run, q, k)
                count = query(*run.args, q, k, alive, out_ids, out_d, count)
            scan = self._scan or self._bind_scan(q, k)
            count = scan(self._fps, alive, self._tail, self._n, q, k, out_ids, out_d, count)
            if count <= len(out_ids):
                return int(count)
            # more hits than the buffers hold: grow them (scratch space, not index state)
            self._out_ids = np.empty(2 * count, dtype=np.int64)
            self._out_d = np.empty(2 * count, dtype=np.int64)

    # (every run's arrays come from the same kernel and every query passes the same types:
    # one binding per index, see index.runs.bind)
    def _bind_query(self, run: Run, q: np.uint64, k: int) -> Any:
        args = (*run.args, q, k, self._alive, self._out_ids, self._out_d, 0)
        self._query = bind(kernels().query_run, *args)
        return self._query

    def _bind_scan(self, q: np.uint64, k: int) -> Any:
        args = (self._fps, self._alive, 0, 0, q, k, self._out_ids, self._out_d, 0)
        self._scan = bind(kernels().scan_range, *args)
        return self._scan

    @property
    def hit_ids(self) -> np.ndarray:
        return self._out_ids

    @property
    def hit_distances(self) -> np.ndarray:
        return self._out_d

    def pairs(self, workers: int = 1) -> np.ndarray:
        """Every pair ``(i, j, d)`` of live ids, ``i < j``, within the distance, sorted: the
        self-join batch dedup needs, compiled when the index is one run (a bulk load; the
        grouped join of :meth:`cross`, in ``workers`` threads)."""
        self.wait()
        if len(self._runs) == 1 and self._tail == self._n:
            out = self._join(self._fps[: self._n], workers, upper=True)
        else:
            found = [
                (i, j, d)
                for i in np.flatnonzero(self._alive[: self._n]).tolist()
                for j, d in self.query(int(self._fps[i]))
                if j > i
            ]
            out = np.array(found, dtype=np.int64).reshape(-1, 3)
        order = np.lexsort((out[:, 1], out[:, 0]))
        result: np.ndarray = out[order]
        return result

    def cross(self, queries: np.ndarray, workers: int = 1) -> np.ndarray:
        """Every pair ``(q, i, d)`` of a query (``queries[q]``) and a live id within the
        distance, sorted: the join of an export against a stored set, compiled when the index
        is one run (a bulk load), no pair of two stored ids looked at; in ``workers`` threads,
        each taking every ``workers``-th bucket (the kernel releases the GIL)."""
        self.wait()
        qs = np.ascontiguousarray(queries, dtype=np.uint64)
        if len(self._runs) == 1 and self._tail == self._n:
            out = self._join(qs, workers, upper=False)
        else:
            found = [(q, i, d) for q, fp in enumerate(qs.tolist()) for i, d in self.query(fp)]
            out = np.array(found, dtype=np.int64).reshape(-1, 3)
        order = np.lexsort((out[:, 1], out[:, 0]))
        result: np.ndarray = out[order]
        return result

    def _join(
        self, qs: np.ndarray, workers: int, upper: bool, share: tuple[int, int] = (0, 1)
    ) -> np.ndarray:
        """:func:`~nearduppipe.index.joins.cross_join` of the one run, its buckets shared out
        among ``workers`` threads (unsorted ``(q, i, d)`` rows); ``share = (k, m)``: only the
        buckets of the ``k``-th of ``m`` shares (:meth:`join_share`)."""
        run = self._runs[0].args
        groups = kernels().cross_groups(run[0], *run[3:6], qs)
        args = (*run, qs, self.distance, self._alive, groups)
        k, m = share
        threads = max(1, min(workers, len(qs) // 1024 + 1))
        parts = m * threads  # (thread t of share k: the buckets b % parts == k + m * t)

        def join(t: int) -> np.ndarray:
            q, i, d = kernels().cross_join(*args, k + m * t, parts, upper)
            return np.stack([q, i, d], axis=1)

        if threads == 1:
            return join(0)
        with ThreadPoolExecutor(threads, thread_name_prefix="neardup-join") as pool:
            return np.concatenate(list(pool.map(join, range(threads))))

    def join_share(
        self, queries: np.ndarray, share: int, shares: int, upper: bool = False
    ) -> np.ndarray:
        """The ``share``-th of ``shares`` parts of :meth:`cross` (``upper``: of :meth:`pairs`,
        the queries being the index's own ids), unsorted: a cluster engine's task, which holds
        the whole index and takes every query but only its share of the buckets, so that each
        bucket is read by one task for all the queries that probe it. The shares together are
        the whole join, each pair in one of them."""
        self.wait()
        qs = np.ascontiguousarray(queries, dtype=np.uint64)
        if len(self._runs) == 1 and self._tail == self._n:
            return self._join(qs, 1, upper, (share, shares))
        if share:  # (not one run: the first share answers for all, query by query)
            return np.zeros((0, 3), dtype=np.int64)
        return self.pairs() if upper else self.cross(qs)

    def query(self, fp: int, radius: int | None = None) -> list[tuple[int, int]]:
        """``(id, distance)`` of every live fingerprint within the distance (or a smaller
        ``radius``), nearest first (ties: oldest first)."""
        ids, d = self.search(fp, radius)
        if not len(ids):
            return []
        order = np.lexsort((ids, d))
        return list(zip(ids[order].tolist(), d[order].tolist(), strict=True))

    def nearest(self, fp: int) -> tuple[int, int] | None:
        """The nearest stored fingerprint within the distance as ``(id, distance)``, or None."""
        hits = self.query(fp)
        return hits[0] if hits else None
