"""All near-duplicate pairs of a fixed set of fingerprints at once (Manku et al. §3.1.2, batch).

N single queries cost N lookups; the batch form sorts each permuted table once and matches equal
block keys: for every table (a choice of ``blocks - k`` of ``blocks`` blocks) each fingerprint's
key and position are packed into one uint64 and sorted, so fingerprints sharing a key become
neighbours; comparing the sorted array with itself shifted by 1, 2, … yields every pair sharing
that table's key without materialising all pairs of a large run. Candidates are verified by
popcount; a pair found by several tables is kept once. By the pigeonhole argument of
:mod:`nearduppipe.index`, every pair within distance ``k`` shares some table's key, so the result
equals an all-pairs scan.

The default layout for batches is ``k + 3`` blocks (keys of 3 blocks, about 28-32 bits for
k = 3..4): long keys make runs of equal keys short, so the work is dominated by one sort per
table.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..fingerprint.rule import Rule
from ..index.search import BlockIndex, Layout, kernels, table_keys

__all__ = ["all_pairs", "components", "cross_pairs", "near_pairs", "near_pairs_against", "verdicts"]

_U64 = np.uint64
VERDICT_CHUNK = 1 << 18  # pairs whose 512-bit words are compared at once (~50 MB of words)


def _pairs_sharing_keys(keys: np.ndarray, key_bits: int) -> tuple[np.ndarray, np.ndarray]:
    """Index pairs (i < j) whose keys are equal."""
    n = len(keys)
    idx_bits = max(1, int(n - 1).bit_length())
    if key_bits + idx_bits <= 64:  # one sort of packed values: faster than argsort
        packed = np.sort((keys << _U64(idx_bits)) | np.arange(n, dtype=_U64))
        skeys = packed >> _U64(idx_bits)
        sidx = (packed & _U64((1 << idx_bits) - 1)).astype(np.int64)
    else:
        order = np.argsort(keys, kind="stable")
        skeys, sidx = keys[order], order.astype(np.int64)
    firsts: list[np.ndarray] = []
    seconds: list[np.ndarray] = []
    same = skeys[1:] == skeys[:-1]
    shift = 1
    while same.any():  # runs of equal keys: pair each element with the one `shift` later
        pos = np.flatnonzero(same)
        firsts.append(sidx[pos])
        seconds.append(sidx[pos + shift])
        shift += 1
        same = same[:-1] & (skeys[shift:] == skeys[:-shift]) if shift < n else same[:0]
    if not firsts:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty
    a, b = np.concatenate(firsts), np.concatenate(seconds)
    return np.minimum(a, b), np.maximum(a, b)


def _sorted_keys(keys: np.ndarray, key_bits: int) -> tuple[np.ndarray, np.ndarray]:
    """``keys`` sorted, and the order that sorts them: one sort of packed ``(key, index)``
    values where they fit 64 bits (a stable argsort took twice as long at 10 M)."""
    n = len(keys)
    idx_bits = max(1, int(n - 1).bit_length())
    if key_bits + idx_bits > 64:
        order = np.argsort(keys, kind="stable")
        return keys[order], order
    packed = np.sort((keys << _U64(idx_bits)) | np.arange(n, dtype=_U64))
    return packed >> _U64(idx_bits), (packed & _U64((1 << idx_bits) - 1)).astype(np.int64)


def all_pairs(
    fingerprints: np.ndarray | list[int],
    distance: int = 3,
    blocks: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> np.ndarray:
    """Every pair ``(i, j, d)`` with ``i < j`` and ``hamming(fps[i], fps[j]) = d <= distance``,
    sorted by ``(i, j)``, as an ``(m, 3)`` int64 array. ``progress(1)`` is called per table."""
    fps = np.asarray(fingerprints, dtype=_U64)
    layout = Layout(
        distance=distance, blocks=blocks if blocks is not None else min(64, distance + 3)
    )
    found: list[np.ndarray] = []
    n = len(fps)
    for parts in layout.tables():
        keys = table_keys(fps, parts)
        i, j = _pairs_sharing_keys(keys, sum(w for _, w in parts))
        if len(i):
            d = np.bitwise_count(fps[i] ^ fps[j]).astype(np.int64)
            keep = d <= distance
            found.append(np.stack([i[keep], j[keep], d[keep]], axis=1))
        if progress is not None:
            progress(1)
    if not found:
        return np.zeros((0, 3), dtype=np.int64)
    pairs = np.concatenate(found)
    code = pairs[:, 0] * max(n, 1) + pairs[:, 1]
    _, first = np.unique(code, return_index=True)
    result: np.ndarray = pairs[first]
    return result


def cross_pairs(
    queries: np.ndarray,
    stored: np.ndarray,
    distance: int = 3,
    blocks: int | None = None,
    workers: int = 1,
) -> np.ndarray:
    """Every pair ``(q, s, d)`` of a query and a stored fingerprint within ``distance``,
    sorted by ``(q, s)``: no pair of two stored ones (or of two queries) is looked at. For
    each table (default ``distance + 2`` blocks: keys of 2 blocks, ~25 bits at k = 3, so a
    query meets ``n / 2^25`` stored keys) the stored keys are sorted once and every query's
    run of equal keys found by binary search; beyond radius 4, a :class:`BlockIndex` of the
    stored set answers every query in one compiled loop (:meth:`BlockIndex.cross`, in
    ``workers`` threads)."""
    qs, st = np.asarray(queries, dtype=_U64), np.asarray(stored, dtype=_U64)
    found: list[np.ndarray] = []
    if distance > 4:
        index = BlockIndex(Layout(distance=distance))
        index.add_many(st)
        found.append(index.cross(qs, workers))
    else:
        layout = Layout(distance=distance, blocks=blocks or min(64, distance + 2))
        for parts in layout.tables():
            skeys, qkeys = table_keys(st, parts), table_keys(qs, parts)
            bits = sum(w for _, w in parts)
            skeys, order = _sorted_keys(skeys, bits)
            qkeys, qorder = _sorted_keys(qkeys, bits)  # (sorted needles: a cache-friendly search)
            lo = np.searchsorted(skeys, qkeys, "left")
            count = np.searchsorted(skeys, qkeys, "right") - lo
            qi = np.repeat(qorder, count)
            at = np.arange(len(qi)) - np.repeat(np.cumsum(count) - count, count)
            si = order[np.repeat(lo, count) + at].astype(np.int64)
            d = np.bitwise_count(qs[qi] ^ st[si]).astype(np.int64)
            keep = d <= distance
            found.append(np.stack([qi[keep], si[keep], d[keep]], axis=1))
    if not found:
        return np.zeros((0, 3), dtype=np.int64)
    pairs = np.concatenate(found).reshape(-1, 3)
    _, first = np.unique(pairs[:, 0] * max(len(st), 1) + pairs[:, 1], return_index=True)
    result: np.ndarray = pairs[first]
    return result


def near_pairs_against(
    queries: tuple[np.ndarray, np.ndarray, np.ndarray],
    stored: tuple[np.ndarray, np.ndarray, np.ndarray],
    rule: Rule,
    workers: int = 1,
) -> np.ndarray:
    """Every near-duplicate pair ``(q, s, d, wide_d)`` of a query and a stored record under
    ``rule`` (each side: 64-bit fingerprints, 512-bit words, has-wide flags), sorted by
    ``(q, s)``: :func:`cross_pairs` (in ``workers`` threads), then the 512-bit verdict."""
    (qf, qw, qh), (sf, sw, sh) = queries, stored
    pairs = cross_pairs(qf, sf, rule.radius, workers=workers)
    if not len(pairs):
        return np.zeros((0, 4), dtype=np.int64)
    # the verdict over one array of both sides: queries first, stored from len(qf) on
    wide = np.concatenate([np.asarray(qw), np.asarray(sw)])
    has = np.concatenate([np.asarray(qh, dtype=bool), np.asarray(sh, dtype=bool)])
    shifted = pairs + np.array([0, len(qf), 0], dtype=np.int64)
    near, dw = verdicts(shifted, wide, has, rule)
    result: np.ndarray = np.concatenate([pairs, dw[:, None]], axis=1)[near]
    return result


def verdicts(
    pairs: np.ndarray, wide: np.ndarray, has_wide: np.ndarray, rule: Rule
) -> tuple[np.ndarray, np.ndarray]:
    """:meth:`Rule.is_near` over candidate pairs ``(i, j, d)`` at once: a mask of the pairs that
    are near-duplicates, and each pair's wide distance (-1 where either side has none)."""
    i, j, d = pairs[:, 0], pairs[:, 1], pairs[:, 2]
    both = has_wide[i] & has_wide[j]
    counts = np.empty(len(pairs), dtype=np.int64)
    for at in range(0, len(pairs), VERDICT_CHUNK):  # (each side's words: 64 B a pair)
        x, y = i[at : at + VERDICT_CHUNK], j[at : at + VERDICT_CHUNK]
        counts[at : at + VERDICT_CHUNK] = np.bitwise_count(wide[x] ^ wide[y]).sum(
            axis=1, dtype=np.int64
        )
    dw = np.where(both, counts, np.int64(-1))
    threshold = rule.wide_threshold
    if threshold is None:
        return d <= rule.radius, dw
    legacy = min(rule.radius, rule.legacy_distance)
    near = (d <= rule.radius) & np.where(both, dw <= threshold, d <= legacy)
    return near, dw


