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


def _clustered_with_words(
    n_centres: int, radius: int, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Near copies of each centre at 0, 1, ``radius - 1``, ``radius`` and ``radius + 1`` bits,
    the extreme values, and 512-bit words 5-45 bits from their centre's (pairs on both sides
    of the wide threshold), 20 % of the rows without words; in shuffled order."""
    rng = np.random.default_rng(seed)
    top = 2**64 - 1
    fps, centre_of = [], []
    for c, centre in enumerate(rng.integers(0, top, n_centres, dtype=U64, endpoint=True).tolist()):
        for k in (0, 1, max(radius - 1, 0), radius, radius + 1):
            fp = centre
            for b in rng.choice(64, k, replace=False).tolist():
                fp ^= 1 << b
            fps.append(fp)
            centre_of.append(c)
    fps += [0, top, 1 << 63, top, 0]
    centre_of += [0] * 5
    words = rng.integers(0, top, (n_centres, 8), dtype=U64, endpoint=True)
    wides = words[centre_of]
    for row in wides:
        for b in rng.choice(512, int(rng.integers(5, 45)), replace=False).tolist():
            row[b // 64] ^= U64(1) << U64(b % 64)
    order = rng.permutation(len(fps))
    has = rng.random(len(fps)) < 0.8
    return np.array(fps, dtype=U64)[order], wides[order], has[order]


def _rule_scan(
    shared: tuple[np.ndarray, np.ndarray, np.ndarray], rule: Rule, split: int | None
) -> list[list[int]]:
    """Every ``[i, j, d, dw]`` (``i < j``; ``i < split <= j`` with a split) that ``rule.is_near``
    calls near, sorted: a double loop over Python ints."""
    fps, wides, has = shared
    n = len(fps)
    found = []
    for i in range(n if split is None else split):
        for j in range(i + 1 if split is None else split, n):
            d = (int(fps[i]) ^ int(fps[j])).bit_count()
            dw = int(np.bitwise_count(wides[i] ^ wides[j]).sum()) if has[i] and has[j] else None
            if rule.is_near(d, dw):
                found.append([i, j, d, -1 if dw is None else dw])
    return sorted(found)


@pytest.mark.parametrize(
    "rule",
    [
        Rule(radius=4),  # the last radius of the slices of queries
        Rule(radius=5),  # the first of the shares of buckets
        Rule(radius=0),
        Rule(radius=16, similarity=0.9),
        Rule(radius=8, legacy_distance=8),
        Rule.paper(1),
    ],
    ids=lambda r: f"similarity={r.similarity}-radius={r.radius}-legacy={r.legacy_distance}",
)
@pytest.mark.parametrize("split", [None, 0, 1, 60, 159, 160])
def test_the_tasks_with_the_wide_verdict_are_the_rules_full_scan(
    rule: Rule, split: int | None
) -> None:
    """Under the two-stage rule (512-bit words for most rows, the 64-bit legacy distance for
    the others), on either side of the radius-4 switch, with no stored or no query rows (a
    split at 0 or at the end), 1, 2, 5 or more tasks than rows: the tasks' pairs together
    are the rule's over all pairs, each once, ``i < j``, with the right wide distance."""
    shared = _clustered_with_words(31, rule.radius, seed=rule.radius)
    n = len(shared[0])
    assert n == 160
    want = _rule_scan(shared, rule, split)
    for parts in (1, 2, 5, n + 3):
        found = np.concatenate([slice_pairs(shared, rule, p, parts, split) for p in range(parts)])
        got = found.tolist()
        assert sorted(got) == want and len(got) == len(want), parts
    if split in (None, 60):
        assert len(want) > 20


@pytest.mark.parametrize("radius", [3, 4, 5, 8])
@pytest.mark.parametrize("split", [None, 90])
def test_identical_fingerprints_in_every_task(radius: int, split: int | None) -> None:
    """Every fingerprint the same but one (the top bit flipped): every pair is near, in one
    bucket of every table."""
    fps = np.full(180, (1 << 63) | 5, dtype=U64)
    fps[17] ^= U64(1 << 63)
    shared = (fps, np.zeros((180, 8), dtype=U64), np.zeros(180, dtype=bool))
    rule = Rule.paper(radius)
    want = _scan(fps, radius, split)
    for parts in (1, 3, 7):
        found = np.concatenate([slice_pairs(shared, rule, p, parts, split) for p in range(parts)])
        assert sorted(found[:, :3].tolist()) == want and len(found) == len(want)
        assert (found[:, 3] == -1).all()
