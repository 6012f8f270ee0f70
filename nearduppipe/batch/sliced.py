"""The join of a cluster engine when the representatives are few enough to send whole to
every task (Spark's broadcast): the local engine's own exact search, shared out among tasks
(:func:`slice_pairs`): each task indexes every representative and takes its share of the
index's buckets for every query (or, up to radius 4, its slice of the queries), so the tasks'
pairs together are the local engine's, each once; the 512-bit verdict runs in the task. No
row is exploded or shuffled: the cost of a task is the index of ``n`` fingerprints and its
share of the join. Past :data:`BROADCAST_BYTES` the engine shuffles instead
(:mod:`.engine_frames`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..fingerprint.rule import Rule
from ..index.layout import Layout
from ..index.search import BlockIndex
from .engine_frames import WIDE_COLUMNS
from .pairs import cross_pairs, verdicts

__all__ = ["BROADCAST_BYTES", "Shared", "frame_arrays", "slice_pairs", "slices"]

# the arrays sent to every task: 73 B a row with the 512-bit words (14 M rows), 9 B without
# them (the paper's rule: 119 M); each task holds them and an index of the 64-bit ones
BROADCAST_BYTES = 1 << 30

Shared = tuple[np.ndarray, np.ndarray, np.ndarray]  # 64-bit fps, 512-bit words, has-wide


def frame_arrays(frame: Any) -> Shared:
    """A join's frame (:func:`.engine_frames.fingerprint_frame`, maybe without its words:
    zeros then) as arrays, in id order."""
    f: Any = frame
    n = len(f)
    fps = f["fp"].to_numpy(dtype=np.int64).view(np.uint64)
    if "w0" in f.columns:
        wides = np.stack([f[c].to_numpy(dtype=np.int64) for c in WIDE_COLUMNS], axis=1)
        wides = wides.view(np.uint64).reshape(n, 8)
    else:
        wides = np.zeros((n, 8), dtype=np.uint64)
    return fps, wides, f["hw"].to_numpy(dtype=bool)


def slices(n: int, count: int) -> list[tuple[int, int]]:
    """``count`` ranges of rows covering ``0..n`` (fewer when ``n`` is smaller)."""
    step = max(1, -(-n // max(1, count)))
    return [(lo, min(n, lo + step)) for lo in range(0, n, step)]


def slice_pairs(shared: Shared, rule: Rule, part: int, parts: int, split: int | None) -> np.ndarray:
    """Near pairs ``(i, j, d, dw)``, ``i < j``, of the ``part``-th of ``parts`` tasks; with
    ``split``, only pairs of a stored id (``< split``) and a query (from it on). Beyond radius
    4 a task indexes the stored ids and takes every query but only its share of the index's
    buckets (:meth:`BlockIndex.join_share`: a bucket is read once for all the queries that
    probe it, as in the local engine's join); up to radius 4, its slice of the queries against
    the sorted tables (:func:`.pairs.cross_pairs`)."""
    fps, wides, has_wide = shared
    queries, stored = (fps, fps) if split is None else (fps[split:], fps[:split])
    if rule.radius > 4:
        index = BlockIndex(Layout(distance=rule.radius))
        index.add_many(stored)
        q = index.join_share(queries, part, parts, upper=split is None)
    else:
        ranges = slices(len(queries), parts)
        lo, hi = ranges[part] if part < len(ranges) else (0, 0)
        q = cross_pairs(queries[lo:hi], stored, rule.radius)
        q[:, 0] += lo
        if split is None:
            q = q[q[:, 1] > q[:, 0]]  # (each pair from its smaller id; not itself)
    p = q if split is None else np.stack([q[:, 1], q[:, 0] + split, q[:, 2]], axis=1)
    near, dw = verdicts(p, wides, has_wide, rule)
    out: np.ndarray = np.concatenate([p, dw[:, None]], axis=1)[near].reshape(-1, 4)
    return out.astype(np.int64)
