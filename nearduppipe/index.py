"""Exact Hamming-ball search over 64-bit fingerprints with block-keyed tables.

Split the bits into ``b`` blocks. Two fingerprints within distance ``k`` differ in at most ``k``
blocks, so they agree on at least ``b - k`` whole blocks (pigeonhole). One table per choice of
``b - k`` blocks, keyed by those blocks' bits, therefore finds every match: a match shares the
key of at least one table. ``b = k + 1`` gives ``k + 1`` tables keyed by one block each (the
default); Manku et al.'s larger ``b`` (e.g. 6 blocks, C(6, 3) = 20 tables for k = 3) trades
memory for longer keys and fewer candidates per table. Candidates are verified by popcount, so
the result is exactly what a full scan returns.

Layout in memory, for ``n`` fingerprints and ``T`` tables:

* ``fps``: every fingerprint, ``uint64``, in insertion order; its position is its id.
* per table: ``ids`` (``uint32``), the ids grouped by the table key's top ``d`` bits, and a
  directory ``offsets`` (``2**d + 1`` entries) giving each group's slice. ``d`` grows with ``n``
  (about 8 fingerprints per group) up to the key's width.
* a tail of recent ids not yet in the tables, scanned directly until it reaches
  ``tail_capacity`` and is merged in one vectorised step.

That is ``8 + 4T`` bytes per fingerprint plus the directories: 24 bytes for the default layout.
Queries never modify the index.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations

import numpy as np

__all__ = ["BlockIndex", "Layout", "table_key", "table_keys"]

_U64 = np.uint64
Parts = tuple[tuple[int, int], ...]


def table_key(fp: int, parts: Parts) -> int:
    """A table's key of one fingerprint: its blocks ``(shift, width)`` concatenated."""
    key = 0
    for shift, width in parts:
        key = (key << width) | ((fp >> shift) & ((1 << width) - 1))
    return key


def table_keys(fps: np.ndarray, parts: Parts) -> np.ndarray:
    """:func:`table_key` of every fingerprint of a ``uint64`` array."""
    key = np.zeros(len(fps), dtype=_U64)
    for shift, width in parts:
        key = (key << _U64(width)) | ((fps >> _U64(shift)) & _U64((1 << width) - 1))
    return key


@dataclass(frozen=True)
class Layout:
    """Which tables the index keeps: ``blocks`` blocks of ``bits`` bits, one table per choice of
    ``blocks - distance`` of them. ``blocks=None`` means ``distance + 1`` (pigeonhole)."""

    distance: int = 3
    blocks: int | None = None
    bits: int = 64

    def __post_init__(self) -> None:
        if not 1 <= self.bits <= 64:
            raise ValueError(f"bits must be between 1 and 64, not {self.bits}")
        if not 0 <= self.distance < self.bits:
            raise ValueError(f"distance must be between 0 and {self.bits - 1}, not {self.distance}")
        b = self.n_blocks
        if not self.distance + 1 <= b <= self.bits:
            raise ValueError(
                f"blocks must be between distance + 1 = {self.distance + 1} and bits = "
                f"{self.bits}, not {b}"
            )
        if math.comb(b, b - self.distance) > 1000:
            raise ValueError(f"{b} blocks at distance {self.distance} would need too many tables")

    @property
    def n_blocks(self) -> int:
        return self.distance + 1 if self.blocks is None else self.blocks

    def block_ranges(self) -> list[tuple[int, int]]:
        """(shift, width) of each block, most significant first; widths differ by at most 1."""
        b = self.n_blocks
        base, extra = divmod(self.bits, b)
        widths = [base + (1 if i < extra else 0) for i in range(b)]
        ranges = []
        top = self.bits
        for w in widths:
            top -= w
            ranges.append((top, w))
        return ranges

    def tables(self) -> list[tuple[tuple[int, int], ...]]:
        """Each table's key as the (shift, width) of its blocks, most significant first."""
        ranges = self.block_ranges()
        keep = self.n_blocks - self.distance
        return [tuple(ranges[i] for i in combo) for combo in combinations(range(len(ranges)), keep)]


class _Table:
    """One key function and the ids grouped by the top ``dir_bits`` bits of that key."""

    __slots__ = ("dir_bits", "drop", "ids", "key_bits", "offsets", "parts")

    def __init__(self, parts: Parts) -> None:
        self.parts = parts
        self.key_bits = sum(w for _, w in parts)
        self.dir_bits = 0
        self.drop = self.key_bits
        self.ids = np.zeros(0, dtype=np.uint32)
        self.offsets = np.zeros(2, dtype=np.int64)

    def bucket(self, fp: int) -> int:
        return table_key(fp, self.parts) >> self.drop

    def buckets(self, fps: np.ndarray) -> np.ndarray:
        out: np.ndarray = (table_keys(fps, self.parts) >> _U64(self.drop)).astype(np.int64)
        return out

    def rebuild(self, fps: np.ndarray, dir_bits: int) -> None:
        self.dir_bits = min(dir_bits, self.key_bits)
        self.drop = self.key_bits - self.dir_bits
        bk = self.buckets(fps)
        self.ids = np.argsort(bk, kind="stable").astype(np.uint32)
        counts = np.bincount(bk, minlength=1 << self.dir_bits)
        self.offsets = np.zeros((1 << self.dir_bits) + 1, dtype=np.int64)
        np.cumsum(counts, out=self.offsets[1:])

    def merge(self, fps: np.ndarray, first_id: int) -> None:
        """Add ids ``first_id ..`` whose fingerprints are ``fps`` (in id order)."""
        bk = self.buckets(fps)
        order = np.argsort(bk, kind="stable")
        new_ids = (order + first_id).astype(np.uint32)
        # Insert each id at the end of its group; groups stay contiguous and in id order.
        positions = self.offsets[bk[order] + 1]
        self.ids = np.insert(self.ids, positions, new_ids)
        counts = np.bincount(bk, minlength=1 << self.dir_bits)
        self.offsets[1:] += np.cumsum(counts)

    def candidates(self, fp: int) -> np.ndarray:
        b = self.bucket(fp)
        lo, hi = self.offsets[b : b + 2].tolist()
        return self.ids[lo:hi]

    @property
    def nbytes(self) -> int:
        return int(self.ids.nbytes + self.offsets.nbytes)


