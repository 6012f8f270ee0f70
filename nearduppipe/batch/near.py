"""The near pairs of a batch, held by their representatives (:func:`.core.collapse`): memory
grows with the records and the pairs of *distinct* fingerprints, never with the square of a
group of exact copies.

A page copied 200,000 times is one representative; its copies make ~2·10^10 pairs of records,
which :class:`NearPairs` counts without listing and lists (:meth:`NearPairs.chunks`) only when
asked (``dedup --pairs``), a bounded chunk at a time, in the order of the records.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

__all__ = ["NearPairs", "csr", "gather"]

CHUNK_ROWS = 1 << 16  # pairs per chunk of :meth:`NearPairs.chunks`


def csr(owner: np.ndarray, values: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """``(start, sorted values)``: the values of owner ``o`` are ``values[start[o]:start[o+1]]``
    (in their given order)."""
    order = np.argsort(owner, kind="stable")
    start = np.searchsorted(owner[order], np.arange(size + 1))
    return start.astype(np.int64), values[order]


def gather(start: np.ndarray, values: np.ndarray, owners: np.ndarray) -> np.ndarray:
    """The values of every owner in ``owners`` (a :func:`csr`), concatenated in that order."""
    sizes = start[owners + 1] - start[owners]
    total = int(sizes.sum())
    if not total:
        return values[:0]
    at = np.repeat(start[owners] - (np.cumsum(sizes) - sizes), sizes) + np.arange(total)
    result: np.ndarray = values[at]
    return result


@dataclass
class NearPairs:
    """Every near pair of records, as ``index`` (the record number of each fingerprinted
    row), ``rep`` (each row's representative row: equal fingerprints), ``pairs`` (near pairs
    ``(i, j, d, wide_d)`` of representative rows, sorted) and ``has_wide`` (per row). The
    pairs of records are each copy of ``i`` with each copy of ``j`` at the representatives'
    distances, and the copies of one row with each other at distance 0."""

    index: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    rep: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    pairs: np.ndarray = field(default_factory=lambda: np.zeros((0, 4), dtype=np.int64))
    has_wide: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))

    def _copies(self) -> np.ndarray:
        return np.bincount(self.rep, minlength=len(self.rep)) if len(self.rep) else self.rep

    def __len__(self) -> int:
        """The number of pairs of records (counted, not listed)."""
        copies = self._copies().astype(np.int64)
        within = int((copies * (copies - 1) // 2).sum())
        i, j = self.pairs[:, 0], self.pairs[:, 1]
        return within + int((copies[i] * copies[j]).sum())

    def in_pairs(self) -> np.ndarray:
        """Record numbers of every record in some pair, sorted."""
        copies = self._copies()
        reps = np.zeros(len(self.rep), dtype=bool)
        reps[copies > 1] = True
        reps[self.pairs[:, 0]] = True
        reps[self.pairs[:, 1]] = True
        rows = np.flatnonzero(reps[self.rep]) if len(self.rep) else self.rep
        result: np.ndarray = self.index[rows]
        return result

    def chunks(self, rows: int = CHUNK_ROWS) -> Iterator[np.ndarray]:
        """The pairs of records ``(a, b, d, wide_d)`` (record numbers, ``a < b``) sorted by
        ``(a, b)``, in chunks of about ``rows`` (one row's pairs are never split): memory is
        a chunk, whatever their number."""
        n = len(self.rep)
        if not n:
            return
        members_start, members = csr(self.rep, np.arange(n, dtype=np.int64), n)
        i, j = self.pairs[:, 0], self.pairs[:, 1]
        ends = np.concatenate([i, j])
        other = np.concatenate([j, i])
        info = np.concatenate([self.pairs[:, 2:], self.pairs[:, 2:]])
        nbr_start, nbr_at = csr(ends, np.arange(len(ends), dtype=np.int64), n)
        copies = np.diff(members_start)
        wanted = (copies[self.rep] > 1) | (np.diff(nbr_start)[self.rep] > 0)
        out: list[np.ndarray] = []
        held = 0
        for a in np.flatnonzero(wanted).tolist():
            r = int(self.rep[a])
            own = members[members_start[r] : members_start[r + 1]]
            own = own[own > a]
            parts_b = [own]
            parts_d = [np.zeros(len(own), dtype=np.int64)]
            parts_w = [np.full(len(own), 0 if self.has_wide[a] else -1, dtype=np.int64)]
            edges = nbr_at[nbr_start[r] : nbr_start[r + 1]]
            if len(edges):
                them = other[edges]
                b = gather(members_start, members, them)
                sizes = copies[them]
                d = np.repeat(info[edges, 0], sizes)
                w = np.repeat(info[edges, 1], sizes)
                later = b > a
                parts_b.append(b[later])
                parts_d.append(d[later])
                parts_w.append(w[later])
            b = np.concatenate(parts_b)
            if not len(b):
                continue
            order = np.argsort(b, kind="stable")
            block = np.empty((len(b), 4), dtype=np.int64)
            block[:, 0] = self.index[a]
            block[:, 1] = self.index[b[order]]
            block[:, 2] = np.concatenate(parts_d)[order]
            block[:, 3] = np.concatenate(parts_w)[order]
            out.append(block)
            held += len(b)
            if held >= rows:
                yield np.concatenate(out)
                out, held = [], 0
        if out:
            yield np.concatenate(out)

    def array(self) -> np.ndarray:
        """Every pair of records at once (:meth:`chunks` concatenated): for small batches
        and tests; a group of ``c`` copies alone makes ``c(c-1)/2`` rows."""
        parts = list(self.chunks())
        if not parts:
            return np.zeros((0, 4), dtype=np.int64)
        return np.concatenate(parts)
