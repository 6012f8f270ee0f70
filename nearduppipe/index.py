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

The default is 3 blocks of 21-22 bits: key width near ``log2`` of the store's size between
1 M and 100 M entries, where each probed bucket holds a few entries. Radius 8 then probes
232 keys per table.

Layout in memory, for ``n`` fingerprints and ``T`` tables:

* ``fps``: every fingerprint, ``uint64``, in insertion order; its position is its id. ``alive``
  marks ids not removed (removal leaves a tombstone; rebuilds drop it from the tables).
* per table: ``ids`` (``uint32``), the live ids grouped by the top ``d`` bits of the table key,
  and a directory ``offsets`` (``2**d + 1`` entries) giving each group's slice. ``d`` grows with
  ``n`` (about 8 ids per group) up to the key's width.
* a tail of recent ids not yet in the tables, scanned directly until it reaches the tail
  capacity and is merged in one vectorised step.

Queries never modify the index.
"""

from __future__ import annotations

import functools
import math
from itertools import combinations

import numpy as np

from .layout import Layout, Parts, table_key, table_keys

__all__ = ["BlockIndex", "Layout", "table_key", "table_keys"]

_U64 = np.uint64


@functools.cache
def _probe_masks(width: int, radius: int) -> np.ndarray:
    """Every ``width``-bit mask of at most ``radius`` set bits (the probe offsets)."""
    masks = [0]
    for r in range(1, min(radius, width) + 1):
        for combo in combinations(range(width), r):
            m = 0
            for bit in combo:
                m |= 1 << bit
            masks.append(m)
    out = np.array(masks, dtype=np.int64)
    out.flags.writeable = False
    return out


class _Tables:
    """Every table's ids grouped by the top ``dir_bits`` bits of its key, as one 2-D array.

    Every table indexes the same live ids, so ``ids`` is ``(T, m)`` and ``offsets`` is
    ``(T, 2**dir_bits + 1)``; a query probes all tables in one vectorised pass (a handful of
    numpy calls instead of a handful per table)."""

    def __init__(self, tables: list[Parts], probe: int) -> None:
        self.parts = tables
        self.probe = probe
        self.key_bits = [sum(w for _, w in parts) for parts in tables]
        self.dir_bits = 0
        self.ids = np.zeros((len(tables), 0), dtype=np.uint32)
        self.fps = np.zeros((len(tables), 0), dtype=_U64)
        self.offsets = np.zeros((len(tables), 2), dtype=np.int64)
        self._flat_offsets = self.offsets.ravel()
        self._row = 2
        self.masks = _probe_masks(0, probe)

    def _buckets(self, fps: np.ndarray) -> np.ndarray:
        """(T, len(fps)) bucket of every fingerprint in every table."""
        out = np.empty((len(self.parts), len(fps)), dtype=np.int64)
        for t, parts in enumerate(self.parts):
            drop = self.key_bits[t] - self.dir_bits
            out[t] = (table_keys(fps, parts) >> _U64(drop)).astype(np.int64)
        return out

    def _bucket(self, fp: int) -> np.ndarray:
        return np.array(
            [
                table_key(fp, p) >> (kb - self.dir_bits)
                for p, kb in zip(self.parts, self.key_bits, strict=True)
            ],
            dtype=np.int64,
        )

    def _refresh(self) -> None:
        m = self.ids.shape[1]
        base = (np.arange(len(self.parts), dtype=np.int64) * m)[:, None]
        self._flat_offsets = (self.offsets + base).ravel()
        self._row = self.offsets.shape[1]

    def rebuild(self, fps: np.ndarray, live: np.ndarray, dir_bits: int) -> None:
        """Index the ids ``live`` (ascending) whose fingerprints are ``fps[live]``."""
        self.dir_bits = min(dir_bits, *self.key_bits)
        self.masks = _probe_masks(self.dir_bits, self.probe)
        bk = self._buckets(fps[live])
        order = np.argsort(bk, axis=1, kind="stable")
        self.ids = live[order].astype(np.uint32)
        self.fps = fps[self.ids]
        self.offsets = np.zeros((len(self.parts), (1 << self.dir_bits) + 1), dtype=np.int64)
        for t in range(len(self.parts)):
            np.cumsum(np.bincount(bk[t], minlength=1 << self.dir_bits), out=self.offsets[t, 1:])
        self._refresh()

    def merge(self, fps: np.ndarray, new_ids: np.ndarray) -> None:
        """Add ids ``new_ids`` (ascending) whose fingerprints are ``fps``."""
        bk = self._buckets(fps)
        rows, fp_rows = [], []
        for t in range(len(self.parts)):
            order = np.argsort(bk[t], kind="stable")
            # Insert each id at the end of its group; groups stay contiguous and in id order.
            positions = self.offsets[t, bk[t][order] + 1]
            rows.append(np.insert(self.ids[t], positions, new_ids[order].astype(np.uint32)))
            fp_rows.append(np.insert(self.fps[t], positions, fps[order]))
            counts = np.bincount(bk[t], minlength=1 << self.dir_bits)
            self.offsets[t, 1:] += np.cumsum(counts)
        self.ids = np.stack(rows)
        self.fps = np.stack(fp_rows)
        self._refresh()

    def candidates(self, fp: int, radius: int) -> tuple[np.ndarray, np.ndarray]:
        """``(ids, distances)`` within ``radius`` in every probed group of every table (an id
        may appear more than once). Fingerprints are kept in table order too, so verifying
        reads a few contiguous runs instead of one random read per candidate."""
        probes = (self._bucket(fp)[:, None] ^ self.masks[None, :]) + (
            np.arange(len(self.parts), dtype=np.int64)[:, None] * self._row
        )
        probes = probes.ravel()
        lo = self._flat_offsets[probes]
        counts = self._flat_offsets[probes + 1] - lo
        total = int(counts.sum())
        flat_ids, flat_fps = self.ids.ravel(), self.fps.ravel()
        if total == 0:
            return flat_ids[:0], flat_ids[:0]
        # positions lo[i] .. lo[i] + counts[i] of every probed group, in one gather
        pos = np.repeat(lo - (np.cumsum(counts) - counts), counts) + np.arange(total)
        d = np.bitwise_count(flat_fps[pos] ^ _U64(fp))
        sel = np.flatnonzero(d <= radius)
        return flat_ids[pos[sel]], d[sel]

    @property
    def nbytes(self) -> int:
        return int(self.ids.nbytes + self.fps.nbytes + self.offsets.nbytes)


def _dir_bits_for(n: int) -> int:
    # About 2 ids per group (measured: fewer, larger groups cost more in verification than the
    # directory saves); at least 8 bits, at most 24 (a 128 MiB directory per table).
    return max(8, min(24, math.ceil(math.log2(max(n, 1) / 2 + 1))))


class BlockIndex:
    """Exact search of all fingerprints within ``layout.distance`` of a query. Not thread-safe:
    callers that share one index across threads hold a lock around calls (the stores do)."""

    def __init__(self, layout: Layout | None = None, tail_capacity: int = 2048) -> None:
        self.layout = layout or Layout()
        if tail_capacity < 1:
            raise ValueError("tail_capacity must be positive")
        self.tail_capacity = tail_capacity
        self._tables = _Tables(self.layout.tables(), self.layout.probe)
        self._fps = np.zeros(1024, dtype=_U64)
        self._alive = np.zeros(1024, dtype=bool)
        self._n = 0
        self._live = 0
        self._merged = 0
        self._dead_in_tables = 0
        self._dir_bits = 0
        self._mask = (1 << self.layout.bits) - 1
        self._rebuild()

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
    def nbytes(self) -> int:
        """Bytes held by the index arrays (fingerprints, flags, ids, directories)."""
        own = self._fps[: self._n].nbytes + self._alive[: self._n].nbytes
        return int(own) + self._tables.nbytes

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
        if not isinstance(fp, (int, np.integer)) or not 0 <= fp <= self._mask:
            raise ValueError(f"fingerprint must be an integer in [0, 2**{self.layout.bits})")
        return int(fp)

    def add(self, fp: int) -> int:
        """Store ``fp``; returns its id (ids count from 0 in insertion order)."""
        fp = self._check(fp)
        if self._n == len(self._fps):
            self._grow(self._n + 1)
        self._fps[self._n] = fp
        self._alive[self._n] = True
        self._n += 1
        self._live += 1
        if self._n - self._merged >= self._tail_limit():
            self._merge()
        return self._n - 1

    def add_many(self, fps: np.ndarray | list[int], alive: np.ndarray | None = None) -> None:
        """Store many fingerprints at once (one rebuild, not one merge per item). ``alive``
        (same length, bool) marks which of them are live: the others take ids as tombstones."""
        arr = np.asarray(fps, dtype=_U64)
        if len(arr) == 0:
            return
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
        self._rebuild()

    def remove(self, i: int) -> None:
        """Remove id ``i`` from every table (its id is never reused)."""
        if not self.is_alive(i):
            raise KeyError(i)
        self._alive[i] = False
        self._live -= 1
        if i < self._merged:
            self._dead_in_tables += 1
            # Tombstones cost a filter per candidate; rebuild once they are a quarter of it.
            if self._dead_in_tables > max(1024, self._merged // 4):
                self._rebuild()

    def _tail_limit(self) -> int:
        # Each merge copies the tables (O(n)); a tail that grows with n keeps the amortised
        # cost of an add flat, at the price of a longer direct scan per query.
        return max(self.tail_capacity, min(self._n // 1024, 16384))

    def _grow(self, need: int) -> None:
        if need <= len(self._fps):
            return
        cap = max(need, len(self._fps) + len(self._fps) // 2)
        fps = np.zeros(cap, dtype=_U64)
        fps[: self._n] = self._fps[: self._n]
        alive = np.zeros(cap, dtype=bool)
        alive[: self._n] = self._alive[: self._n]
        self._fps, self._alive = fps, alive

    def _rebuild(self) -> None:
        self._dir_bits = _dir_bits_for(self._live)
        fps = self._fps[: self._n]
        live = np.flatnonzero(self._alive[: self._n]).astype(np.int64)
        self._tables.rebuild(fps, live, self._dir_bits)
        self._merged = self._n
        self._dead_in_tables = 0

    def _merge(self) -> None:
        if _dir_bits_for(self._live) > self._dir_bits + 1:
            self._rebuild()
            return
        new_ids = self._merged + np.flatnonzero(self._alive[self._merged : self._n])
        new = self._fps[new_ids]
        self._tables.merge(new, new_ids)
        self._merged = self._n

    def query(self, fp: int, radius: int | None = None) -> list[tuple[int, int]]:
        """``(id, distance)`` of every live fingerprint within the distance (or a smaller
        ``radius``), nearest first (ties: oldest first)."""
        fp = self._check(fp)
        k = self.layout.distance if radius is None else min(radius, self.layout.distance)
        if self._live == 0:
            return []
        q = _U64(fp)
        hits: list[tuple[int, int]] = []
        if self._merged:
            cand, d = self._tables.candidates(fp, k)
            if len(cand):
                if self._dead_in_tables:
                    live = self._alive[cand]
                    cand, d = cand[live], d[live]
                hits.extend(zip(cand.tolist(), d.tolist(), strict=True))
        if self._merged < self._n:
            tail = self._fps[self._merged : self._n]
            d = np.bitwise_count(tail ^ q)
            sel = (d <= k) & self._alive[self._merged : self._n]
            for i in np.flatnonzero(sel).tolist():
                hits.append((self._merged + i, int(d[i])))
        if not hits:
            return []
        return sorted(set(hits), key=lambda h: (h[1], h[0]))

    def nearest(self, fp: int) -> tuple[int, int] | None:
        """The nearest stored fingerprint within the distance as ``(id, distance)``, or None."""
        hits = self.query(fp)
        return hits[0] if hits else None