def _dir_bits_for(n: int) -> int:
    # About 8 ids per group; at least 8 bits, at most 24 (a 128 MiB directory per table).
    return max(8, min(24, math.ceil(math.log2(max(n, 1) / 8 + 1))))


class BlockIndex:
    """Exact search of all fingerprints within ``layout.distance`` of a query. Not thread-safe:
    callers that share one index across threads hold a lock around calls (the stores do)."""

    def __init__(self, layout: Layout | None = None, tail_capacity: int = 2048) -> None:
        self.layout = layout or Layout()
        if tail_capacity < 1:
            raise ValueError("tail_capacity must be positive")
        self.tail_capacity = tail_capacity
        self._tables = [_Table(parts) for parts in self.layout.tables()]
        self._fps = np.zeros(1024, dtype=_U64)
        self._n = 0
        self._merged = 0
        self._dir_bits = 0
        self._mask = (1 << self.layout.bits) - 1
        self._rebuild()

    @property
    def distance(self) -> int:
        return self.layout.distance

    def __len__(self) -> int:
        return self._n

    @property
    def nbytes(self) -> int:
        """Bytes held by the index arrays (fingerprints, ids, directories)."""
        return int(self._fps[: self._n].nbytes) + sum(t.nbytes for t in self._tables)

    def fingerprint(self, i: int) -> int:
        if not 0 <= i < self._n:
            raise IndexError(i)
        return int(self._fps[i])

    def fingerprints(self) -> np.ndarray:
        """A read-only view of all fingerprints in id order."""
        view = self._fps[: self._n]
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
        self._n += 1
        if self._n - self._merged >= self.tail_capacity:
            self._merge()
        return self._n - 1

    def add_many(self, fps: np.ndarray | list[int]) -> None:
        """Store many fingerprints at once (one rebuild, not one merge per item)."""
        arr = np.asarray(fps, dtype=_U64)
        if len(arr) == 0:
            return
        if self.layout.bits < 64 and int(arr.max()) > self._mask:
            raise ValueError(f"fingerprint must be an integer in [0, 2**{self.layout.bits})")
        self._grow(self._n + len(arr))
        self._fps[self._n : self._n + len(arr)] = arr
        self._n += len(arr)
        self._rebuild()

    def _grow(self, need: int) -> None:
        if need <= len(self._fps):
            return
        cap = max(need, len(self._fps) + len(self._fps) // 2)
        fps = np.zeros(cap, dtype=_U64)
        fps[: self._n] = self._fps[: self._n]
        self._fps = fps

    def _rebuild(self) -> None:
        self._dir_bits = _dir_bits_for(self._n)
        fps = self._fps[: self._n]
        for t in self._tables:
            t.rebuild(fps, self._dir_bits)
        self._merged = self._n

    def _merge(self) -> None:
        if _dir_bits_for(self._n) > self._dir_bits + 1:
            self._rebuild()
            return
        new = self._fps[self._merged : self._n]
        for t in self._tables:
            t.merge(new, self._merged)
        self._merged = self._n

    def query(self, fp: int) -> list[tuple[int, int]]:
        """``(id, distance)`` of every stored fingerprint within the distance, nearest first
        (ties: oldest first)."""
        fp = self._check(fp)
        if self._n == 0:
            return []
        q = _U64(fp)
        k = self.layout.distance
        parts = [t.candidates(fp) for t in self._tables]
        cand = np.concatenate(parts) if self._merged else np.zeros(0, dtype=np.uint32)
        hits: list[tuple[int, int]] = []
        if len(cand):
            d = np.bitwise_count(self._fps[cand] ^ q)
            sel = d <= k
            if sel.any():
                hits.extend(zip(cand[sel].tolist(), d[sel].tolist(), strict=True))
        if self._merged < self._n:
            tail = self._fps[self._merged : self._n]
            d = np.bitwise_count(tail ^ q)
            for i in np.flatnonzero(d <= k).tolist():
                hits.append((self._merged + i, int(d[i])))
        if not hits:
            return []
        return sorted(set(hits), key=lambda h: (h[1], h[0]))

    def nearest(self, fp: int) -> tuple[int, int] | None:
        """The nearest stored fingerprint within the distance as ``(id, distance)``, or None."""
        hits = self.query(fp)
        return hits[0] if hits else None
