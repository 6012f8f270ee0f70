"""batch/sliced.py: the broadcast join's tasks (``slice_pairs``), each holding every
fingerprint, together give exactly the local engine's pairs (a full scan here), each once:
self-joins and joins against stored ids, beyond radius 4 (shares of the index's buckets) and
up to it (slices of the queries), with more tasks than rows too."""

from __future__ import annotations

import numpy as np
import pytest

from nearduppipe.batch.sliced import slice_pairs
from nearduppipe.fingerprint.rule import Rule

U64 = np.uint64


def _fingerprints(n: int, seed: int) -> np.ndarray:
    """Clusters of near copies (1-9 bits), exact copies and random fingerprints."""
    rng = np.random.default_rng(seed)
    centres = rng.integers(0, 2**64 - 1, n // 20, dtype=U64, endpoint=True)
    out = []
    for c in centres.tolist():
        for _ in range(8):
            fp = c
            for b in rng.choice(64, int(rng.integers(0, 10)), replace=False).tolist():
                fp ^= 1 << b
            out.append(fp)
    out += out[:50]
    out += rng.integers(0, 2**64 - 1, n - len(out), dtype=U64, endpoint=True).tolist()
    return np.array(out[:n], dtype=U64)


def _scan(fps: np.ndarray, radius: int, split: int | None) -> list[list[int]]:
    found = []
    for i in range(len(fps) if split is None else split):
        d = np.bitwise_count(fps ^ fps[i]).astype(np.int64)
        lo = i + 1 if split is None else split
        for j in np.flatnonzero(d[lo:] <= radius).tolist():
            found.append([i, j + lo, int(d[j + lo])])
    return sorted(found)


@pytest.mark.parametrize("radius", [8, 3])
@pytest.mark.parametrize("split", [None, 700])
@pytest.mark.parametrize("parts", [1, 3, 4])
def test_the_tasks_together_are_the_full_join(radius: int, split: int | None, parts: int) -> None:
    fps = _fingerprints(2000, seed=radius * 10 + parts)
    n = len(fps)
    wides = np.zeros((n, 8), dtype=U64)
    has = np.zeros(n, dtype=bool)  # (no wide words: the 64-bit rule decides)
    rule = Rule.paper(radius)
    found = np.concatenate([
        slice_pairs((fps, wides, has), rule, part, parts, split) for part in range(parts)
    ])  # fmt: skip
    got = sorted(found[:, :3].tolist())
    want = _scan(fps, radius, split)
    assert got == want
    assert len(want) > 50


def test_more_tasks_than_rows() -> None:
    far = ~5 & (2**64 - 1)
    fps = np.array([5, 5 ^ 3, far, far ^ 1], dtype=U64)
    shared = (fps, np.zeros((4, 8), dtype=U64), np.zeros(4, dtype=bool))
    for radius in (8, 3):
        rule = Rule.paper(radius)
        found = np.concatenate([slice_pairs(shared, rule, p, 6, None) for p in range(6)])
        assert sorted(found[:, :3].tolist()) == [[0, 1, 2], [2, 3, 1]]
