"""The join of a cluster engine when the representatives are few enough to send whole to
every task (Spark's broadcast): the local engine's own exact search (:mod:`.pairs`), cut by
rows. Each task indexes every representative and queries its slice of them
(:func:`.pairs.cross_pairs`), keeping a pair from the row with the smaller id, so the slices'
pairs together are the local engine's, each once; the 512-bit verdict runs in the task. No
row is exploded or shuffled: the cost of a task is the index of ``n`` fingerprints and
``n / slices`` queries. Past :data:`BROADCAST_BYTES` the engine shuffles instead
(:mod:`.engine_frames`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..fingerprint.rule import Rule
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


def slice_pairs(shared: Shared, rule: Rule, lo: int, hi: int, split: int | None) -> np.ndarray:
    """Near pairs ``(i, j, d, dw)``, ``i < j``, whose smaller id lies in ``[lo, hi)``; with
    ``split``, only pairs of a stored id (``< split``) and a query (from it on), and
    ``[lo, hi)`` counts the queries."""
    fps, wides, has_wide = shared
    if split is None:
        p = cross_pairs(fps[lo:hi], fps, rule.radius)
        p = p[p[:, 1] > p[:, 0] + lo]  # (each pair from its smaller id; not itself)
        p[:, 0] += lo
    else:
        q = cross_pairs(fps[split + lo : split + hi], fps[:split], rule.radius)
        p = np.stack([q[:, 1], q[:, 0] + split + lo, q[:, 2]], axis=1)
    near, dw = verdicts(p, wides, has_wide, rule)
    out: np.ndarray = np.concatenate([p, dw[:, None]], axis=1)[near].reshape(-1, 4)
    return out.astype(np.int64)