def near_pairs(
    fingerprints: np.ndarray,
    wide: np.ndarray,
    has_wide: np.ndarray,
    rule: Rule,
    progress: Callable[[int], None] | None = None,
    workers: int = 1,
) -> np.ndarray:
    """Every near-duplicate pair ``(i, j, d, wide_d)`` (``i < j``, sorted) under ``rule``: the
    same two stages as a store's check. Candidates within the rule's 64-bit radius come from
    the sorted tables of :func:`all_pairs` up to radius 4, and from a :class:`BlockIndex`
    self-join beyond (compiled, in ``workers`` threads: pigeonhole tables for a wide radius
    would need hundreds of tables); both are exact for the radius. ``progress(k)`` reports k
    more fingerprints done."""
    fps = np.asarray(fingerprints, dtype=_U64)
    n = len(fps)
    if rule.radius <= 4:
        pairs = all_pairs(fps, rule.radius)
        if progress is not None:
            progress(n)
    else:
        index = BlockIndex(Layout(distance=rule.radius))
        index.add_many(fps)
        pairs = index.pairs(workers)
        if progress is not None:
            progress(n)
    if not len(pairs):
        return np.zeros((0, 4), dtype=np.int64)
    near, dw = verdicts(pairs, np.asarray(wide), np.asarray(has_wide, dtype=bool), rule)
    kept = np.flatnonzero(near)
    result = np.empty((len(kept), 4), dtype=np.int64)  # (column by column: no full copies)
    for c in range(3):
        result[:, c] = pairs[kept, c]
    result[:, 3] = dw[kept]
    return result


def components(n: int, pairs: np.ndarray) -> np.ndarray:
    """Connected components of the near-duplicate graph: ``label[i]`` is the smallest index of
    i's component, so a component's kept record (its first in input order) is ``label == i``.
    A compiled union-find: 10 M items in well under a second, where a Python loop took 4 s."""
    first = np.ascontiguousarray(pairs[:, 0], dtype=np.int64)
    second = np.ascontiguousarray(pairs[:, 1], dtype=np.int64)
    labels: np.ndarray = kernels().components(n, first, second)
    return labels
